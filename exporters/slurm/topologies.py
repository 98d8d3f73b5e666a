"""What Slurm is told beyond the domains: trimmed top levels, nodes without topology, and topology.yaml with
the tree and block topologies or several named ones, each over the nodes its node selector picks.

Slurm's topology.yaml (topology.yaml(5)): a list of entries, `topology` (the name a partition's
`Topology=` refers to) first, `cluster_default`, then exactly one of `tree`, `block` or `flat: true`. Slurm
uses the first entry with `cluster_default: true`; topolabel writes exactly one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from labeler.errors import TopologyError
from labeler.io.documents import dump_yaml
from labeler.topology.model import Snapshot

from ..hostlist import compress
from .block import Block
from .names import UNSAFE
from .tree import Switch

NO_TOPOLOGY = "no-topology"
PLUGINS = ("tree", "block", "flat")


@dataclass(frozen=True)
class TopologySpec:
    """One named topology of topology.yaml: its plugin, the node labels its nodes carry (none: every node),
    and for a block topology its level and sizes (defaults as for `--format block`)."""

    name: str
    plugin: str = "tree"
    selector: Mapping[str, str] = field(default_factory=dict)
    default: bool = False
    block_level: str | None = None
    block_sizes: tuple[int, ...] = ()


def trim(snapshot: Snapshot, count: int) -> Snapshot:
    """The snapshot without its `count` coarsest levels (Topograph's trimTiers)."""
    if count < 0:
        raise TopologyError(f"--trim-tiers {count}: give a number of levels, 0 or more")
    if count == 0:
        return snapshot
    if count >= len(snapshot.levels):
        raise TopologyError(f"--trim-tiers {count}: the snapshot has {len(snapshot.levels)} level(s) "
                            f"({', '.join(lv.name for lv in snapshot.levels)}); at least one must stay")
    levels = snapshot.levels[count:]
    nodes = {node: {lv.name: values[lv.name] for lv in levels} for node, values in snapshot.nodes.items()}
    return Snapshot(levels, nodes, list(snapshot.problems))


def without_topology(snapshot: Snapshot, cluster: Iterable[str]) -> list[str]:
    """Nodes known to exist that the snapshot does not place: the cluster's nodes, and nodes its problems name."""
    known = set(cluster) | {p.node for p in snapshot.problems if p.node}
    return sorted(known - set(snapshot.nodes))


def node_labels(snapshot: Snapshot, cluster: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, str]]:
    """Each node's labels as a selector sees them: the cluster's (when known), and the topology labels the
    snapshot gives it."""
    names = set(cluster) | set(snapshot.nodes)
    return {n: {**cluster.get(n, {}), **(snapshot.labels_for(n) if n in snapshot.nodes else {})} for n in names}


def selects(spec: TopologySpec, labels: Mapping[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in spec.selector.items())


def check_specs(specs: Sequence[TopologySpec]) -> None:
    """Names unique and usable in slurm.conf, known plugins, at most one default, block settings on blocks."""
    where = "export.slurm.topologies"
    seen: set[str] = set()
    for spec in specs:
        if not spec.name or UNSAFE.search(spec.name):
            raise TopologyError(f"{where}: topology name {spec.name!r} must be non-empty, without whitespace or "
                                "any of , [ ] = # \" \\")
        if spec.name in seen:
            raise TopologyError(f"{where}: topology {spec.name!r} is defined twice")
        seen.add(spec.name)
        if spec.plugin not in PLUGINS:
            raise TopologyError(f"{where}: {spec.name}: plugin {spec.plugin!r}; choose {', '.join(PLUGINS)}")
        if spec.plugin != "block" and (spec.block_level or spec.block_sizes):
            raise TopologyError(f"{where}: {spec.name}: blockLevel and blockSizes are for plugin block")
    if sum(spec.default for spec in specs) > 1:
        raise TopologyError(f"{where}: more than one topology has clusterDefault: true")


def default_name(specs: Sequence[TopologySpec]) -> str:
    """The one cluster default: the topology marked so, else the first."""
    return next((s.name for s in specs if s.default), specs[0].name)


@dataclass
class Topology:
    """One entry of topology.yaml: a tree's switches, or blocks and their sizes, or flat."""

    name: str
    default: bool
    plugin: str
    switches: list[Switch] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)

    def entry(self, skeleton: bool = False) -> dict[str, Any]:
        """The entry as topology.yaml holds it; a `skeleton` lists switches and blocks without their nodes
        (nodes join them at run time, by Slurm's dynamic topology)."""
        head: dict[str, Any] = {"topology": self.name, "cluster_default": self.default}
        if self.plugin == "flat":
            return {**head, "flat": True}
        if self.plugin == "tree":
            return {**head, "tree": {"switches": [_switch(s, skeleton) for s in self.switches]}}
        blocks = [{"block": b.name, **({} if skeleton else {"nodes": compress(b.nodes)})} for b in self.blocks]
        return {**head, "block": {"block_sizes": self.sizes, "blocks": blocks}}

    def units(self) -> dict[str, str]:
        """Slurm node name -> its unit in this topology for a dynamic-topology registration: the block, or the
        switches from the top to its leaf joined by ':' (none for flat)."""
        if self.plugin == "block":
            return {node: b.name for b in self.blocks for node in b.nodes}
        parent = {child: s.name for s in self.switches for child in s.switches}
        units = {}
        for leaf in self.switches:
            chain = [leaf.name]
            while chain[-1] in parent:
                chain.append(parent[chain[-1]])
            units.update({node: ":".join(reversed(chain)) for node in leaf.nodes})
        return units


def _switch(switch: Switch, skeleton: bool) -> dict[str, Any]:
    if switch.switches:
        return {"switch": switch.name, "children": compress(switch.switches)}
    return {"switch": switch.name} if skeleton else {"switch": switch.name, "nodes": compress(switch.nodes)}


def topology_yaml(entries: list[dict[str, Any]]) -> str:
    return dump_yaml(entries, width=1 << 20)
