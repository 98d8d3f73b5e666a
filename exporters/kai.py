"""The KAI scheduler's `Topology` (`kai.scheduler/v1alpha1`): the node label of each level, coarsest first.

KAI reads the same node labels Kueue TAS reads, and its Topology has Kueue's shape and rules (levels
immutable, unique, `kubernetes.io/hostname` only last). So the object is Kueue's Topology under KAI's API
group, name included: the name ends in a hash of the levels, and a change of levels yields a new object
instead of an edit the API server refuses.
"""

from __future__ import annotations

from typing import Any, Sequence

from labeler.io.nodes import Node
from labeler.settings.config import Config, KueueConfig
from labeler.topology.model import Snapshot
from labeler.topology.names import MANAGED_BY, hashed_name, topology_keys

from .base import Export, Exporter, NoOptions, no_arguments

API_VERSION = "kai.scheduler/v1alpha1"


def kai_topology(snapshot: Snapshot, cfg: KueueConfig = KueueConfig()) -> dict[str, Any]:
    """The Topology for the snapshot's levels; `cfg.topology_name` and `cfg.hostname_level` apply as for Kueue."""
    keys = topology_keys([lv.label for lv in snapshot.levels], cfg.hostname_level)
    return {"apiVersion": API_VERSION, "kind": "Topology",
            "metadata": {"name": hashed_name(cfg.topology_name, keys), "labels": dict(MANAGED_BY)},
            "spec": {"levels": [{"nodeLabel": k} for k in keys]}}


def _export(snapshot: Snapshot, cfg: Config, options: NoOptions, nodes: Sequence[Node]) -> Export:
    return Export(objects=[kai_topology(snapshot, cfg.kueue)])


EXPORTER = Exporter("kai", "the KAI scheduler Topology", True, no_arguments, _export, NoOptions)
