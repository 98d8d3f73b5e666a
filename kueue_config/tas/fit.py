"""Would Kueue admit this job now, and where? A model of Kueue v0.19's whole admission of a Workload.

In Kueue's order: the queue checks (`queueing`: LocalQueue, ClusterQueue, namespace), then each scheduling
cycle as the scheduler runs it - flavors per group of PodSets with quota (`flavors`), TAS placement in the
chosen flavors (`placer`), and when only preemption could make room, the workloads classical preemption
would evict (`preemption`). A cycle whose flavor did not work out makes Kueue resume the flavor search
after it in the next cycle; `fit` follows the cycles until one admits the Workload (or finds it a place by
preempting), or they come round again, and then reports the last cycle's message, the one a pending
Workload keeps. A LeaderWorkerSet makes one Workload per replica; they are admitted one after another,
each holding its quota and capacity for the next.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import AbstractSet, Any, Mapping, Sequence

from labeler.errors import TopologyError
from labeler.io.nodes import Node
from labeler.topology.names import HOSTNAME

from .admitted import Admitted, DomainUsage, leaf_id
from .annotations import RequestError, build_request
from .capacity import PODS, Resources, pod_requests
from .flavors import (MODE_FIT, MODE_NO_FIT, MODE_PREEMPT, Member, Pick, QuotaCheck, assign_group)
from .gates import Gates
from .placer import NoFit, Placement, Placer, PodSetRequest, podset_request
from .preemption import Preemptor, Snapshot, Target, find_targets, simulate
from .queueing import Blocker, Policies, Resolved
from .quota import FlavorResource, QuotaTree
from .setup import Flavor, Queue
from .tree import Exclusions, TASTree, build_tree
from .workloads import ELASTIC_JOB, PREFIX, Workload

MIN_PARALLELISM = PREFIX + "job-min-parallelism"
FITS, PREEMPTS, PENDING, BLOCKED = "fits", "preempts", "pending", "blocked"
NO_LONGER_FITS = "Workload no longer fits after processing another workload"


class CannotJudge(TopologyError):
    """Kueue would do something `fit` does not model (a gate that is off by default): no guess, exit 2."""


@dataclass
class PodSetFit:
    """The answer for one PodSet: its flavor, whether and where it fits, and Kueue's message when not."""

    workload: int
    podset: str
    pods: int
    mode: str
    level: str | None
    fits: bool
    flavor: str | None = None
    placed_level: str | None = None
    placed_pods: int = 0
    domains: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    max_pods_in_one_domain: int = 0
    message: str = ""
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """camelCase, like everything Kubernetes-facing."""
        return {"workload": self.workload, "podSet": self.podset, "pods": self.pods, "mode": self.mode,
                "level": self.level, "fits": self.fits, "flavor": self.flavor, "placedLevel": self.placed_level,
                "placedPods": self.placed_pods, "domains": self.domains, "nodes": self.nodes,
                "maxPodsInOneDomain": self.max_pods_in_one_domain, "message": self.message, "note": self.note}


@dataclass
class Attempt:
    """One scheduling cycle Kueue would run for a Workload: the flavors it tried and what came of it."""

    workload: int
    flavors: list[str]
    fits: bool
    message: str = ""


@dataclass
class FitReport:
    """Everything `topolabel fit` answers; `to_dict` is the `-o json` form.

    `outcome`: fits (admitted now), preempts (admitted once the workloads in `preempting` are evicted),
    pending (Kueue keeps it waiting with `kueue_message`), blocked (its queue stops it before any flavor)."""

    fits: bool
    topology: str | None
    flavor: str | None
    levels: tuple[str, ...]
    podsets: list[PodSetFit]
    excluded: Exclusions
    nodes_counted: int
    kueue_message: str = ""
    flavor_labels: Mapping[str, str] = field(default_factory=dict)
    attempts: list[Attempt] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    outcome: str = FITS
    stage: str = ""  # where a "no" comes from: queue, flavors, quota, topology
    preempting: list[Target] = field(default_factory=list)
    local_queue: str | None = None
    cluster_queue: str | None = None

    @property
    def deciding(self) -> PodSetFit | None:
        """The PodSet the headline is about: the first that fails, else the largest."""
        failed = [p for p in self.podsets if not p.fits]
        return failed[0] if failed else max(self.podsets, key=lambda p: p.pods, default=None)

    def domains(self) -> list[dict[str, Any]]:
        found: dict[tuple[str, ...], int] = {}
        for p in self.podsets:
            for d in p.domains:
                found[tuple(d["values"])] = found.get(tuple(d["values"]), 0) + d["pods"]
        return [{"values": list(v), "pods": n} for v, n in found.items()]

    def to_dict(self) -> dict[str, Any]:
        """The `-o json` form, camelCase. The snake_case keys of earlier releases follow, unchanged, for one
        more release (DEPRECATED_KEYS)."""
        main = self.deciding
        excluded = asdict(self.excluded)
        out = {
            "fits": self.fits, "outcome": self.outcome, "stage": self.stage,
            "localQueue": self.local_queue, "clusterQueue": self.cluster_queue,
            "kueueMessage": self.kueue_message,
            "level": main.level if main else None,
            "placedLevel": main.placed_level if main else None,
            "pods": sum(p.pods for p in self.podsets),
            "maxPodsInOneDomain": main.max_pods_in_one_domain if main else 0,
            "domains": self.domains(),
            "message": main.message if main and not main.fits else "",
            "topology": self.topology, "flavor": self.flavor, "levels": list(self.levels),
            "nodesCounted": self.nodes_counted,
            "nodesExcluded": {_camel(k): v for k, v in excluded.items()},
            "podSets": [p.to_dict() for p in self.podsets],
            "attempts": [asdict(a) for a in self.attempts],
            "preempting": [{"workload": t.workload.ref, "clusterQueue": t.workload.cluster_queue,
                            "priority": t.workload.priority, "reason": t.reason} for t in self.preempting],
            "notes": list(self.problems),
        }
        out.update({"kueue_message": self.kueue_message, "placed_level": out["placedLevel"],
                    "max_pods_in_one_domain": out["maxPodsInOneDomain"], "nodes_counted": self.nodes_counted,
                    "nodes_excluded": excluded, "podsets": [asdict(p) for p in self.podsets],
                    "problems": list(self.problems)})
        return out


DEPRECATED_KEYS = ("kueue_message", "placed_level", "max_pods_in_one_domain", "nodes_counted", "nodes_excluded",
                   "podsets", "problems")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.title() for w in rest)


# -- the cluster as admission sees it ------------------------------------------------------------------

@dataclass
class Usage:
    """Admitted workloads' TAS usage per flavor and leaf, as each flavor's snapshot sees it.

    Flavors whose Topology ends in the hostname share usage by node (Kueue's TASHandleOverlappingFlavors);
    the others see their own."""

    admitted: Sequence[Admitted]
    hostname_flavors: frozenset[str]

    def for_flavor(self, flavor: Flavor, removed: AbstractSet[str] = frozenset(),
                   empty: bool = False) -> dict[str, Resources]:
        if empty:
            return {}
        shared = flavor.name in self.hostname_flavors
        out: dict[str, Resources] = {}
        for wl in self.admitted:
            if wl.ref in removed:
                continue
            for name, leaves in wl.tas_usage().items():
                if name == flavor.name or (shared and name in self.hostname_flavors):
                    _merge(out, leaves)
        return out


@dataclass
class _Trees:
    """One tree per TAS flavor, built on first use."""

    nodes: Sequence[Node]
    free: Mapping[str, Resources]
    gates: Gates
    built: dict[str, TASTree] = field(default_factory=dict)

    def tree(self, flavor: Flavor) -> TASTree:
        if flavor.name not in self.built:
            self.built[flavor.name] = build_tree(flavor.levels or (), self.nodes, self.free, flavor.node_labels)
        return self.built[flavor.name]


def _merge(total: dict[str, Resources], more: Mapping[str, Resources]) -> None:
    for leaf, used in more.items():
        into = total.setdefault(leaf, {})
        for key, value in used.items():
            into[key] = into.get(key, 0) + value


def _add_usage(usage: dict[str, Resources], leaf: str, requests: Mapping[str, int], pods: int) -> None:
    """Charge `pods` pods of `requests` (and a `pods` slot each) to a leaf, as Kueue's TAS usage does."""
    _merge(usage, {leaf: {k: v * pods for k, v in {**requests, PODS: requests.get(PODS, 0) + 1}.items()}})


def _leader_and_workers(reqs: list[PodSetRequest]) -> tuple[PodSetRequest, PodSetRequest | None]:
    """Kueue's `findLeaderAndWorkers`: the first two requests of a group; the one with more pods works."""
    workers, leader = reqs[0], (reqs[1] if len(reqs) > 1 else None)
    if leader is not None and leader.count > workers.count:
        workers, leader = leader, workers
    return workers, leader


def _placed(index: int, req: PodSetRequest, flavor: Flavor, tree: TASTree, placement: Placement,
            most: int) -> PodSetFit:
    chosen = placement.leaves.get(req.name)
    placed = sum(n for _, n in chosen or [])
    note = ""
    if chosen is None:
        note = ("Kueue places only two PodSets of a group; this one gets no topology assignment, so kube-scheduler "
                "places its pods anywhere the flavor allows")
    elif placed < req.count:
        note = (f"Kueue treats this grouped PodSet as a one-pod leader: it places {placed} of its {req.count} pods; "
                f"the other {req.count - placed} keep their scheduling gate and never start")
    return PodSetFit(index, req.name, req.count, req.mode, req.level(tree.keys), True, flavor.name,
                     tree.keys[placement.level_idx], placed,
                     [{"values": list(v), "pods": n} for v, n in placement.domains(req.name)],
                     [{"node" if tree.hostname_lowest else "domain": leaf.id, "pods": n} for leaf, n in chosen or []],
                     most, note=note)


# -- one Workload's scheduling cycles --------------------------------------------------------------------

@dataclass
class _Placing:
    """The outcome of TAS placement for all TAS PodSets of an assignment."""

    podsets: dict[str, PodSetFit]
    failed: str | None = None  # the PodSet that did not fit
    reason: str = ""
    usage: dict[str, list[DomainUsage]] = field(default_factory=dict)  # flavor -> pods per leaf


@dataclass
class _Cycle:
    """One scheduling cycle's outcome for one Workload, and where the next cycle's flavor searches start."""

    outcome: str
    podsets: list[PodSetFit]
    message: str
    flavors: list[str]
    state: list[dict[str, int]]
    stage: str = ""
    targets: list[Target] = field(default_factory=list)
    quota: dict[FlavorResource, int] = field(default_factory=dict)
    tas: dict[str, list[DomainUsage]] = field(default_factory=dict)

    @property
    def pending_flavors(self) -> bool:
        """Kueue's `PendingFlavors`: some search has flavors left to try."""
        return any(idx != -1 for ps in self.state for idx in ps.values())


class _WorkloadFit:
    """Kueue's scheduling cycles for one Workload of the object (one per LeaderWorkerSet replica)."""

    def __init__(self, workload: Workload, ctx: "_Context", index: int) -> None:
        self.ctx, self.index = ctx, index
        queue = ctx.queue
        self.members = [self._member(i, workload) for i in range(len(workload.podsets))]
        order: dict[str, list[int]] = {}
        for i, m in enumerate(self.members):
            order.setdefault(m.topology.group or f"#{i}", []).append(i)
        self.groups = list(order.values())
        self.covers_pods = any(PODS in cov for cov in queue.covered.values())

    def _member(self, i: int, workload: Workload) -> Member:
        ps = workload.podsets[i]
        try:
            topology = build_request(ps.annotations, self.ctx.gates.multi_layer)
        except RequestError as exc:
            raise TopologyError(f"{workload.ref} PodSet {ps.name}: Kueue cannot build its Workload: {exc}") from None
        return Member(ps, topology, not topology.explicit and self.ctx.queue.tas_only, pod_requests(ps.spec))

    def total(self, m: Member) -> Resources:
        """The PodSet's requests as the flavor assigner sees them: per pod x count, and `pods` when covered."""
        out = {k: max(v, 0) * m.podset.count for k, v in m.requests.items()}
        if self.covers_pods:
            out[PODS] = m.podset.count
        return out

    # flavors ------------------------------------------------------------------------------------------
    def cycle(self, state: list[dict[str, int]] | None) -> _Cycle:
        ctx = self.ctx
        picks: list[dict[str, Pick]] = [{} for _ in self.members]
        reasons: list[list[str]] = [[] for _ in self.members]
        next_state: list[dict[str, int]] = []
        order: list[int] = []
        quota_usage: dict[FlavorResource, int] = {}
        for ids in self.groups:
            requests: Resources = {}
            for i in ids:
                for k, v in self.total(self.members[i]).items():
                    requests[k] = requests.get(k, 0) + v
            # Kueue's NextFlavorToTryForPodSetResource: past the flavor tried last (-1: from the first)
            starts = {r: i + 1 for r, i in state[ids[0]].items()} if state and ids[0] < len(state) else {}
            result = assign_group([self.members[i] for i in ids], requests, ctx.queue, starts, quota_usage,
                                  ctx.quota_check(), ctx.policies.fungibility)
            failed = False
            for i in ids:
                mine = self._own(i, result.picks or {})
                picks[i], reasons[i] = mine, list(result.reasons)
                order.append(i)
                for res, pick in mine.items():
                    fr = (pick.flavor.name, res)
                    quota_usage[fr] = quota_usage.get(fr, 0) + self.total(self.members[i]).get(res, 0)
                next_state.append({res: pick.tried for res, pick in mine.items()})
                if self.total(self.members[i]) and not mine:
                    failed = True
            if failed:
                return self._answer(PENDING, picks, reasons, {}, next_state, order, quota_usage, "")
        # Kueue's PodSetAssignment.RepresentativeMode: fit without reasons, else the worst flavor's mode
        modes = [MODE_FIT if not reasons[i] else min((p.mode for p in ps.values()), default=MODE_NO_FIT)
                 for i, ps in enumerate(picks)]
        if min(modes, default=MODE_FIT) == MODE_NO_FIT:
            return self._answer(PENDING, picks, reasons, {}, next_state, order, quota_usage, "")
        return self._topology(picks, reasons, modes, next_state, order, quota_usage)

    def _own(self, i: int, group: Mapping[str, Pick]) -> dict[str, Pick]:
        """Kueue's `resolvePodSetFlavors`: the group's flavors for the resources this PodSet asks for; a
        grouped PodSet asking for none (an LWS leader) gets the group's TAS flavors."""
        total = self.total(self.members[i])
        if total:
            return {r: p for r, p in group.items() if r in total}
        if self.members[i].topology.group:
            return {r: p for r, p in group.items() if p.flavor.tas}
        return {}

    # topology -----------------------------------------------------------------------------------------
    def _tas_requests(self, picks: list[dict[str, Pick]]) -> tuple[dict[str, tuple[Flavor, list[int]]], dict[int, str]]:
        """Kueue's `WorkloadsTopologyRequests`: TAS PodSets by their one TAS flavor, and errors by PodSet."""
        by_flavor: dict[str, tuple[Flavor, list[int]]] = {}
        errors: dict[int, str] = {}
        for i, m in enumerate(self.members):
            if not m.tas or m.podset.count == 0:
                continue
            tas = sorted({p.flavor.name: p.flavor for p in picks[i].values() if p.flavor.tas}.items())
            if len(tas) != 1:
                errors[i] = ("more than one TAS flavor assigned: " + ", ".join(n for n, _ in tas)) if tas \
                    else "no TAS flavor assigned"
                continue
            by_flavor.setdefault(tas[0][0], (tas[0][1], []))[1].append(i)
        return by_flavor, errors

    def place(self, by_flavor: Mapping[str, tuple[Flavor, list[int]]], removed: AbstractSet[str] = frozenset(),
              empty: bool = False) -> _Placing:
        """Kueue's `FindTopologyAssignmentsForWorkload`: flavors in name order, PodSet groups in order, each after
        the ones before; flavors placing by hostname share what this Workload took. Stops at the first failure."""
        out = _Placing({})
        shared: dict[str, Resources] = {}
        for name in sorted(by_flavor):
            flavor, ids = by_flavor[name]
            tree = self.ctx.trees.tree(flavor)
            assumed = shared if flavor.levels and flavor.levels[-1] == HOSTNAME else {}
            placer = Placer(tree, str(flavor.topology), flavor.tolerations, assumed,
                            self.ctx.usage.for_flavor(flavor, removed, empty), self.ctx.gates.profile_mixed)
            groups: dict[str, list[PodSetRequest]] = {}
            for i in ids:
                m = self.members[i]
                groups.setdefault(m.topology.group or f"#{i}", []).append(podset_request(m.podset, m.topology, m.implied))
            mine = out.usage.setdefault(name, [])
            for reqs in groups.values():
                workers, leader = _leader_and_workers(reqs)
                try:
                    placement, most, _ = placer.place(workers, leader)
                except NoFit as exc:
                    for r in reqs:
                        out.podsets[r.name] = PodSetFit(self.index, r.name, r.count, r.mode, r.level(tree.keys), False,
                                                        flavor.name, max_pods_in_one_domain=exc.most, message=str(exc))
                    out.failed, out.reason = workers.name if len(reqs) == 1 else reqs[0].name, str(exc)
                    return out
                for req in reqs:
                    out.podsets[req.name] = _placed(self.index, req, flavor, tree, placement, most)
                    for leaf, n in placement.leaves.get(req.name, []):
                        _add_usage(assumed, leaf.id, req.requests, n)
                        mine.append(DomainUsage(leaf.id, n, req.requests))
        return out

    def _topology(self, picks: list[dict[str, Pick]], reasons: list[list[str]], modes: list[int],
                  state: list[dict[str, int]], order: list[int], quota: dict[FlavorResource, int]) -> _Cycle:
        by_flavor, errors = self._tas_requests(picks)
        if errors:
            i = next(i for i in order if i in errors)
            cycle = self._answer(PENDING, picks, reasons, {}, state, order, quota, "flavors")
            cycle.message = f"failed to assign flavors to pod set {self.members[i].podset.name}: {errors[i]}"
            return cycle
        stage = "quota"
        placing = _Placing({})
        mode = min(modes, default=MODE_FIT)
        if mode == MODE_FIT:
            placing = self.place(by_flavor)
            if placing.failed is None:
                return self._answer(FITS, picks, reasons, placing.podsets, state, order, quota, "", placing.usage)
            failed = next(i for i, m in enumerate(self.members) if m.podset.name == placing.failed)
            reasons[failed].append(placing.reason)
            mode, stage = MODE_PREEMPT, "topology"
        if self.place(by_flavor, empty=True).failed is not None:
            return self._answer(PENDING, picks, reasons, placing.podsets, state, order, quota, stage)
        # Kueue marks the PodSets that failed TAS, then every TAS PodSet, as needing preemption
        tas_ids = {i for _, ids in by_flavor.values() for i in ids}
        need = {(p.flavor.name, r) for i, ps in enumerate(picks) for r, p in ps.items()
                if p.mode == MODE_PREEMPT or i in tas_ids}
        targets = self.ctx.targets(need, self._requested(picks),
                                   lambda removed: self.place(by_flavor, removed).failed is None)
        if not targets:
            return self._answer(PENDING, picks, reasons, placing.podsets, state, order, quota, stage)
        if not self.ctx.fits_after(quota, targets):
            # Kueue's processEntry: what the Workload would reserve must fit once the targets are gone; it
            # counts `pods`, which the search for targets leaves out
            cycle = self._answer(PENDING, picks, reasons, {}, state, order, quota, "quota")
            cycle.message = NO_LONGER_FITS
            return cycle
        after = self.place(by_flavor, {t.workload.ref for t in targets})
        cycle = self._answer(PREEMPTS, picks, reasons, after.podsets, state, order, quota, stage, after.usage)
        cycle.targets = targets
        cycle.message += f". Pending the preemption of {len(targets)} workload(s)"
        return cycle

    def _requested(self, picks: list[dict[str, Pick]]) -> dict[FlavorResource, int]:
        """Kueue's `TotalRequestsFor`: what the Workload asks of each flavor, without the `pods` count."""
        out: dict[FlavorResource, int] = {}
        for i, ps in enumerate(picks):
            m = self.members[i]
            for res, value in m.requests.items():
                if value > 0 and m.podset.count and res in ps:
                    fr = (ps[res].flavor.name, res)
                    out[fr] = out.get(fr, 0) + value * m.podset.count
        return out

    def _answer(self, outcome: str, picks: list[dict[str, Pick]], reasons: list[list[str]],
                placed: Mapping[str, PodSetFit], state: list[dict[str, int]], order: list[int],
                quota: dict[FlavorResource, int], stage: str, tas: dict[str, list[DomainUsage]] | None = None
                ) -> _Cycle:
        """The cycle's answer: a PodSetFit per PodSet, and Kueue's `Assignment.Message()`."""
        podsets, parts = [], []
        for i in order:
            m = self.members[i]
            if reasons[i]:
                parts.append(f"couldn't assign flavors to pod set {m.podset.name}: {', '.join(sorted(reasons[i]))}")
            found = placed.get(m.podset.name)
            if found is None:
                flavor = next(iter(picks[i].values())).flavor.name if picks[i] else None
                if outcome == FITS or (outcome == PREEMPTS and not m.tas):
                    note = ("no pods to place" if not m.podset.count else
                            f"no TAS: Kueue admits it on flavor {flavor} and kube-scheduler places the pods")
                    found = PodSetFit(self.index, m.podset.name, m.podset.count, self._mode(m), None, True, flavor,
                                      note=note)
                else:
                    level = m.topology.required or m.topology.preferred
                    found = PodSetFit(self.index, m.podset.name, m.podset.count, self._mode(m), level, False, flavor,
                                      message="; ".join(sorted(reasons[i])))
            podsets.append(found)
        flavors = sorted({p.flavor.name for ps in picks for p in ps.values()})
        message = "; ".join(parts)
        if not stage and outcome != FITS:
            stage = "quota" if "insufficient" in message else "flavors"
        return _Cycle(outcome, podsets, message, flavors, state, stage, quota=quota, tas=tas or {})

    @staticmethod
    def _mode(m: Member) -> str:
        return podset_request(m.podset, m.topology, m.implied).mode if m.tas else "none"

    def run(self) -> tuple[_Cycle, list[Attempt]]:
        """Cycles until one admits the Workload (or preempts for it), no flavor is left to try, or the searches
        come round again; the last cycle's message is the one a pending Workload keeps."""
        state: list[dict[str, int]] | None = None
        seen: set[str] = set()
        attempts: list[Attempt] = []
        while True:
            last = self.cycle(state)
            attempts.append(Attempt(self.index, last.flavors, last.outcome == FITS, last.message))
            if last.outcome != PENDING or not last.pending_flavors:
                return last, attempts
            key = repr(last.state)
            if key in seen:
                return last, attempts
            seen.add(key)
            state = last.state


@dataclass
class _Context:
    """What one admission reads: the queue and its policies, quota, admitted workloads, trees."""

    queue: Queue
    policies: Policies
    trees: _Trees
    gates: Gates
    tree: QuotaTree | None
    admitted: list[Admitted]
    usage: Usage
    preemptor: Preemptor

    def snapshot(self) -> Snapshot | None:
        return Snapshot(self.tree, self.admitted) if self.tree is not None else None

    def quota_check(self) -> QuotaCheck | None:
        cq = self.queue.cluster_queue
        if self.tree is None or cq is None or cq not in self.tree.queues:
            return None
        snap = self.snapshot()
        assert snap is not None
        return QuotaCheck(self.tree.queues[cq],
                          lambda fr, value: simulate(snap, cq, self.preemptor, self.policies.preemption, fr, value),
                          self.policies.preemption.borrow_within_cohort != "Never")

    def fits_after(self, usage: Mapping[FlavorResource, int], targets: Sequence[Target]) -> bool:
        """Kueue's `fits` check in processEntry: the usage fits the ClusterQueue with the targets gone."""
        snap = self.snapshot()
        if snap is None or self.queue.cluster_queue not in snap.tree.queues:
            return True
        cq = snap.tree.queues[str(self.queue.cluster_queue)]
        for t in targets:
            snap.remove(t.workload)
        try:
            return all(cq.available(fr) >= value for fr, value in usage.items())
        finally:
            for t in targets:
                snap.add(t.workload)

    def targets(self, need: set[FlavorResource], usage: Mapping[FlavorResource, int],
                tas_fits: Any) -> list[Target]:
        snap = self.snapshot()
        if snap is None or self.queue.cluster_queue not in snap.tree.queues:
            return []
        return find_targets(snap, str(self.queue.cluster_queue), self.preemptor, self.policies.preemption, need,
                            {fr: v for fr, v in usage.items() if v}, tas_fits)


def refuse_to_guess(workload: Workload, gates: Gates, uses_tas: bool) -> None:
    """Raise CannotJudge when Kueue would run code `fit` does not model for this job."""
    if not uses_tas:
        return
    annotations = (workload.obj.get("metadata") or {}).get("annotations") or {}
    if gates["ElasticJobsViaWorkloadSlices"] and str(annotations.get(ELASTIC_JOB)) == "true":
        raise CannotJudge(f"{workload.ref}: cannot judge: an elastic job ({ELASTIC_JOB}) is placed in workload "
                          "slices, which fit does not model (TAS for them is the ElasticJobsViaWorkloadSlicesWithTAS "
                          "gate, alpha, off by default)")
    for gate in gates.unmodelled():
        if gate == "TASBalancedPlacement" and not any(
                ps.annotations.get("kueue.x-k8s.io/podset-preferred-topology") for ps in workload.podsets):
            continue
        if gate == "TASRespectNodeAffinityPreferred" and not any(
                ((ps.spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("preferredDuringSchedulingIgnoredDuringExecution") for ps in workload.podsets):
            continue
        raise CannotJudge(f"{workload.ref}: cannot judge: Kueue runs with {gate} on, which fit does not model")


@dataclass
class Cluster:
    """What admission reads besides the job: nodes and their free capacity (allocatable less the pods Kueue
    counts), the workloads holding quota, and, from a cluster, the namespaces' labels."""

    nodes: Sequence[Node]
    free: Mapping[str, Resources]
    admitted: list[Admitted] = field(default_factory=list)
    namespaces: Mapping[str, Mapping[str, str]] | None = None
    tas_flavors: Mapping[str, Flavor] = field(default_factory=dict)  # every TAS flavor (usage is shared by node)


def fit(workload: Workload, nodes: Sequence[Node], free: Mapping[str, Resources], queue: Queue,
        gates: Gates = Gates()) -> FitReport:
    """Placement alone: the queue's flavors in order, without quota (every flavor taken to have it)."""
    return admit(workload, Cluster(nodes, free), Resolved(queue), gates, None)


def admit(workload: Workload, cluster: Cluster, resolved: Resolved, gates: Gates = Gates(),
          tree: QuotaTree | None = None, preemptor: Preemptor = Preemptor()) -> FitReport:
    """Kueue's answer for every Workload the object makes, in order, each after the ones before it.

    `tree` is the quota tree with the admitted workloads charged (None: quota not modelled)."""
    queue = resolved.queue
    trees = _Trees(cluster.nodes, cluster.free, gates)
    flavors = {**cluster.tas_flavors, **{f.name: f for f in queue.flavors if f.tas}}
    hostname = frozenset(n for n, f in flavors.items() if f.levels and f.levels[-1] == HOSTNAME)
    admitted = list(cluster.admitted)
    ctx = _Context(queue, resolved.policies, trees, gates, tree, admitted, Usage(admitted, hostname), preemptor)
    if resolved.blocker is not None:
        return _blocked(resolved.blocker, resolved, queue)
    _partial_admission(workload)
    podsets: list[PodSetFit] = []
    attempts: list[Attempt] = []
    last: _Cycle | None = None
    for index in range(workload.workloads):
        wf = _WorkloadFit(workload, ctx, index)
        if index == 0:
            refuse_to_guess(workload, gates, any(m.tas for m in wf.members))
        last, tried = wf.run()
        attempts += tried
        podsets += last.podsets
        if last.outcome != FITS:
            break
        done = Admitted("(this job)", f"{workload.name}-{index}", f"fit-{index}", queue.cluster_queue or "",
                        preemptor.priority, quota=dict(last.quota), tas=dict(last.tas))
        admitted.append(done)
        if tree is not None and queue.cluster_queue:
            tree.charge(queue.cluster_queue, last.quota)
    report = _report(last, podsets, attempts, queue, trees, resolved)
    if report.outcome in (FITS, PREEMPTS) and resolved.unmodelled:
        raise CannotJudge(f"{workload.ref}: cannot judge: it fits as far as fit can tell, but "
                          + "; ".join(resolved.unmodelled))
    return report


def _partial_admission(workload: Workload) -> None:
    annotations = (workload.obj.get("metadata") or {}).get("annotations") or {}
    if MIN_PARALLELISM in annotations:
        raise CannotJudge(f"{workload.ref}: cannot judge: {MIN_PARALLELISM} lets Kueue admit it with fewer pods "
                          "(partial admission), which fit does not model")


def _blocked(blocker: Blocker, resolved: Resolved, queue: Queue) -> FitReport:
    report = FitReport(False, None, None, (), [], Exclusions(), 0, blocker.message, outcome=BLOCKED, stage="queue",
                       local_queue=queue.local_queue, cluster_queue=queue.cluster_queue)
    report.problems += resolved.notes
    return report


def _report(last: _Cycle | None, podsets: list[PodSetFit], attempts: list[Attempt], queue: Queue, trees: _Trees,
            resolved: Resolved) -> FitReport:
    """The report, headed by the flavor of the PodSet that decides (the first that failed, else the largest)."""
    outcome = last.outcome if last else FITS
    report = FitReport(outcome == FITS, None, None, (), podsets, Exclusions(), 0,
                       last.message if last and outcome != FITS else "", attempts=attempts, outcome=outcome,
                       stage=last.stage if last and outcome != FITS else "",
                       preempting=list(last.targets) if last else [], local_queue=queue.local_queue,
                       cluster_queue=queue.cluster_queue)
    main = report.deciding
    by_name = {f.name: f for f in queue.flavors}
    flavor = by_name.get(main.flavor) if main and main.flavor else None
    if flavor is None and main is not None and not main.fits:
        flavor = next((f for f in queue.flavors if f.tas), None)
    if flavor is not None:
        report.flavor, report.flavor_labels = flavor.name, flavor.node_labels
    if flavor is not None and flavor.tas:
        tree = trees.tree(flavor)
        report.topology, report.levels = flavor.topology, tree.keys
        report.excluded, report.nodes_counted = tree.excluded, len(tree.leaves)
    report.problems += resolved.notes
    if not podsets:
        report.problems.append("the job has no PodSets with pods; Kueue has nothing to place")
    if not queue.flavors:
        report.problems.append("the ClusterQueue has no flavors")
    return report


def leaf_of(levels: tuple[str, ...], values: Sequence[str]) -> str:
    """The leaf id of a domain given by all its values (re-exported for callers holding assignments)."""
    return leaf_id(levels, tuple(values))
