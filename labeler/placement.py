"""From what a source found (raw placements) to a validated snapshot of label values.

Sources report raw domain names as they know them (switch names, cloud ids, inventory racks). This module
checks that they form a tree, turns them into valid, readable label values that are unique per level, and
attaches the label keys.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from .errors import TopologyError
from .gcpause import paused_gc
from .labelvalues import key_problems, unique_values
from .model import Discovery, Level, Problem, Snapshot, check_tree

DEFAULT_PREFIX = "topolabel.dev/"


def level_keys(level_names: Sequence[str], prefix: str = DEFAULT_PREFIX,
               overrides: Mapping[str, str] | None = None) -> tuple[Level, ...]:
    """Label keys for the levels: `prefix + name` unless overridden; invalid keys are an error."""
    overrides = overrides or {}
    levels = []
    for name in level_names:
        key = overrides.get(name) or f"{prefix}{name}"
        bad = key_problems(key)
        if bad:
            raise TopologyError(f"label key {key!r} for level {name!r} " + "; ".join(bad))
        levels.append(Level(name, key))
    if len({lv.label for lv in levels}) != len(levels):
        raise TopologyError("two levels share one label key: " + ", ".join(lv.label for lv in levels))
    if len(levels) > 15:
        raise TopologyError(f"{len(levels)} levels: Kueue allows 16 including kubernetes.io/hostname")
    return tuple(levels)


def pad_depths(discovery: Discovery, depth: int) -> None:
    """Give shallower paths the full depth by repeating their finest value, and say so.

    A node whose source knows fewer levels (an AWS type with 3 network layers beside one with 4) stays
    visible to TAS: its finest known domain stands in for the missing finer ones, which keeps the grouping
    true (nodes sharing that domain share the padded one too).
    """
    short = sorted(n for n, p in discovery.paths.items() if 0 < len(p) < depth)
    for node in short:
        path = discovery.paths[node]
        discovery.paths[node] = path + (path[-1],) * (depth - len(path))
    if short:
        discovery.problem(
            f"{len(short)} node(s) report fewer than {depth} levels; their finest known domain was repeated "
            f"for the missing levels (e.g. {', '.join(short[:3])})")


@paused_gc()  # per-node dicts and tuples, no cycles: the collector would only walk them
def to_snapshot(discovery: Discovery, levels: tuple[Level, ...]) -> Snapshot:
    """Validate a discovery and turn its raw names into label values.

    Paths of the wrong depth or with empty values become problems; a domain under two parents is a
    `TopologyError` naming both, because labelling it would split the domain silently.
    """
    if len(levels) != len(discovery.level_names):
        raise TopologyError(f"{discovery.source}: {len(discovery.level_names)} levels found, "
                            f"{len(levels)} label keys given")
    problems = list(discovery.problems)
    paths: dict[str, tuple[str, ...]] = {}
    for node in sorted(discovery.paths):
        path = tuple(map(str.strip, map(str, discovery.paths[node])))
        if len(path) != len(levels) or not all(path):
            problems.append(Problem(discovery.source, f"incomplete placement {list(path)} for levels "
                                    f"{[lv.name for lv in levels]}; node left as it is", node))
            continue
        paths[node] = _identities(path) if discovery.local_names else path
    errors = check_tree(levels, paths)
    if errors:
        raise TopologyError(f"{discovery.source}: the topology is not a tree: " + "; ".join(errors))
    values = []
    for depth in range(len(levels)):
        identities = {p[depth] for p in paths.values()}
        values.append(unique_values({i: _display(i, discovery.local_names) for i in identities}))
    names = [lv.name for lv in levels]
    nodes = {node: dict(zip(names, map(dict.__getitem__, values, path))) for node, path in paths.items()}
    return Snapshot(levels, nodes, problems)


_SEP = "\x1f"


def _identities(path: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(_SEP.join(path[: d + 1]) for d in range(len(path)))


def _display(identity: str, local: bool) -> str:
    return identity.rsplit(_SEP, 1)[-1] if local else identity
