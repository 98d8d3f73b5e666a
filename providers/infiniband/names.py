"""Readable names for switches and for groups of switches, as people read them on the rack.

`MF0;A09-P1-IBLEAF-04-04:MQM9701/U1` -> `a09-p1-ibleaf-04-04`. A switch whose description says nothing
(empty, a vendor default) or is shared with another switch is named by its GUID. A group of switches is
named by its members' common pattern with the varying part as ranges of the members present
(`a09-p1-ibleaf-01..04-01`, or `a09-p1-ibleaf-01..02_04-01` when `03-01` is not in the fabric).
"""

from __future__ import annotations

import re
from collections import Counter
from itertools import cycle
from math import prod
from typing import Iterable, Mapping, Sequence

from labeler.topology.labelvalues import readable, short_hash

# Descriptions a switch ships with: they name the product, not the switch.
_DEFAULT_SWITCH = re.compile(r"(?i)^$|(mellanox|nvidia) technologies")
_SEPARATORS = re.compile(r"([-_.])")
_DIGITS = re.compile(r"([0-9]+)")  # ASCII digits only: `²` and `٣` sort as text


def switch_label(desc: str) -> str | None:
    """The readable part of a switch description, lower-cased; None for a vendor default."""
    text = desc.strip()
    if _DEFAULT_SWITCH.search(text):
        return None
    text = text.rsplit(";", 1)[-1]  # `MF0;` management prefix
    text = text.split(":", 1)[0]  # `:MQM9701/U1` model suffix
    return readable(text).lower() or None


def switch_names(descs: Mapping[int, str], guids: Sequence[int] | None = None) -> dict[int, str]:
    """Switch -> readable unique name; GUID-based where the description is a default or not unique. Switches
    are fabric nodes whose GUIDs are `guids[node]`, or GUIDs themselves when `guids` is None."""
    labels = {switch: switch_label(desc) for switch, desc in descs.items()}
    counts = Counter(label for label in labels.values() if label)
    return {switch: label if label and counts[label] == 1 else f"sw-{guids[switch] if guids else switch:016x}"
            for switch, label in labels.items()}


def natural_key(text: str) -> tuple:
    """Sort `leaf-2` before `leaf-10`. Split by its digit runs, a text has them at the odd places and what lies
    between them (no digit: the runs are whole) at the even ones."""
    return tuple((0, int(part), "") if odd else (1, 0, part) for odd, part in zip(cycle((False, True)),
                                                                                  _DIGITS.split(text)))


def group_name(members: Iterable[str]) -> str:
    """One readable name for a set of names: the shared pattern with the varying part written as runs.

    `a09-p1-ibleaf-01-01`, `...-02-01`, `...-03-01` -> `a09-p1-ibleaf-01..03-01`. A name claims no member
    that is absent: with `03-01` missing it is `a09-p1-ibleaf-01..02_04-01`, and when several parts vary
    but not every combination is present (`01-01` and `02-02`), or the names differ in shape, it is
    `<first>-and-<n-1>-more`. Two groups may get the same name; `unique_names` tells them apart.
    """
    names = sorted(set(members), key=natural_key)
    if len(names) == 1:
        return names[0]
    split = [_SEPARATORS.split(name) for name in names]
    if len({len(parts) for parts in split}) != 1 or any(
            parts[i] != split[0][i] for parts in split for i in range(1, len(parts), 2)):
        return _first_and_more(names)
    values = [sorted({parts[i] for parts in split}, key=natural_key) for i in range(len(split[0]))]
    if prod(len(v) for v in values) != len(names):
        return _first_and_more(names)  # the parts vary together: ranges would claim absent members
    return "".join(v[0] if len(v) == 1 else _runs(v) for v in values)


def _first_and_more(names: list[str]) -> str:
    return f"{names[0]}-and-{len(names) - 1}-more"


def _runs(values: list[str]) -> str:
    """`01, 02, 04` -> `01..02_04`: ranges over consecutive numbers only, other values listed."""
    if not all(v.isdigit() for v in values):
        return "_".join(values)
    runs: list[list[str]] = []
    for value in values:
        if runs and int(value) == int(runs[-1][-1]) + 1:
            runs[-1].append(value)
        else:
            runs.append([value])
    return "_".join(run[0] if len(run) == 1 else f"{run[0]}..{run[-1]}" for run in runs)


def unique_names(groups: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """Group identity -> name from its members; names two groups share get a hash of the identity."""
    names = {identity: group_name(members) for identity, members in groups.items()}
    counts = Counter(names.values())
    return {identity: name if counts[name] == 1 else f"{name}-{short_hash(identity)}"
            for identity, name in names.items()}
