"""From what a source found (raw placements) to a validated snapshot of label values, and back from a file.

Sources report raw domain names as they know them (switch names, cloud ids, inventory racks). This module
checks that they form a tree, turns them into valid, readable label values that are unique per level, and
attaches the label keys. A snapshot read from a file is untrusted input and gets the same checks.
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from operator import getitem
from typing import Any, Collection, Iterable, Mapping, Sequence

from ..errors import TopologyError
from ..gcpause import paused_gc
from ..io.nodes import MANAGED_ANNOTATION, Node
from .labelvalues import is_valid_value, level_key_problems, unique_values
from .model import DEFAULT_PREFIX, Discovery, Level, Ownership, Problem, Snapshot, check_tree, ownership
MAX_LEVELS = 15  # Kueue allows 16 levels, and kubernetes.io/hostname may be the last
MAX_NODE_NAME = 253


def level_keys(level_names: Sequence[str], prefix: str = DEFAULT_PREFIX,
               overrides: Mapping[str, str] | None = None) -> tuple[Level, ...]:
    """Label keys for the levels: `prefix + name` unless overridden; invalid keys are an error."""
    overrides = overrides or {}
    levels = tuple(Level(name, overrides.get(name) or f"{prefix}{name}") for name in level_names)
    check_levels(levels, owned=ownership(prefix, overrides.values()))
    return levels


def check_levels(levels: Sequence[Level], origin: str = "", owned: Ownership | None = None) -> None:
    """Level keys topolabel may write: valid for TAS, never Kubernetes', a cloud's or a tool's whatever a config
    says, distinct, few enough for Kueue, and (with `owned`, when they are to be written) owned: an allowlist of
    topolabel's prefixes and the keys the config names. A snapshot file is checked without `owned`; the plan
    made from it checks that (`plan.make_plan`)."""
    where = f"{origin}: " if origin else ""
    for lv in levels:
        bad = level_key_problems(lv.label) + ([found] if owned and (found := owned.problem(lv.label)) else [])
        if bad:
            raise TopologyError(f"{where}label key {lv.label!r} for level {lv.name!r} " + "; ".join(bad))
    if len({lv.label for lv in levels}) != len(levels):
        raise TopologyError(f"{where}two levels share one label key: " + ", ".join(lv.label for lv in levels))
    if len({lv.name for lv in levels}) != len(levels):
        raise TopologyError(f"{where}two levels share one name: " + ", ".join(lv.name for lv in levels))
    if len(levels) > MAX_LEVELS:
        raise TopologyError(f"{where}{len(levels)} levels: Kueue allows 16 including kubernetes.io/hostname")


def pad_depths(discovery: Discovery, depth: int) -> None:
    """Give shallower paths the full depth by repeating their finest value, and say so.

    A node whose source knows fewer levels (an AWS type with 3 network layers beside one with 4) stays
    visible to TAS: its finest known domain stands in for the missing finer ones, which keeps the grouping
    true (nodes sharing that domain share the padded one too).
    """
    if set(map(len, discovery.paths.values())) <= {depth}:  # every path full (one pass in C, no loop per node)
        return
    short = sorted(n for n, p in discovery.paths.items() if 0 < len(p) < depth)
    for node in short:
        path = discovery.paths[node]
        discovery.paths[node] = path + (path[-1],) * (depth - len(path))
    if short:
        discovery.problem(
            f"{len(short)} node(s) report fewer than {depth} levels; their finest known domain was repeated "
            f"for the missing levels (e.g. {', '.join(short[:3])})")


def insert_level(discovery: Discovery, column: Mapping[str, str], name: str, lowest: int = 0,
                 in_parent: bool = False, within: str = "levels above", origin: str = "") -> int:
    """Add the level `name` (values `column`, by node) at the finest position, not above `lowest`, where every
    domain keeps one parent; the position taken. An NVLink domain goes there: it sits below the fabric's
    finest level where racks nest in leaves, higher where a domain spans several (dual-level models).

    A node without a value is its own domain (the next finer level's value, or its name at the finest
    position), or with `in_parent` in its parent's (the level above's value, as the aws source pads capacity
    blocks). None fitting is a `TopologyError` naming `origin` (default: the source) and the first conflicts.
    """
    depth = len(discovery.level_names)
    errors: list[str] = []
    for at in range(depth, lowest - 1, -1):
        names = discovery.level_names[:at] + (name,) + discovery.level_names[at:]
        paths = {n: p[:at] + (column.get(n) or _alone(n, p, at, in_parent),) + p[at:]
                 for n, p in discovery.paths.items()}
        problems = check_tree([Level(x, x) for x in names], paths)
        if not problems:
            discovery.level_names, discovery.paths = names, paths
            return at
        errors = errors or problems
    raise TopologyError(f"{origin or discovery.source}: the {name} domains do not nest in the {within} at any "
                        "level: " + "; ".join(errors[:3]))


def _alone(node: str, path: tuple[str, ...], at: int, in_parent: bool) -> str:
    if in_parent and at > 0:
        return path[at - 1]
    return path[at] if at < len(path) else node


# Per node that carries labels topolabel wrote: the value it wrote for each level (None where it wrote none).
Written = Mapping[str, tuple["str | None", ...]]


def written_values(levels: Sequence[Level], nodes: Iterable[Node]) -> dict[str, tuple[str | None, ...]]:
    """What `to_snapshot` needs of the cluster's nodes: the level values topolabel wrote on each (nodes
    without its managed-labels annotation carry none), so the node records can go before the snapshot is made."""
    written = {}
    for node in nodes:
        if MANAGED_ANNOTATION not in node.annotations:  # it carries no value topolabel wrote
            continue
        managed = set(node.managed())
        written[node.name] = tuple(value if (value := node.labels.get(level.label)) and level.label in managed
                                   else None for level in levels)
    return written


@paused_gc()  # per-node dicts and tuples, no cycles: the collector would only walk them
def to_snapshot(discovery: Discovery, levels: tuple[Level, ...], written: Written | None = None) -> Snapshot:
    """Validate a discovery and turn its raw names into label values.

    Paths of the wrong depth or with empty values become problems; a domain under two parents is a
    `TopologyError` naming both, because labelling it would split the domain silently. `written` (from the
    cluster's nodes, when known: `written_values`) holds the values topolabel wrote before: existing domains
    keep them when a new domain's name collides with theirs (`labelvalues.unique_values`).
    """
    if len(levels) != len(discovery.level_names):
        raise TopologyError(f"{discovery.source}: {len(discovery.level_names)} levels found, "
                            f"{len(levels)} label keys given")
    problems = list(discovery.problems)
    paths = _complete_paths(discovery, levels, problems)
    if discovery.local_names:
        paths = dict(zip(paths, map(_identities, paths.values())))
    errors = check_tree(levels, paths)
    if errors:
        raise TopologyError(f"{discovery.source}: the topology is not a tree: " + "; ".join(errors))
    carried = _carried(levels, paths, written or {})
    values: list[Mapping[str, str]] = []
    for depth, column in enumerate(zip(*paths.values())) if paths else ():
        # a domain shows its own name when names are local (its identity is its whole path)
        shown = {i: i.rsplit(_SEP, 1)[-1] for i in set(column)} if discovery.local_names else dict(zip(column, column))
        values.append(unique_values(shown, carried[depth], copy=False))
    names = [lv.name for lv in levels]
    labelled = {node: dict(zip(names, map(getitem, values, path))) for node, path in paths.items()}
    return Snapshot(levels, labelled, problems)


def _complete_paths(discovery: Discovery, levels: tuple[Level, ...], problems: list[Problem]
                    ) -> dict[str, tuple[str, ...]]:
    """The paths by node name, each value a stripped string; a path of the wrong depth or with an empty value
    is a problem instead. When every path already is that (most discoveries), it is checked level by level over
    the distinct values, without a tuple built per node (100,000 nodes: a third of the time)."""
    raw, order = discovery.paths, sorted(discovery.paths)
    if _all_clean(raw.values(), len(levels)):  # taken as they are when in order already (a cluster lists by name)
        return raw if list(raw) == order else dict(zip(order, map(raw.__getitem__, order)))
    paths: dict[str, tuple[str, ...]] = {}
    for node in order:
        path = tuple(map(str.strip, map(str, raw[node])))
        if len(path) != len(levels) or not all(path):
            problems.append(Problem(discovery.source, f"incomplete placement {list(path)} for levels "
                                    f"{[lv.name for lv in levels]}; node left as it is", node))
            continue
        paths[node] = path
    return paths


def _all_clean(paths: Collection[Sequence[Any]], depth: int) -> bool:
    """Whether every path is a tuple of `depth` non-empty strings without surrounding blanks."""
    if not paths or set(map(type, paths)) != {tuple} or set(map(len, paths)) != {depth}:
        return False
    for column in zip(*paths):
        distinct = set(column)
        if set(map(type, distinct)) != {str} or "" in distinct \
                or not all(map(str.__eq__, distinct, map(str.strip, distinct))):
            return False
    return True


def _carried(levels: Sequence[Level], paths: Mapping[str, tuple[str, ...]],
             written: Written) -> list[dict[str, Counter[str]]]:
    """Per level, identity -> the values its nodes carry under a key topolabel wrote (and how many)."""
    carried: list[dict[str, Counter[str]]] = [defaultdict(Counter) for _ in levels]
    for node, values in written.items():
        path = paths.get(node)
        if path is None:
            continue
        for depth, value in enumerate(values):
            if value:
                carried[depth][path[depth]][value] += 1
    return carried


def snapshot_from_dict(data: Any, origin: str = "snapshot") -> Snapshot:
    """A snapshot read from a file (`topolabel discover -o json`): untrusted, so checked like discovery output.

    Level keys must be valid and never another tool's (a plan also needs them owned: `plan.make_plan`), values
    valid label values (strings only), the nodes a tree; each error names `origin` and the offending key.
    """
    if not isinstance(data, Mapping):
        raise TopologyError(f"{origin}: expected a mapping with levels, nodes, problems")
    levels = _levels(data.get("levels"), origin)
    check_levels(levels, origin)
    raw_nodes = data.get("nodes") if data.get("nodes") is not None else {}
    if not isinstance(raw_nodes, Mapping):
        raise TopologyError(f"{origin}: 'nodes' must be a mapping of node name to level values")
    nodes = {_node_name(node, origin): _values(node, values, levels, origin) for node, values in raw_nodes.items()}
    errors = check_tree(levels, {n: tuple(v[lv.name] for lv in levels) for n, v in nodes.items()})
    if errors:
        raise TopologyError(f"{origin}: the topology is not a tree: " + "; ".join(errors[:5]))
    return Snapshot(levels, nodes, _problems(data.get("problems"), origin))


def _levels(raw: Any, origin: str) -> tuple[Level, ...]:
    if not isinstance(raw, list) or not raw:
        raise TopologyError(f"{origin}: 'levels' must be a non-empty list")
    levels = []
    for i, lv in enumerate(raw):
        if not isinstance(lv, Mapping) or not all(isinstance(lv.get(k), str) and lv[k] for k in ("name", "label")):
            raise TopologyError(f"{origin}: levels[{i}] needs 'name' and 'label' strings")
        levels.append(Level(lv["name"], lv["label"]))
    return tuple(levels)


def _node_name(name: Any, origin: str) -> str:
    # a printable string's only whitespace is " " (checked over every code point)
    if not isinstance(name, str) or not name or len(name) > MAX_NODE_NAME or not name.isprintable() or " " in name:
        raise TopologyError(f"{origin}: node name {str(name)[:80]!r} is not a Kubernetes node name")
    return name


def _values(node: str, values: Any, levels: Sequence[Level], origin: str) -> dict[str, str]:
    if not isinstance(values, Mapping):
        raise TopologyError(f"{origin}: nodes.{node} must be a mapping of level to value")
    missing = [lv.name for lv in levels if lv.name not in values]
    if missing:
        raise TopologyError(f"{origin}: nodes.{node} has no value for level(s) {', '.join(missing)}")
    for lv in levels:
        value = values[lv.name]
        if not isinstance(value, str) or not value or not is_valid_value(value):
            raise TopologyError(f"{origin}: nodes.{node}.{lv.name}: {str(value)[:80]!r} is not a label value (a "
                                "string of at most 63 characters, alphanumeric at both ends, '-_.' inside)")
    return {lv.name: sys.intern(values[lv.name]) for lv in levels}  # domains repeat across nodes


def _problems(raw: Any, origin: str) -> list[Problem]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(p, Mapping) for p in raw):
        raise TopologyError(f"{origin}: 'problems' must be a list of {{node, source, message}}")
    return [Problem(str(p.get("source", "")), str(p.get("message", "")),
                    None if p.get("node") is None else str(p["node"]), p.get("claim") is True) for p in raw]


_SEP = "\x1f"


def _identities(path: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(_SEP.join(path[: d + 1]) for d in range(len(path)))
