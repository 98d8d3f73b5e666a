"""Build Kueue v1beta2 objects: the Topology and ResourceFlavors here, queues in `kueue_config.queues`.

Names of objects with immutable fields (Topology levels; a ResourceFlavor's nodeLabels, tolerations and
topologyName) end in a hash of those fields. A change therefore yields a new object and moves the
ClusterQueue's reference to it, instead of an edit the API server would refuse.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from operator import attrgetter
from typing import Any, Sequence

from labeler.io.nodes import Keep, Node
from labeler.settings.config import Config, KueueConfig, PoolConfig
from labeler.settings.quantities import stored
from labeler.topology.model import Level, Problem, Snapshot
from labeler.topology.names import KUEUE_API_VERSION as API_VERSION, hashed_name, topology_keys

from .queues import PoolFlavor, meta, queue_objects


@dataclass
class Pool:
    """Nodes that share one value of the pool label; one ResourceFlavor each."""

    label: str
    value: str
    nodes: list[Node] = field(default_factory=list)


@dataclass
class KueueObjects:
    objects: list[dict[str, Any]]
    problems: list[Problem]


def reads(snapshot: Snapshot, cfg: PoolConfig) -> Keep:
    """What `generate` reads of each node besides its allocatable and taints: the pool labels, no annotation;
    names shared with the snapshot (its values are not kept)."""
    keys = frozenset((cfg.label, *cfg.fallback_labels))
    return Keep(labels=keys.__contains__, annotations=lambda key: False, strings=snapshot.strings(values=False))


def group_pools(snapshot: Snapshot, nodes: Sequence[Node], cfg: PoolConfig) -> tuple[list[Pool], list[Problem]]:
    """Placed nodes grouped by the pool label (or the first fallback label they carry)."""
    pools: dict[tuple[str, str], Pool] = {}
    problems = []
    keys, placed = [cfg.label, *cfg.fallback_labels], snapshot.nodes
    for node in sorted(nodes, key=attrgetter("name")):
        if node.name not in placed:
            continue
        for key in keys:
            value = node.labels.get(key)
            if value:
                break
        else:
            problems.append(Problem("kueue", f"has none of the pool labels {', '.join(keys)}; it is in no "
                                             "ResourceFlavor", node.name))
            continue
        pool = pools.get((key, value))
        if pool is None:
            pool = pools[key, value] = Pool(key, value)
        pool.nodes.append(node)
    return [pools[k] for k in sorted(pools)], problems


def topology(levels: Sequence[Level], cfg: KueueConfig) -> dict[str, Any]:
    keys = topology_keys([lv.label for lv in levels], cfg.hostname_level)
    name = hashed_name(cfg.topology_name, keys)
    return {"apiVersion": API_VERSION, "kind": "Topology", "metadata": meta(name),
            "spec": {"levels": [{"nodeLabel": k} for k in keys]}}


def tolerations(pool: Pool, taint_keys: Sequence[str]) -> list[dict[str, str]]:
    """Tolerations for the accelerator taints found on the pool's nodes, so admitted pods can land."""
    distinct = {id(n.taints): n.taints for n in pool.nodes}.values()  # nodes of a pool share one (NodeReader)
    found = {(t.get("key", ""), t.get("value") or "", t.get("effect") or "")
             for taints in distinct for t in taints if t.get("key") in taint_keys}
    out = []
    for key, value, effect in sorted(found):
        tol = {"key": key, "operator": "Equal", "value": value} if value else {"key": key, "operator": "Exists"}
        if effect:
            tol["effect"] = effect
        out.append(tol)
    return out


def flavor(pool: Pool, topology_name: str, taint_keys: Sequence[str]) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": {pool.label: pool.value}}
    tols = tolerations(pool, taint_keys)
    if tols:
        spec["tolerations"] = tols
    spec["topologyName"] = topology_name
    name = hashed_name(pool.value, spec)
    return {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": meta(name), "spec": spec}


def pool_quota(pool: Pool, resources: Sequence[str]) -> dict[str, Decimal]:
    """The pool's allocatable, summed. Nodes of one kind share one allocatable mapping (`NodeReader`), so each
    distinct mapping is read once and counted (100,000 nodes: 0.7 -> 0.05 s); an unreadable quantity is
    reported on the first node that carries it, as a node-by-node sum would."""
    first: dict[int, Node] = {}
    count: Counter[int] = Counter()
    for node in pool.nodes:
        first.setdefault(id(node.allocatable), node)
        count[id(node.allocatable)] += 1
    totals: dict[str, Decimal] = defaultdict(Decimal)
    for key, node in first.items():
        for res in resources:
            if res in node.allocatable:
                totals[res] += stored(node.allocatable[res], f"node {node.name} allocatable {res}") * count[key]
    return dict(totals)


def generate(snapshot: Snapshot, nodes: Sequence[Node], cfg: Config) -> KueueObjects:
    """All Kueue objects for the snapshot, in a fixed order; the same input gives the same output."""
    topo = topology(snapshot.levels, cfg.kueue)
    pools, problems = group_pools(snapshot, nodes, cfg.pools)
    flavors = [flavor(p, topo["metadata"]["name"], cfg.pools.taint_keys) for p in pools]
    capacity = [PoolFlavor(p.value, f["metadata"]["name"], pool_quota(p, cfg.pools.resources))
                for f, p in zip(flavors, pools)]
    queues, queue_problems = queue_objects(capacity, cfg.pools.resources, cfg.kueue)
    return KueueObjects([topo, *flavors, *queues], problems + queue_problems)

