"""ClusterQueues, Cohorts and LocalQueues from the `kueue` section: which pools each queue holds and how much.

A pool's capacity is its nodes' summed allocatable. Each ClusterQueue has one resource group whose flavors
are its pools (in the configured order, else sorted) and whose resources are `pools.resources` that some
of those pools have; every flavor lists them in that same order, as Kueue's webhook requires. Quotas and
limits are worked out per pool and resource (`labeler.settings.queues.Amount`); a lending limit above the quota is
lowered to it (Kueue refuses it) and said so. Pools whose queues' quotas add up to more than they hold are
reported, since Kueue would admit workloads that cannot all run, and so is a share that rounds down to 0
(a small pool under a coarse step), since the queue could not use that pool of its own.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable, Sequence

from labeler.errors import TopologyError
from labeler.settings.config import KueueConfig
from labeler.settings.quantities import format_quantity
from labeler.settings.queues import Amounts, ClusterQueueConfig, CohortConfig, FairSharing
from labeler.settings.validation import did_you_mean
from labeler.topology.model import Problem
from labeler.topology.names import KUEUE_API_VERSION as API_VERSION, MANAGED_BY


MAX_FLAVORS = 64  # per resource group, from the ClusterQueue schema (Kueue v0.19)
SOURCE = "kueue"

Obj = dict[str, Any]


@dataclass(frozen=True)
class PoolFlavor:
    """A pool as a ClusterQueue sees it: its pool-label value, its ResourceFlavor's name, its capacity."""

    pool: str
    flavor: str
    capacity: dict[str, Decimal]


def meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if namespace:
        out["namespace"] = namespace
    out["labels"] = dict(MANAGED_BY)
    return out


def queue_objects(flavors: Sequence[PoolFlavor], resources: Sequence[str],
                  cfg: KueueConfig) -> tuple[list[Obj], list[Problem]]:
    """Cohorts, ClusterQueues and LocalQueues, in that order (each in config order)."""
    problems: list[Problem] = []
    queues = []
    nominal: dict[tuple[str, str], list[Decimal]] = defaultdict(list)
    for queue in cfg.queues():
        chosen = _chosen(queue, flavors, problems)
        queues.append(cluster_queue(queue, chosen, resources, cfg.quota, problems,
                                    lambda pool, res, amount: nominal[(pool, res)].append(amount)))
    problems += _overcommitted(flavors, nominal)
    objects = [*(cohort(c) for c in cfg.cohorts), *queues, *local_queues(cfg)]
    return objects, problems


def _chosen(queue: ClusterQueueConfig, flavors: Sequence[PoolFlavor], problems: list[Problem]) -> list[PoolFlavor]:
    """The queue's pools in its order; a configured pool without nodes is left out and reported."""
    if queue.flavors is None:
        return list(flavors)
    by_pool = {f.pool: f for f in flavors}
    chosen = []
    for wanted in queue.flavors:
        if sum(f.pool == wanted.pool for f in flavors) > 1:
            raise TopologyError(f"ClusterQueue {queue.name}: pool {wanted.pool!r} is a value of two pool labels; "
                                "set pools.fallbackLabels so that each pool has its own value")
        if wanted.pool in by_pool:
            chosen.append(by_pool[wanted.pool])
        else:
            problems.append(Problem(SOURCE, f"ClusterQueue {queue.name}: no node is in pool {wanted.pool!r}; it is "
                                            "left out of the queue" + did_you_mean(wanted.pool, by_pool)))
    return chosen


def cluster_queue(queue: ClusterQueueConfig, flavors: Sequence[PoolFlavor], resources: Sequence[str],
                  defaults: Amounts, problems: list[Problem],
                  record: Callable[[str, str, Decimal], None] = lambda *_: None) -> Obj:
    if len(flavors) > MAX_FLAVORS:
        raise TopologyError(f"ClusterQueue {queue.name}: {len(flavors)} node pools, but a resource group holds at "
                            f"most {MAX_FLAVORS} flavors; choose a coarser pool label (pools.label) or list the "
                            "queue's pools (flavors)")
    covered = [r for r in resources if any(r in f.capacity for f in flavors)]
    spec: dict[str, Any] = {}
    if queue.cohort:
        spec["cohortName"] = queue.cohort
    spec["namespaceSelector"] = {}
    spec["resourceGroups"] = [{
        "coveredResources": covered,
        "flavors": [{"name": f.flavor, "resources": [_quota(queue, f, r, defaults, problems, record) for r in covered]}
                    for f in flavors],
    }] if flavors and covered else []
    if queue.queueing_strategy:
        spec["queueingStrategy"] = queue.queueing_strategy
    if queue.preemption:
        spec["preemption"] = queue.preemption.model_dump(by_alias=True, exclude_none=True)
    if queue.fair_sharing:
        spec["fairSharing"] = fair_sharing(queue.fair_sharing)
    return {"apiVersion": API_VERSION, "kind": "ClusterQueue", "metadata": meta(queue.name), "spec": spec}


def _quota(queue: ClusterQueueConfig, flavor: PoolFlavor, resource: str, defaults: Amounts,
           problems: list[Problem], record: Callable[[str, str, Decimal], None]) -> dict[str, str]:
    """nominalQuota (and the limits that are set) for one resource of one pool."""
    capacity = flavor.capacity.get(resource, Decimal(0))
    quota = queue.amount("quota", flavor.pool, resource, defaults)
    nominal = quota.of(capacity) if quota else capacity
    if quota and quota.value is None and quota.fraction > 0 and capacity > 0 and nominal == 0:
        problems.append(Problem(SOURCE, f"ClusterQueue {queue.name}, pool {flavor.pool}: its {resource} quota rounds "
                                        f"down to 0 ({quota.fraction:g} of {format_quantity(capacity)} is less than a "
                                        "step); it can use the pool only by borrowing. Give the pool its own quota "
                                        "(flavors) or a smaller step"))
    record(flavor.pool, resource, nominal)
    entry = {"name": resource, "nominalQuota": format_quantity(nominal)}
    borrowing = queue.amount("borrowingLimit", flavor.pool, resource)
    if borrowing:
        entry["borrowingLimit"] = format_quantity(borrowing.of(capacity))
    lending = queue.amount("lendingLimit", flavor.pool, resource)
    if lending:
        amount = lending.of(capacity)
        if amount > nominal:
            problems.append(Problem(SOURCE, f"ClusterQueue {queue.name}, pool {flavor.pool}: {resource} lendingLimit "
                                            f"{format_quantity(amount)} is more than the quota "
                                            f"{format_quantity(nominal)}; lowered to it"))
            amount = nominal
        entry["lendingLimit"] = format_quantity(amount)
    return entry


def _overcommitted(flavors: Sequence[PoolFlavor], nominal: dict[tuple[str, str], list[Decimal]]) -> list[Problem]:
    out = []
    for flavor in flavors:
        for resource, capacity in sorted(flavor.capacity.items()):
            quotas = nominal.get((flavor.pool, resource), [])
            if sum(quotas, Decimal(0)) > capacity:
                out.append(Problem(SOURCE, f"pool {flavor.pool}: its ClusterQueues' {resource} quotas add up to "
                                           f"{format_quantity(sum(quotas, Decimal(0)))}, more than its "
                                           f"{format_quantity(capacity)}; Kueue may admit workloads that cannot "
                                           "all run at once"))
    return out


def fair_sharing(cfg: FairSharing) -> dict[str, str]:
    return {"weight": str(cfg.weight)}


def cohort(cfg: CohortConfig) -> Obj:
    spec: dict[str, Any] = {}
    if cfg.parent:
        spec["parentName"] = cfg.parent
    if cfg.fair_sharing:
        spec["fairSharing"] = fair_sharing(cfg.fair_sharing)
    return {"apiVersion": API_VERSION, "kind": "Cohort", "metadata": meta(cfg.name), "spec": spec}


def local_queues(cfg: KueueConfig) -> list[Obj]:
    default = cfg.default_queue()
    return [{"apiVersion": API_VERSION, "kind": "LocalQueue", "metadata": meta(q.name, ns),
             "spec": {"clusterQueue": q.cluster_queue or default}}
            for q in cfg.local_queues for ns in sorted(q.namespaces)]
