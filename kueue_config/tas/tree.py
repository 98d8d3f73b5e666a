"""Kueue's TAS tree for one flavor: nodes placed by their level labels, with free capacity per leaf.

Kept apart from the placer (as Kueue keeps `tas_topology_tree.go` apart), so `show` draws the tree
without the placement algorithm. Only Ready, schedulable nodes with every level label and the flavor's
nodeLabels count; the rest are counted by reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from labeler.io.nodes import Node
from labeler.topology.names import HOSTNAME

from .capacity import Resources


class Domain:
    """A topology domain and the per-query counts Kueue's algorithm keeps for it."""

    __slots__ = ("values", "parent", "children", "pods", "slices", "pods_wl", "slices_wl", "leaders")

    def __init__(self, values: tuple[str, ...], parent: "Domain | None") -> None:
        self.values = values
        self.parent = parent
        self.children: list[Domain] = []
        self.reset()

    def reset(self) -> None:
        self.pods = self.slices = self.pods_wl = self.slices_wl = self.leaders = 0


class Leaf(Domain):
    """A lowest-level domain: one node when the lowest level is the hostname, else all nodes sharing it."""

    __slots__ = ("id", "free", "total", "node_names", "node")

    def __init__(self, values: tuple[str, ...], parent: Domain | None, leaf_id: str) -> None:
        super().__init__(values, parent)
        self.id = leaf_id
        self.free: Resources = {}
        self.total: Resources = {}
        self.node_names: list[str] = []
        self.node: Node | None = None

    @property
    def node_count(self) -> int:
        return len(self.node_names)


@dataclass
class Exclusions:
    """Nodes the tree leaves out, by reason, so a surprising answer can be explained.

    Nodes of other flavors are counted first, so the other reasons only count the flavor's own nodes.
    """

    other_flavor: int = 0
    missing_level_labels: int = 0
    not_ready: int = 0
    unschedulable: int = 0

    def text(self, flavor: str | None, labels: Mapping[str, str]) -> str:
        """The reasons in plain words, for the line under `fit`'s table."""
        selector = ",".join(f"{k}={v}" for k, v in labels.items())
        parts = []
        if self.other_flavor:
            parts.append(f"{self.other_flavor} in other pools (not {selector}, flavor {flavor})" if flavor
                         else f"{self.other_flavor} in other pools")
        if self.missing_level_labels:
            parts.append(f"{self.missing_level_labels} without every level label")
        if self.not_ready:
            parts.append(f"{self.not_ready} not Ready")
        if self.unschedulable:
            parts.append(f"{self.unschedulable} cordoned (unschedulable)")
        return ", ".join(parts)


class TASTree:
    """Kueue's topology tree for one flavor: counted nodes placed by their level labels."""

    def __init__(self, keys: Sequence[str], nodes: Iterable[Node], free: Mapping[str, Resources],
                 flavor_labels: Mapping[str, str] | None = None,
                 totals: Mapping[str, Resources] | None = None) -> None:
        self.keys = tuple(keys)
        self.hostname_lowest = self.keys[-1] == HOSTNAME
        self.levels: list[dict[tuple[str, ...], Domain]] = [{} for _ in self.keys]
        self.leaves: dict[str, Leaf] = {}
        self.excluded = Exclusions()
        flavor_items = tuple((flavor_labels or {}).items())
        wanted = set(self.keys)
        totals = totals or {}
        for node in nodes:
            if flavor_items and any(node.labels.get(k) != v for k, v in flavor_items):
                self.excluded.other_flavor += 1
            elif not wanted <= node.labels.keys():
                self.excluded.missing_level_labels += 1
            elif not node.ready:
                self.excluded.not_ready += 1
            elif node.unschedulable:
                self.excluded.unschedulable += 1
            else:
                self._add(node, free.get(node.name, {}), totals.get(node.name, {}))

    def _add(self, node: Node, free: Resources, total: Resources) -> None:
        values = tuple(node.labels[k] for k in self.keys)
        leaf_id = values[-1] if self.hostname_lowest else "/".join(values)
        leaf = self.leaves.get(leaf_id)
        if leaf is None:
            leaf = self.leaves[leaf_id] = Leaf(values, self._parent(values[:-1]), leaf_id)
            self.levels[-1][values] = leaf
        if self.hostname_lowest and leaf.node is None:
            leaf.node = node
        leaf.node_names.append(node.name)
        if len(leaf.node_names) == 1:  # a new leaf (one per node when the hostname is the lowest level)
            leaf.free, leaf.total = dict(free), dict(total)
            return
        for key, value in free.items():
            leaf.free[key] = leaf.free.get(key, 0) + value
        for key, value in total.items():
            leaf.total[key] = leaf.total.get(key, 0) + value

    def _parent(self, values: tuple[str, ...]) -> Domain | None:
        if not values:
            return None
        level = self.levels[len(values) - 1]
        parent = level.get(values)
        if parent is None:
            parent = level[values] = Domain(values, self._parent(values[:-1]))
        return parent

    def link(self) -> None:
        """Children lists, built once after all nodes are in."""
        for level in self.levels[1:]:
            for domain in level.values():
                if domain.parent is not None:
                    domain.parent.children.append(domain)

    @property
    def roots(self) -> list[Domain]:
        return list(self.levels[0].values())


def build_tree(keys: Sequence[str], nodes: Iterable[Node], free: Mapping[str, Resources],
               flavor_labels: Mapping[str, str] | None = None,
               totals: Mapping[str, Resources] | None = None) -> TASTree:
    """The tree for one flavor; `totals` (allocatable per node) only when totals are shown."""
    tree = TASTree(keys, nodes, free, flavor_labels, totals)
    tree.link()
    return tree
