"""The snapshot as a tree of domains, the shape every exporter walks."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from labeler.errors import TopologyError
from labeler.topology.labelvalues import short_hash
from labeler.topology.model import Snapshot, check_tree
from labeler.topology.names import dns_name

_DIGITS = re.compile(r"([0-9]+)")  # ASCII digits only: `²` and `٣` sort as text


def natural(text: str) -> tuple[object, ...]:
    """A sort key that orders numbers by value (`leaf2` before `leaf10`); readable, stable output order."""
    return tuple((0, int(part), len(part)) if _DIGITS.fullmatch(part) else (1, part, 0) for part in _DIGITS.split(text))


@dataclass
class Domain:
    """One domain: its level (0 = coarsest), its label value, the nodes under it and its child domains."""

    depth: int
    value: str
    nodes: list[str] = field(default_factory=list)
    children: list["Domain"] = field(default_factory=list)

    def walk(self) -> Iterable["Domain"]:
        yield self
        for child in self.children:
            yield from child.walk()


def domain_forest(snapshot: Snapshot, names: Mapping[str, str]) -> list[Domain]:
    """The coarsest level's domains, each with its subtree; nodes appear as `names[node]`.

    Only nodes in `names` are included. Children and nodes are in natural order, so the output is the same
    on every run. A snapshot whose domains have two parents (possible in a hand-written file) is refused.
    """
    paths = {node: snapshot.path(node) for node in names}
    errors = check_tree(snapshot.levels, paths)
    if errors:
        raise TopologyError("the snapshot is not a tree: " + "; ".join(errors[:3]))
    roots: dict[str, Domain] = {}
    index: list[dict[str, Domain]] = [roots] + [{} for _ in snapshot.levels[1:]]
    for node in sorted(paths, key=lambda n: natural(names[n])):
        parent: Domain | None = None
        for depth, value in enumerate(paths[node]):
            domain = index[depth].get(value)
            if domain is None:
                domain = index[depth][value] = Domain(depth, value)
                if parent is not None:
                    parent.children.append(domain)
            domain.nodes.append(names[node])
            parent = domain
    for level in index:
        for domain in level.values():
            domain.children.sort(key=lambda d: natural(d.value))
    return sorted(roots.values(), key=lambda d: natural(d.value))


def domain_names(domains: Iterable[Domain], level_names: Sequence[str], prefix: str = "",
                 limit: int = 63) -> dict[tuple[int, str], str]:
    """(depth, value) -> an object name `<prefix><level>-<value>` made a lower-case DNS label, unique across all
    levels. When two domains would share a name (values that differ only in case or in characters a DNS name
    cannot hold, or run past `limit`), all of them get a hash of their identity, so a name never depends on
    which other domains exist."""
    raw = {(d.depth, d.value): f"{prefix}{level_names[d.depth]}-{d.value}" for d in domains}
    by_name: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for key, text in raw.items():
        by_name[dns_name(text, limit)].append(key)
    names = {}
    for name, owners in by_name.items():
        for key in owners:
            exact = len(owners) == 1 and len(raw[key]) <= limit
            names[key] = name if exact else f"{dns_name(raw[key], limit - 9)}-{short_hash(raw[key])}"
    if len(set(names.values())) != len(names):
        raise TopologyError("two objects would share a name; rename one of the levels")
    return names
