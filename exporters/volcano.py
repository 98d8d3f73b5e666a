"""Volcano HyperNodes (`topology.volcano.sh/v1alpha1`) from a snapshot: one per domain of every level.

Tiers count from the leaves: the finest level is tier 1 and lists its nodes by exact name; every coarser
tier lists the HyperNodes of the level below by name. `tierName` carries the level name. Names are
`<level>-<value>` made into lower-case DNS labels; when two domains would share a name (label values differ
only in case or in characters a DNS name cannot hold, or run past 63 characters), all of them get a hash of
their identity, so a name never depends on which other domains exist.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

from labeler.config import Config
from labeler.errors import TopologyError
from labeler.labelvalues import short_hash
from labeler.model import Snapshot
from labeler.names import MANAGED_BY, dns_name
from labeler.nodes import Node

from .base import Export, Exporter, NoOptions, no_arguments
from .domains import Domain, domain_forest

API_VERSION = "topology.volcano.sh/v1alpha1"
MAX_NAME = 63


def hypernode_names(domains: list[Domain], level_names: list[str]) -> dict[tuple[int, str], str]:
    """(depth, value) -> HyperNode name, unique across all levels."""
    raw = {(d.depth, d.value): f"{level_names[d.depth]}-{d.value}" for d in domains}
    by_name: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for key, text in raw.items():
        by_name[dns_name(text, MAX_NAME)].append(key)
    names = {}
    for name, owners in by_name.items():
        for key in owners:
            exact = len(owners) == 1 and len(raw[key]) <= MAX_NAME
            names[key] = name if exact else f"{dns_name(raw[key], MAX_NAME - 9)}-{short_hash(raw[key])}"
    if len(set(names.values())) != len(names):
        raise TopologyError("two HyperNodes would share a name; rename one of the levels")
    return names


def hypernodes(snapshot: Snapshot) -> list[dict[str, Any]]:
    """One HyperNode per domain, tier 1 (the finest level) first, then each coarser tier."""
    forest = domain_forest(snapshot, {node: node for node in snapshot.nodes})
    domains = [d for top in forest for d in top.walk()]
    level_names = [lv.name for lv in snapshot.levels]
    names = hypernode_names(domains, level_names)
    finest = len(level_names) - 1
    objects = []
    for d in sorted(domains, key=lambda d: (-d.depth, names[(d.depth, d.value)])):
        if d.depth == finest:
            members = [_member("Node", node) for node in d.nodes]
        else:
            members = [_member("HyperNode", names[(c.depth, c.value)]) for c in d.children]
        objects.append({
            "apiVersion": API_VERSION, "kind": "HyperNode",
            "metadata": {"name": names[(d.depth, d.value)], "labels": dict(MANAGED_BY)},
            "spec": {"tier": finest - d.depth + 1, "tierName": level_names[d.depth], "members": members},
        })
    return objects


def _member(kind: str, name: str) -> dict[str, Any]:
    return {"type": kind, "selector": {"exactMatch": {"name": name}}}


def _export(snapshot: Snapshot, cfg: Config, options: NoOptions, nodes: Sequence[Node]) -> Export:
    return Export(objects=hypernodes(snapshot))


EXPORTER = Exporter("volcano", "Volcano HyperNodes, one per domain", True, no_arguments, _export, NoOptions)
