"""Which admitted workloads Kueue v0.19 would preempt to make room, with classical preemption.

Follows `pkg/scheduler/preemption` (`classicalPreemptions`, `classical.NewCandidateIterator`,
`classifyPreemptionVariant`, `fillBackWorkloads`): candidates are the workloads of the ClusterQueue the
`withinClusterQueue` policy allows, and, with `reclaimWithinCohort`, those of cohort members that borrow
(over their nominal quota), split into those the preemptor has a hierarchical advantage over and those its
priority decides; ordered evicted first, other queues before its own, lowest priority, newest reservation,
then UID. They are removed one by one until the workload fits (quota, and TAS placement with their
capacity freed), then added back, last first, where it still fits. Fair sharing is not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cmp_to_key
from typing import Callable, Iterable, Mapping

from .admitted import Admitted
from .queueing import Preemption
from .quota import FlavorResource, Node, QuotaTree, lowest_fitting_height

NEVER, WITHIN_CQ, HIERARCHICAL, RECLAIM_WITHOUT_BORROWING, RECLAIM_WHILE_BORROWING = range(5)
REASONS = {WITHIN_CQ: "InClusterQueue", HIERARCHICAL: "InCohortReclamation",
           RECLAIM_WITHOUT_BORROWING: "InCohortReclamation", RECLAIM_WHILE_BORROWING: "InCohortReclaimWhileBorrowing"}
NO_CANDIDATES, PREEMPT, RECLAIM = "NoCandidates", "Preempt", "Reclaim"


@dataclass(frozen=True)
class Preemptor:
    """The workload looking for room: its priority and when it was created ("" = now, the newest)."""

    priority: int = 0
    created_at: str = ""


@dataclass
class Target:
    workload: Admitted
    reason: str


def satisfies(preemptor: Preemptor, candidate: Admitted, policy: str) -> bool:
    """Kueue's `SatisfiesPreemptionPolicy`."""
    if policy == "LowerPriority":
        return preemptor.priority > candidate.priority
    if policy == "LowerOrNewerEqualPriority":
        newer = bool(preemptor.created_at) and preemptor.created_at < candidate.created_at
        return preemptor.priority > candidate.priority or (preemptor.priority == candidate.priority and newer)
    return policy == "Any"


@dataclass
class Snapshot:
    """The quota tree and the admitted workloads, with some of them removed as if preempted (or finished)."""

    tree: QuotaTree
    workloads: list[Admitted]
    removed: set[str] = field(default_factory=set)

    def by_queue(self, queue: str) -> list[Admitted]:
        return [w for w in self.workloads if w.cluster_queue == queue and w.ref not in self.removed]

    def remove(self, wl: Admitted) -> None:
        self.tree.charge(wl.cluster_queue, wl.quota, -1)
        self.removed.add(wl.ref)

    def add(self, wl: Admitted) -> None:
        self.tree.charge(wl.cluster_queue, wl.quota, 1)
        self.removed.discard(wl.ref)


@dataclass
class _Candidate:
    workload: Admitted
    lca: Node | None
    variant: int


class _Search:
    """One preemption search (`preemptionCtx`): the preemptor, its queue, what it needs, and how it fits."""

    def __init__(self, snap: Snapshot, queue: str, preemptor: Preemptor, policy: Preemption,
                 need: set[FlavorResource], usage: Mapping[FlavorResource, int],
                 tas_fits: Callable[[set[str]], bool]) -> None:
        self.snap, self.preemptor, self.policy = snap, preemptor, policy
        self.cq = snap.tree.queues[queue]
        self.need, self.usage, self.tas_fits = need, dict(usage), tas_fits

    def fits(self, allow_borrowing: bool) -> bool:
        """Kueue's `workloadFits`."""
        for fr, value in self.usage.items():
            if not allow_borrowing and self.cq.borrowing_with(fr, value):
                return False
            if value > self.cq.available(fr):
                return False
        return self.tas_fits(self.snap.removed)

    def variant(self, wl: Admitted, advantage: bool) -> int:
        if not wl.uses(self.need):
            return NEVER
        same = wl.cluster_queue == self.cq.name
        policy = self.policy.within_cluster_queue if same else self.policy.reclaim_within_cohort
        if not satisfies(self.preemptor, wl, policy):
            return NEVER
        if same:
            return WITHIN_CQ
        if advantage:
            return HIERARCHICAL
        threshold = self.policy.max_priority_threshold
        if self.policy.borrow_within_cohort == "Never" or wl.priority >= self.preemptor.priority or (
                threshold is not None and wl.priority > threshold):
            return RECLAIM_WITHOUT_BORROWING
        return RECLAIM_WHILE_BORROWING

    def from_queue(self, cq: Node, lca: Node | None, advantage: bool) -> list[_Candidate]:
        out = []
        for wl in self.snap.by_queue(cq.name):
            v = self.variant(wl, advantage)
            if v != NEVER:
                out.append(_Candidate(wl, lca, v))
        return out

    def in_subtree(self, cohort: Node, root: Node, skip: Node | None, advantage: bool, into: list[_Candidate]) -> None:
        for child in cohort.cohorts:
            if child is not skip and not child.within_nominal(self.need):
                self.in_subtree(child, root, skip, advantage, into)
        for cq in cohort.queues:
            if cq is not self.cq and not cq.within_nominal(self.need):
                into += self.from_queue(cq, root, advantage)

    def hierarchical(self) -> tuple[list[_Candidate], list[_Candidate]]:
        """(candidates the preemptor has a hierarchical advantage over, candidates its priority decides)."""
        hier: list[_Candidate] = []
        prio: list[_Candidate] = []
        if self.cq.parent is None or self.policy.reclaim_within_cohort == "Never":
            return hier, prio
        advantage, remaining = _fits_in(self.cq, self.usage)
        previous = None
        for node in self.cq.path_to_root():
            self.in_subtree(node, node, previous, advantage, hier if advantage else prio)
            fits, remaining = _fits_in(node, remaining)
            advantage = advantage or fits
            previous = node
        return hier, prio

    def ordered(self, items: list[_Candidate]) -> list[_Candidate]:
        def compare(a: _Candidate, b: _Candidate) -> int:
            x, y = a.workload, b.workload
            for first, second in ((x.evicted, y.evicted),  # evicted ones first, then other queues' first
                                  (x.cluster_queue != self.cq.name, y.cluster_queue != self.cq.name)):
                if first != second:
                    return -1 if first else 1
            if x.priority != y.priority:
                return -1 if x.priority < y.priority else 1
            if x.reserved_at != y.reserved_at:  # the newer reservation first
                return -1 if x.reserved_at > y.reserved_at else 1
            return (x.uid > y.uid) - (x.uid < y.uid)
        return sorted(items, key=cmp_to_key(compare))

    def valid(self, c: _Candidate, borrowing: bool) -> bool:
        """Kueue's `candidateIsValid`, against the snapshot as removals have left it."""
        if c.workload.cluster_queue == self.cq.name:
            return True
        if borrowing and c.variant == RECLAIM_WITHOUT_BORROWING:
            return False
        node = self.snap.tree.queues.get(c.workload.cluster_queue)
        if node is None or node.within_nominal(self.need):
            return False
        for ancestor in node.path_to_root():
            if ancestor is c.lca:
                break
            if ancestor.within_nominal(self.need):
                return False
        return True

    def run(self) -> list[Target]:
        same = self.ordered(self.from_queue(self.cq, None, False)) if self.policy.within_cluster_queue != "Never" else []
        hier, prio = (self.ordered(x) for x in self.hierarchical())
        everything = [c for group in (hier, prio, same) for c in group if c.workload.evicted]
        everything += [c for group in (hier, prio, same) for c in group if not c.workload.evicted]
        forbidden = self.policy.borrow_within_cohort == "Never"
        under_nominal = all(self.cq.quotas[fr].nominal > self.cq.usage.get(fr, 0) if fr in self.cq.quotas
                            else 0 > self.cq.usage.get(fr, 0) for fr in self.need)
        if not hier and not prio or (forbidden and not under_nominal):
            attempts = [True]
        elif forbidden and not hier:
            attempts = [False, True]
        else:
            attempts = [True, False]
        for borrowing in attempts:
            targets: list[_Candidate] = []
            for c in everything:
                if not self.valid(c, borrowing):
                    continue
                self.snap.remove(c.workload)
                targets.append(c)
                if self.fits(borrowing):
                    targets = self.fill_back(targets, borrowing)
                    for t in targets:
                        self.snap.add(t.workload)
                    return [Target(t.workload, REASONS[t.variant]) for t in targets]
            for t in targets:
                self.snap.add(t.workload)
        return []

    def fill_back(self, targets: list[_Candidate], borrowing: bool) -> list[_Candidate]:
        for i in range(len(targets) - 2, -1, -1):
            self.snap.add(targets[i].workload)
            if self.fits(borrowing):
                targets[i] = targets[-1]
                targets.pop()
            else:
                self.snap.remove(targets[i].workload)
        return targets


def _fits_in(node: Node, requests: Mapping[FlavorResource, int]) -> tuple[bool, dict[FlavorResource, int]]:
    """Kueue's `QuantitiesFitInQuota`: whether the requests fit the node's subtree, and what its local quota
    leaves for the parent."""
    fits = True
    remaining = {}
    for fr, value in requests.items():
        if node.subtree.get(fr, 0) < node.usage.get(fr, 0) + value:
            fits = False
        remaining[fr] = max(0, value - node.local_available(fr))
    return fits, remaining


def find_targets(snap: Snapshot, queue: str, preemptor: Preemptor, policy: Preemption, need: Iterable[FlavorResource],
                 usage: Mapping[FlavorResource, int], tas_fits: Callable[[set[str]], bool] = lambda _: True
                 ) -> list[Target]:
    """Kueue's `GetTargets` (classical): the workloads to preempt so this one fits, or [] when none would do."""
    return _Search(snap, queue, preemptor, policy, set(need), usage, tas_fits).run()


def simulate(snap: Snapshot, queue: str, preemptor: Preemptor, policy: Preemption, fr: FlavorResource,
             value: int) -> tuple[str, int]:
    """Kueue's `PreemptionOracle.SimulatePreemption` for one flavor and resource: whether preemption could make
    room (NoCandidates, Preempt within the queue, Reclaim from the cohort) and the borrowing height after it."""
    cq = snap.tree.queues[queue]
    targets = find_targets(snap, queue, preemptor, policy, {fr}, {fr: value})
    if not targets:
        return NO_CANDIDATES, lowest_fitting_height(cq, fr, value)[0]
    for t in targets:
        snap.remove(t.workload)
    borrow = lowest_fitting_height(cq, fr, value)[0]
    for t in targets:
        snap.add(t.workload)
    return (PREEMPT if any(t.workload.cluster_queue == queue for t in targets) else RECLAIM), borrow
