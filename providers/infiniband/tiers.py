"""Switch tiers, leaf groups and blocks of a fat tree, from the fabric graph and the hosts' HCAs.

Leaves are switches with host HCAs, spines connect leaves, cores are the switches above. Hosts attached to
the same set of leaves form a leaf group (one leaf in a classic fat tree; the eight rail leaves of a
scalable unit in a rail-optimised one). Leaf groups whose leaves share spines form a block (pod).

The grouping is by majority, so a host with a missing cable, a down HCA or an HCA without a name stays in
its group: each leaf's group is the leaf set most of its hosts attach to, and a host goes to the group
holding most of its links.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping

import networkx as nx


@dataclass(frozen=True)
class Tiers:
    leaves: frozenset[int]
    spines: frozenset[int]
    cores: frozenset[int]
    ranks: dict[int, int] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for rank, members in enumerate((self.leaves, self.spines, self.cores), start=1):
            self.ranks.update(dict.fromkeys(members, rank))

    def rank(self, guid: int) -> int:
        """0 for HCAs, then leaf 1, spine 2, core 3: an uplink goes to a higher rank."""
        return self.ranks.get(guid, 0)

    def name(self, guid: int) -> str:
        return ("hca", "leaf", "spine", "core")[self.rank(guid)]


def classify(graph: nx.MultiGraph, hca_leaves: Iterable[int]) -> Tiers:
    """Tiers from the switches the host HCAs are cabled to (`hca_leaves`) upwards."""
    leaves = frozenset(hca_leaves)
    switches = {g for g, kind in graph.nodes(data="kind") if kind == "switch"}
    spines = frozenset(peer for leaf in leaves for peer in graph.neighbors(leaf)
                       if peer in switches and peer not in leaves)
    return Tiers(leaves, spines, frozenset(switches - leaves - spines))


class _Union:
    """Union-find over hashable items, smallest item as the representative for stable output."""

    def __init__(self) -> None:
        self.parent: dict = {}

    def find(self, item):
        root = self.parent.setdefault(item, item)
        while root != self.parent[root]:
            root = self.parent[root]
        while item != root:
            self.parent[item], item = root, self.parent[item]
        return root

    def union(self, a, b) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


@dataclass
class LeafGroups:
    """Leaves -> group (the group's smallest leaf GUID), and where each host goes."""

    group_of_leaf: dict[int, int]
    members: dict[int, frozenset[int]]
    host_group: dict[str, int]
    merged: dict[int, int] = field(default_factory=dict)  # group -> number of distinct leaf sets joined
    split: dict[str, Counter] = field(default_factory=dict)  # host -> links per group, when > 1 group
    missing: dict[str, frozenset[int]] = field(default_factory=dict)  # host -> group leaves it has no link to


def leaf_groups(host_links: Mapping[str, Counter]) -> LeafGroups:
    """Group leaves by the leaf set most of their hosts attach to, then place each host by majority.

    `host_links[host]` counts the host's links per leaf. Leaf sets of different leaves that overlap (a
    storage leaf shared by every compute group) are joined into one group and reported in `merged`.
    """
    sets = {host: frozenset(links) for host, links in host_links.items() if links}
    seen: dict[int, Counter] = defaultdict(Counter)
    for leaves in sets.values():
        for leaf in leaves:
            seen[leaf][leaves] += 1
    uf = _Union()
    canonical: dict[int, frozenset[int]] = {}
    for leaf, counts in seen.items():
        canonical[leaf] = max(counts, key=lambda s: (counts[s], len(s), sorted(s)))
        for other in canonical[leaf]:
            uf.union(leaf, other)
    group_of_leaf = {leaf: uf.find(leaf) for leaf in seen}
    members: dict[int, set[int]] = defaultdict(set)
    joined: dict[int, set[frozenset[int]]] = defaultdict(set)
    for leaf, group in group_of_leaf.items():
        members[group].add(leaf)
        joined[group].add(canonical[leaf])
    result = LeafGroups(group_of_leaf, {g: frozenset(m) for g, m in members.items()}, {})
    # Leaf sets inside one another are one unit seen partly (hosts short of a rail); others overlap.
    result.merged = {g: len(sets_) for g, sets_ in joined.items()
                     if any(not s <= max(sets_, key=len) for s in sets_)}
    for host, links in sorted(host_links.items()):
        if not links:
            continue
        per_group: Counter = Counter()
        for leaf, count in links.items():
            per_group[group_of_leaf[leaf]] += count
        group = max(per_group, key=lambda g: (per_group[g], -g))
        result.host_group[host] = group
        if len(per_group) > 1:
            result.split[host] = per_group
        expected = frozenset().union(*joined[group]) if group not in result.merged else frozenset()
        if expected - sets[host]:
            result.missing[host] = expected - sets[host]
    return result


def blocks(graph: nx.MultiGraph, tiers: Tiers, groups: LeafGroups) -> dict[int, int]:
    """Switch -> block (smallest GUID in it) for leaves and spines: joined by shared spines and leaf groups."""
    uf = _Union()
    for leaf in tiers.leaves:
        uf.find(leaf)
        for peer in graph.neighbors(leaf):
            if peer in tiers.spines:
                uf.union(leaf, peer)
    for leaves in groups.members.values():
        first = min(leaves)
        for leaf in leaves:
            uf.union(first, leaf)
    return {switch: uf.find(switch) for switch in tiers.leaves | tiers.spines}
