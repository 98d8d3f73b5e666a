"""How many jobs of one shape Kueue would admit now, where, and the room left at every level.

A shape is what a person asks about: pods x requests per pod, a level (required or preferred), optional
slices, a queue. `how_many` makes the batch Job of that shape and lets Kueue admit copies of it one after
another, each holding its quota and capacity for the next (the way LeaderWorkerSet replicas are admitted),
until one is not admitted: the count is what Kueue would do with that many jobs submitted now. `room` is
Kueue's own first phase of placement per flavor: at every level, how many pods of the shape the roomiest
domain holds, and how many domains hold a whole job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from labeler.errors import TopologyError
from labeler.topology.names import HOSTNAME

from .annotations import build_request
from .capacity import allocatable, amount
from .fit import FITS, FitReport, Usage
from .gates import Gates
from .judge import Inputs, judge, resolved_queue
from .placer import NoFit, Placer, podset_request
from .setup import Flavor
from .tree import build_tree
from .workloads import PREFERRED, QUEUE_LABEL, REQUIRED, SLICE_REQUIRED, SLICE_SIZE, Workload, workload_of

MAX_JOBS = 1000


@dataclass(frozen=True)
class Shape:
    """One job as a person describes it."""

    pods: int
    requests: Mapping[str, str]
    level: str | None = None
    preferred: bool = False
    slice_size: int | None = None
    slice_level: str | None = None
    queue: str = "gpu"
    namespace: str = "default"

    def job(self) -> dict[str, Any]:
        annotations: dict[str, str] = {}
        if self.level:
            annotations[PREFERRED if self.preferred else REQUIRED] = self.level
        if self.slice_size:
            annotations[SLICE_REQUIRED] = str(self.slice_level)
            annotations[SLICE_SIZE] = str(self.slice_size)
        template: dict[str, Any] = {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "main", "resources": {"requests": dict(self.requests),
                                                           "limits": dict(self.requests)}}]}}
        if annotations:
            template["metadata"] = {"annotations": annotations}
        return {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "capacity", "namespace": self.namespace, "labels": {QUEUE_LABEL: self.queue}},
                "spec": {"parallelism": self.pods, "completions": self.pods, "template": template}}

    def workload(self, copies: int) -> Workload:
        found = workload_of(self.job(), "shape")
        assert found is not None
        found.workloads = copies
        return found


@dataclass
class LevelRoom:
    """At one level of a flavor's Topology: the roomiest domain for this shape, and whole jobs' worth."""

    level: str
    domains: int
    largest: int  # pods of the shape the roomiest domain holds
    largest_domain: str
    holding_job: int  # domains that hold a whole job


@dataclass
class FlavorRoom:
    flavor: str
    topology: str
    jobs: int  # jobs of the shape Kueue would admit in this flavor alone (quota included)
    levels: list[LevelRoom] = field(default_factory=list)


@dataclass
class Capacity:
    shape: Shape
    jobs: int
    placements: list[dict[str, Any]]  # per admitted copy: flavor and pods per domain
    stopped_by: str  # why the next one is not admitted (Kueue's message)
    cluster_queue: str | None
    flavors: list[FlavorRoom] = field(default_factory=list)


def _bound(shape: Shape, inputs: Inputs) -> int:
    """More jobs than could possibly fit in the cluster's free capacity (so counting stops there)."""
    per_pod = {k: amount(k, v) for k, v in shape.requests.items()}
    free = inputs.free()
    bound = MAX_JOBS
    for res, need in per_pod.items():
        if need > 0:
            total = sum(max(0, f.get(res, 0)) for f in free.values())
            bound = min(bound, total // (need * max(shape.pods, 1)) + 1)
    return max(bound, 1)


def _count(report: FitReport, copies: int) -> tuple[int, list[dict[str, Any]]]:
    """Copies admitted (all their PodSets fit), and where each went."""
    placements = []
    last = max((p.workload for p in report.podsets), default=-1)
    for index in range(copies):
        podsets = [p for p in report.podsets if p.workload == index]
        # the last one judged is admitted only when the answer is "fits" (not only by preempting)
        if not podsets or not all(p.fits for p in podsets) or (index == last and report.outcome != FITS):
            break
        placements.append({"flavor": podsets[0].flavor, "domains": [d for p in podsets for d in p.domains]})
    return len(placements), placements


def how_many(shape: Shape, inputs: Inputs, gates: Gates = Gates(), flavor: str | None = None) -> Capacity:
    """Jobs of this shape Kueue would admit now, submitted one after another (with `flavor`, in it alone)."""
    copies = _bound(shape, inputs)
    workload = shape.workload(copies)
    report = judge(workload, inputs, gates, flavor)
    jobs, placements = _count(report, copies)
    stopped = report.kueue_message if report.outcome != FITS else f"counting stops at {copies}"
    return Capacity(shape, jobs, placements, stopped, report.cluster_queue)


def room(shape: Shape, flavor: Flavor, inputs: Inputs, gates: Gates = Gates()) -> list[LevelRoom]:
    """Kueue's first phase of placement for the shape in one flavor: per level, the roomiest domain."""
    return room_for(shape.workload(1), "main", flavor, inputs, gates)


def room_for(workload: Workload, podset: str, flavor: Flavor, inputs: Inputs, gates: Gates = Gates()) -> list[LevelRoom]:
    """The same for one PodSet of a job."""
    if not flavor.tas:
        return []
    ps = next(p for p in workload.podsets if p.name == podset)
    tree = build_tree(flavor.levels or (), inputs.nodes, inputs.free(), flavor.node_labels)
    hostname = frozenset(f.name for f in inputs.setup.flavors.values() if f.levels and f.levels[-1] == HOSTNAME)
    usage = Usage(inputs.admitted(), hostname).for_flavor(flavor)
    placer = Placer(tree, str(flavor.topology), flavor.tolerations, {}, usage, gates.profile_mixed)
    # without a level, as implied TAS: counted per node and rolled up through every level
    request = podset_request(ps, build_request(ps.annotations, gates.multi_layer), not ps.annotations)
    try:
        levels = placer.counts(request)
    except NoFit as exc:  # the checks Kueue runs first (a level not in this Topology)
        raise TopologyError(f"flavor {flavor.name}: {exc}") from None
    out = []
    for key, domains in zip(tree.keys, levels):
        best = max(domains, key=lambda d: (d.pods, [-ord(c) for c in ",".join(d.values)]), default=None)
        out.append(LevelRoom(key, len(domains), best.pods if best else 0, best.values[-1] if best else "",
                             sum(d.pods >= ps.count for d in domains)))
    return out


def capacity(shape: Shape, inputs: Inputs, gates: Gates = Gates()) -> Capacity:
    """The whole answer: jobs Kueue admits through the queue, and per TAS flavor its own count and room."""
    total = how_many(shape, inputs, gates)
    resolved = resolved_queue(shape.workload(1), inputs)
    for flavor in resolved.queue.flavors:
        if not flavor.tas:
            continue
        alone = how_many(shape, inputs, gates, flavor.name) if len(resolved.queue.flavors) > 1 else total
        total.flavors.append(FlavorRoom(flavor.name, str(flavor.topology), alone.jobs, room(shape, flavor, inputs, gates)))
    return total


@dataclass
class FreeLevel:
    level: str
    domains: int
    largest: int  # the most of the resource free in one domain
    whole: int  # domains with all of it free (and some of it)


@dataclass
class FreeRoom:
    """For one TAS flavor and one resource: free amounts per level, and per top-level domain."""

    flavor: str
    resource: str
    levels: list[FreeLevel] = field(default_factory=list)
    top: dict[str, int] = field(default_factory=dict)


def free_room(flavor: Flavor, inputs: Inputs, resources: list[str]) -> list[FreeRoom]:
    """What is free in each domain of a TAS flavor, as Kueue counts it: allocatable less non-TAS pods less
    what admitted Workloads' topology assignments hold."""
    if not flavor.tas:
        return []
    tree = build_tree(flavor.levels or (), inputs.nodes, inputs.free(), flavor.node_labels,
                      allocatable(inputs.nodes))
    hostname = frozenset(f.name for f in inputs.setup.flavors.values() if f.levels and f.levels[-1] == HOSTNAME)
    usage = Usage(inputs.admitted(), hostname).for_flavor(flavor)
    out = []
    for res in resources:
        free: dict[int, tuple[int, int]] = {}  # id(domain) -> (free, total)

        def walk(d: Any) -> tuple[int, int]:
            if not d.children:
                total = d.total.get(res, 0)
                got = max(0, d.free.get(res, 0) - usage.get(d.id, {}).get(res, 0))
            else:
                parts = [walk(c) for c in d.children]
                got, total = sum(p[0] for p in parts), sum(p[1] for p in parts)
            free[id(d)] = (got, total)
            return got, total
        for root in tree.roots:
            walk(root)
        room = FreeRoom(flavor.name, res)
        for key, level in zip(tree.keys, tree.levels):
            amounts = [free[id(d)] for d in level.values()]
            room.levels.append(FreeLevel(key, len(amounts), max((a[0] for a in amounts), default=0),
                                         sum(1 for got, total in amounts if total and got == total)))
        room.top = {d.values[0]: free[id(d)][0] for d in tree.roots}
        out.append(room)
    return out
