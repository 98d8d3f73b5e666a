"""Capacity as metrics: per TAS flavor, level and resource, the most free in one domain and the wholly free
domains; per top-level domain, what is free. Bounded cardinality: flavors x levels x resources, plus at most
MAX_TOP domains per flavor and resource.

Computed after each full pass from what Kueue's TAS counts (`kueue_config.tas.slots.free_room`): node
allocatable, less the pods TAS did not place, less the topology assignments of admitted Workloads. Reading
pods needs `list pods` cluster-wide, which the operator has only when capacity metrics are switched on
(`--capacity-metrics`; the chart's `metrics.capacity.enabled`, or manifests/capacity); without it the
metrics say so (`topolabel_capacity_up` 0) and the rest of the operator carries on.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from kubernetes.client.exceptions import ApiException

from kueue_config.tas.capacity import pods_from_items
from kueue_config.tas.judge import Inputs
from kueue_config.tas.setup import TASSetup
from kueue_config.tas.slots import free_room
from labeler.cluster.kube import api_error
from labeler.errors import TopolabelError
from labeler.io.nodes import Node
from labeler.topology.names import KUEUE_API_VERSION

from .kubeapi import Kube
from .kueue import PLURALS
from .metrics import Metrics

log = logging.getLogger(__name__)
MAX_TOP = 64  # top-level domains exported per flavor and resource
UNFINISHED = "status.phase!=Succeeded,status.phase!=Failed"


class CapacityMetrics:
    """Reads what TAS counts and sets the capacity gauges; one failure is logged once, not every pass."""

    def __init__(self, kube: Kube, metrics: Metrics) -> None:
        self.kube, self.metrics = kube, metrics
        self.failing: str | None = None

    def _objects(self) -> list[dict[str, Any]]:
        out = []
        for kind in ("Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue"):
            out += [{"apiVersion": KUEUE_API_VERSION, "kind": kind, **o}
                    for o in self.kube.list(f"/apis/{KUEUE_API_VERSION}/{PLURALS[kind]}")]
        return out

    def update(self, nodes: Sequence[Node], resources: Sequence[str]) -> None:
        try:
            setup = TASSetup.from_objects(self._objects(), "cluster")
            pods = pods_from_items(self.kube.list("/api/v1/pods", field_selector=UNFINISHED), "cluster")
            workloads = self.kube.list(f"/apis/{KUEUE_API_VERSION}/workloads")
            inputs = Inputs(setup, nodes, pods, workloads)
            rooms = [r for f in setup.flavors.values() if f.tas for r in free_room(f, inputs, list(resources))]
        except (ApiException, TopolabelError) as exc:
            why = api_error(exc) if isinstance(exc, ApiException) else str(exc)
            if why != self.failing:
                log.warning("capacity metrics: %s", why, extra={"reason": "CapacityUnreadable"})
            self.failing = why
            self.metrics.errors.labels(kind="capacity").inc()
            self.metrics.capacity_up.set(0)
            return
        self.failing = None
        self.metrics.set_capacity(rooms, MAX_TOP)
