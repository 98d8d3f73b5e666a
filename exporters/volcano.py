"""Volcano HyperNodes (`topology.volcano.sh/v1alpha1`) from a snapshot: one per domain of every level.

Tiers count from the leaves: the finest level is tier 1 and lists its nodes by exact name; every coarser
tier lists the HyperNodes of the level below by name. `tierName` carries the level name. Names are
`<level>-<value>` as DNS labels (`domains.domain_names`).
"""

from __future__ import annotations

from typing import Any, Sequence

from labeler.io.nodes import Node
from labeler.settings.config import Config
from labeler.topology.model import Snapshot
from labeler.topology.names import MANAGED_BY

from .base import Export, Exporter, NoOptions, no_arguments
from .domains import domain_forest, domain_names

API_VERSION = "topology.volcano.sh/v1alpha1"


def hypernodes(snapshot: Snapshot) -> list[dict[str, Any]]:
    """One HyperNode per domain, tier 1 (the finest level) first, then each coarser tier."""
    forest = domain_forest(snapshot, {node: node for node in snapshot.nodes})
    domains = [d for top in forest for d in top.walk()]
    level_names = [lv.name for lv in snapshot.levels]
    names = domain_names(domains, level_names)
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
