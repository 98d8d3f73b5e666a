"""Slurm hostlist expressions: a set of names in the compressed form Slurm itself prints, `gpu[001-004,007]`.

The rules follow Slurm's `src/common/hostlist.c` (`hostlist_uniq`, then `hostlist_ranged_string`):
- a name splits into a prefix and its trailing decimal digits; a name without trailing digits stands alone;
- the digits keep their width: `n09` and `n10` share the range `n[09-10]`, while `n1` and `n01` stay apart.
  Two numbers share a range when one width prints both unchanged (`n9`, `n10` -> `n[9-10]`);
- prefixes sort in natural order (Slurm's strnatcmp), a bare name before numbered names of the same prefix,
  numbers by value within a prefix;
- runs of ranges with one prefix share a bracket; a prefix with a single number needs none:
  `a[1-2,5],b3,login`.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from functools import cmp_to_key
from typing import Iterable

_SUFFIX = re.compile(r"^(.*?)([0-9]+)$", re.S)


@dataclass
class _Range:
    """Hosts prefix+lo .. prefix+hi printed with `width` digits, or one bare name when `single`."""

    prefix: str
    lo: int = 0
    hi: int = 0
    width: int = 0
    single: bool = False


def _parse(name: str) -> _Range:
    match = _SUFFIX.match(name)
    if not match:
        return _Range(name, single=True)
    digits = match.group(2)
    return _Range(match.group(1), int(digits), int(digits), len(digits))


def _padding(num: int, width: int) -> int:
    return max(width - len(str(num)), 0)


def _common_width(n: int, wn: int, m: int, wm: int) -> int | None:
    """A width that prints both n (written with wn digits) and m (wm digits) unchanged, or None."""
    if wn == wm:
        return wn
    n_changes = _padding(n, wn) != _padding(n, wm)
    m_changes = _padding(m, wm) != _padding(m, wn)
    if n_changes and m_changes:
        return None
    return wn if n_changes else wm


def natcmp(a: str, b: str) -> int:
    """Slurm's strnatcmp: digit runs compare as numbers, or digit by digit when one starts with 0."""
    i = j = 0
    while True:
        ca, cb = a[i:i + 1], b[j:j + 1]
        if ca.isdigit() and cb.isdigit() and ca.isascii() and cb.isascii():
            result = (_compare_left if "0" in (ca, cb) else _compare_right)(a[i:], b[j:])
            if result:
                return result
        if not ca and not cb:
            return 0
        if ca != cb:
            return -1 if ca < cb else 1
        i, j = i + 1, j + 1


def _digit(text: str, k: int) -> bool:
    return k < len(text) and "0" <= text[k] <= "9"


def _compare_right(a: str, b: str) -> int:
    """Right-aligned numbers: the longer run of digits wins, else the first differing digit."""
    bias, k = 0, 0
    while True:
        da, db = _digit(a, k), _digit(b, k)
        if not da and not db:
            return bias
        if not da or not db:
            return -1 if not da else 1
        if a[k] != b[k] and not bias:
            bias = -1 if a[k] < b[k] else 1
        k += 1


def _compare_left(a: str, b: str) -> int:
    """Left-aligned numbers (a leading zero): the first differing digit wins."""
    k = 0
    while True:
        da, db = _digit(a, k), _digit(b, k)
        if not da and not db:
            return 0
        if not da or not db:
            return -1 if not da else 1
        if a[k] != b[k]:
            return -1 if a[k] < b[k] else 1
        k += 1


def _order(x: _Range, y: _Range) -> int:
    """Slurm's hostrange_cmp: prefix, bare name first, then number (or width when widths clash)."""
    result = natcmp(x.prefix, y.prefix)
    if result or x.single or y.single:
        return result or (y.single - x.single)
    common = _common_width(x.lo, x.width, y.lo, y.width)
    return x.lo - y.lo if common is not None else x.width - y.width


def _join(into: _Range, other: _Range) -> bool:
    """Merge `other` (sorted after `into`) into `into` when they touch or overlap, as hostrange_join does."""
    if into.prefix != other.prefix or into.single != other.single:
        return False
    if into.single:
        return True  # the same bare name twice
    width = _common_width(into.lo, into.width, other.lo, other.width)
    if width is None or into.hi < other.lo - 1:
        return False
    into.hi, into.width = max(into.hi, other.hi), width
    return True


def _numbers(r: _Range) -> str:
    text = f"{r.lo:0{r.width}d}"
    return text + (f"-{r.hi:0{r.width}d}" if r.hi > r.lo else "")


def _prefix_order(a: tuple[str, bool], b: tuple[str, bool]) -> int:
    """Prefixes compared naturally; of one prefix, the name without a number first."""
    return natcmp(a[0], b[0]) or b[1] - a[1]


def _sorted(names: Iterable[str]) -> list[_Range]:
    """Ranges in Slurm's order: prefixes first (few, compared naturally), then numbers within each prefix."""
    by_prefix: dict[tuple[str, bool], list[_Range]] = defaultdict(list)
    for name in set(names):
        r = _parse(name)
        by_prefix[(r.prefix, r.single)].append(r)
    prefixes = sorted(by_prefix, key=cmp_to_key(_prefix_order))
    out = []
    for prefix in prefixes:
        group = by_prefix[prefix]
        same_width = len({r.width for r in group}) == 1
        out += sorted(group, key=(lambda r: r.lo) if same_width else cmp_to_key(_order))
    return out


def compress(names: Iterable[str]) -> str:
    """The Slurm hostlist expression for `names` (duplicates merged); empty for no names."""
    ranges: list[_Range] = []
    for r in _sorted(names):
        if not (ranges and _join(ranges[-1], r)):
            ranges.append(r)
    parts, i = [], 0
    while i < len(ranges):
        if ranges[i].single:
            parts.append(ranges[i].prefix)
            i += 1
            continue
        group = [ranges[i]]
        while i + len(group) < len(ranges) and not ranges[i + len(group)].single \
                and ranges[i + len(group)].prefix == ranges[i].prefix:
            group.append(ranges[i + len(group)])
        numbers = ",".join(_numbers(r) for r in group)
        bracket = len(group) > 1 or group[0].hi > group[0].lo
        parts.append(f"{group[0].prefix}[{numbers}]" if bracket else group[0].prefix + numbers)
        i += len(group)
    return ",".join(parts)
