"""Snapshot files (`topolabel discover -o json`) read in a fraction of the time: decoded into their fixed shape.

A snapshot is untrusted input, and large (100,000 nodes: 15 MB). Read as generic data it was parsed, walked
again to bound its nesting, then checked node by node (`snapshot_from_dict`): about 1 CPU s at that size.
Here msgspec decodes the JSON straight into the snapshot's shape, so nesting is bounded by the shape itself
and only strings reach the checks, which then run over whole columns (a level's values for every node) at
once. Anything this path does not take as it stands (YAML, an unknown key, a value of another type, any check
failing) goes the generic way, which accepts it or names the problem exactly as before: this path accepts
only what that one accepts, with the same snapshot.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Collection, Iterable

import msgspec

from ..gcpause import paused_gc
from ..io.documents import load
from ..io.files import read_bytes, text_of
from .labelvalues import all_valid_values
from .model import Level, Problem, Snapshot, is_tree
from .placement import MAX_NODE_NAME, check_levels, snapshot_from_dict


class _Level(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    label: str


class _Problem(msgspec.Struct, forbid_unknown_fields=True):
    source: str = ""
    message: str = ""
    node: str | None = None
    claim: bool = False


class _Snapshot(msgspec.Struct, forbid_unknown_fields=True):
    """The snapshot format as `Snapshot.to_dict` writes it."""

    levels: list[_Level]
    nodes: dict[str, dict[str, str]]
    problems: list[_Problem]


@paused_gc()  # a dict per node, no cycles: the collector would only walk them
def read_snapshot(path: str) -> Snapshot:
    """A snapshot file (or '-' for stdin), checked like discovery output: it is untrusted input."""
    data = read_bytes(path)
    found = _decoded(data)
    if found is None:
        return _generic(data, path)
    # The file's bytes go before the checks (1,000,000 nodes: 156 MB of a peak of 890); handed to a function
    # as an argument they could not: the caller's reference lives until that function returns.
    del data
    return _snapshot(found, path)


@paused_gc()  # a dict per node, no cycles: the collector would only walk them
def parse_snapshot(data: bytes, origin: str) -> Snapshot:
    """A snapshot from the bytes of a file (JSON or YAML) named `origin`."""
    found = _decoded(data)
    return _generic(data, origin) if found is None else _snapshot(found, origin)


def _decoded(data: bytes) -> _Snapshot | None:
    """The file decoded into the snapshot's shape; None when it is not JSON of that shape."""
    try:
        return msgspec.json.decode(data, type=_Snapshot)
    except msgspec.MsgspecError:
        return None


def _generic(data: bytes, origin: str) -> Snapshot:
    """What the fast path does not take (YAML, another shape), read as plain data: the generic reader accepts
    it or says exactly what is wrong."""
    return snapshot_from_dict(load(text_of(data, origin), origin), origin)


def _snapshot(found: _Snapshot, origin: str) -> Snapshot:
    """The snapshot `found` holds, checked; through the generic reader when a check fails (its messages)."""
    return _checked(found, origin) or snapshot_from_dict(_as_data(found), origin)


def _checked(found: _Snapshot, origin: str) -> Snapshot | None:
    """The snapshot when `found` passes every check `snapshot_from_dict` makes and every node names exactly
    the levels, in their order; else None. Bad level keys are its errors, word for word."""
    levels = tuple(Level(lv.name, lv.label) for lv in found.levels)
    if not levels or not all(lv.name and lv.label for lv in levels):
        return None
    check_levels(levels, origin)
    names = tuple(lv.name for lv in levels)
    values = found.nodes.values()
    if not _node_names(found.nodes) or not all(map(names.__eq__, map(tuple, values))):
        return None
    columns = [list(map(itemgetter(name), values)) for name in names]
    domains = [dict(zip(column, column)) for column in columns]  # each level's values, one string per domain
    if not all(map(all_valid_values, domains)) or not is_tree(columns):
        return None
    for name, column, one in zip(names, columns, domains):
        if len(one) < len(column):  # decoding made a string per node: keep one per domain
            _share(found.nodes, name, map(one.__getitem__, column))
    return Snapshot(levels, found.nodes, [Problem(p.source, p.message, p.node, p.claim) for p in found.problems])


def _node_names(names: Collection[str]) -> bool:
    """Whether all are Kubernetes node names as `snapshot_from_dict` checks them: non-empty, at most 253
    characters, printable, no space (checked over the names joined: one pass in C)."""
    joined = "".join(names)
    return "" not in names and max(map(len, names), default=0) <= MAX_NODE_NAME and joined.isprintable() \
        and " " not in joined


def _share(nodes: dict[str, dict[str, str]], level: str, strings: Iterable[str]) -> None:
    """Each node's value at `level` replaced by the equal one of `strings` (in the nodes' order)."""
    for values, value in zip(nodes.values(), strings):
        values[level] = value


def _as_data(found: _Snapshot) -> dict[str, Any]:
    """`found` as the plain data `json` would have read (so the generic checks name its problem)."""
    data: dict[str, Any] = msgspec.to_builtins(found)
    return data
