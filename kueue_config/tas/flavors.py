"""Kueue v0.19's flavor assigner: for each group of PodSets, a flavor per resource group, with quota.

Follows `pkg/scheduler/flavorassigner` (`assignFlavors`, `findFlavorForPodSets`, `fitsResourceQuota`,
`checkFlavorForPodSets`): resources are taken in Kueue's order (by an FNV-1a hash of their names); for the
resource group covering one, flavors are searched from where the Workload's last attempt stopped. A flavor
must pass the TAS, taint and node-affinity checks; then each resource's quota decides a mode - fit (perhaps
borrowing from the cohort), preempt (only by preempting, or with no one to preempt), or no fit - and the
ClusterQueue's flavorFungibility says whether to stop at it or try the next. Messages are Kueue's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from .annotations import TopologyRequest
from .capacity import Resources, affinity_matches, untolerated_taint
from .queueing import Fungibility
from .quota import FlavorResource, Node, ResourceQuota, lowest_fitting_height
from .setup import Flavor, Queue
from .workloads import PodSet

# Kueue's preemptionMode (internal to the flavor assigner), worst first
NO_FIT, NO_CANDIDATES, PREEMPT, RECLAIM, FIT = range(5)
# Kueue's FlavorAssignmentMode, worst first
MODE_NO_FIT, MODE_PREEMPT, MODE_FIT = 0, 1, 3
UNLIMITED_HEIGHT = 2**63 - 1


def kueue_order(names: Sequence[str]) -> list[str]:
    """Resource names in the order Kueue's vectorised requests keep them: by 64-bit FNV-1a hash, then name."""
    def fnv(name: str) -> int:
        h = 0xcbf29ce484222325
        for byte in name.encode():
            h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
        return h
    return sorted(names, key=lambda n: (fnv(n), n))


def format_amount(resource: str, value: int) -> str:
    """A quantity as Kueue's ResourceFormatter prints it (Go's canonical `resource.Quantity` form)."""
    if resource == "cpu":
        return _decimal(value, -3)
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        if abs(value) >= 1024:
            exp, rest = 0, value
            while rest % 1024 == 0 and exp < 6:
                rest //= 1024
                exp += 1
            if exp:
                return f"{rest}{('', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei')[exp]}"
    return _decimal(value, 0)


def _decimal(value: int, scale: int) -> str:
    """Go's DecimalSI canonical form of value x 10^scale: the largest exponent (a multiple of 3) that keeps
    the mantissa whole."""
    if value == 0:
        return "0"
    exp = scale
    while value % 10 == 0:
        value //= 10
        exp += 1
    while exp % 3:
        value *= 10
        exp -= 1
    suffixes = {-3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
    while exp > 18:
        value *= 1000
        exp -= 3
    return f"{value}{suffixes[exp]}"


@dataclass(frozen=True)
class Mode:
    """Kueue's granularMode: how a flavor can be had (preemption mode) and how far up it borrows."""

    preemption: int
    borrow: int

    @property
    def assignment(self) -> int:
        return {NO_FIT: MODE_NO_FIT, FIT: MODE_FIT}.get(self.preemption, MODE_PREEMPT)


WORST, BEST = Mode(NO_FIT, UNLIMITED_HEIGHT), Mode(FIT, 0)


def is_preferred(a: Mode, b: Mode, fung: Fungibility) -> bool:
    """Kueue's `isPreferred`: mode a beats b under the ClusterQueue's preference."""
    if a.preemption == NO_FIT:
        return False
    if b.preemption == NO_FIT:
        return True
    if (a.preemption == NO_CANDIDATES) != (b.preemption == NO_CANDIDATES):
        return a.preemption != NO_CANDIDATES
    if fung.preference == "PreemptionOverBorrowing":
        if a.borrow != b.borrow:
            return a.borrow < b.borrow
        return a.preemption > b.preemption
    if a.preemption != b.preemption:
        return a.preemption > b.preemption
    return a.borrow < b.borrow


def try_next(mode: Mode, fung: Fungibility) -> bool:
    """Kueue's `shouldTryNextFlavor`."""
    if mode.preemption in (NO_FIT, NO_CANDIDATES):
        return True
    if mode.preemption in (PREEMPT, RECLAIM) and fung.when_can_preempt == "TryNextFlavor":
        return True
    return mode.borrow != 0 and fung.when_can_borrow == "TryNextFlavor"


# -- the checks before quota (checkFlavorForPodSets) ----------------------------------------------------

@dataclass
class Member:
    """A PodSet of the workload with its topology request and whether it uses TAS in this ClusterQueue."""

    podset: PodSet
    topology: TopologyRequest
    implied: bool
    requests: Resources  # one pod's

    @property
    def tas(self) -> bool:
        return self.topology.explicit or self.implied


def _has_level(flavor: Flavor, t: TopologyRequest) -> bool:
    """Kueue's `HasLevel`: the main level, the slice level and every slice layer are in the flavor's Topology."""
    keys = flavor.levels or ()
    level = t.level_key(keys, False)
    slice_key = t.constraints[0].topology if t.constraints else keys[-1]
    return level in keys and slice_key in keys and all(c.topology in keys for c in t.constraints)


def _selector_matches(spec: Mapping[str, Any], flavor: Flavor) -> bool:
    """Kueue's `flavorSelector`: the pod's nodeSelector and required affinity, cut to the flavor's label keys."""
    keys = set(flavor.node_labels)
    if any(k in keys and flavor.node_labels[k] != str(v) for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution")) or {}
    terms = []
    for term in required.get("nodeSelectorTerms") or []:
        kept = [e for e in term.get("matchExpressions") or [] if e.get("key") in keys]
        if not kept:  # a term with none of the flavor's keys matches every flavor
            return True
        terms.append({"matchExpressions": kept})
    return not terms or affinity_matches(dict(flavor.node_labels), {"nodeSelectorTerms": terms})


def flavor_problem(flavor: Flavor, members: Sequence[Member], covered: frozenset[str] | None) -> str | None:
    """Why Kueue's `checkFlavorForPodSets` skips this flavor for the group, in its words; None when it may take it."""
    for m in members:
        if m.tas and not m.implied:
            if not flavor.tas:
                if flavor.topology:
                    return f'Flavor "{flavor.name}" information missing in TAS cache'
                if covered is None or set(m.requests) & covered:
                    return f'Flavor "{flavor.name}" does not support TopologyAwareScheduling'
            elif not _has_level(flavor, m.topology):
                return f'Flavor "{flavor.name}" does not contain the requested level'
        elif not m.tas and flavor.topology:
            return f'Flavor "{flavor.name}" supports only TopologyAwareScheduling'
        spec = m.podset.spec
        taint = untolerated_taint(flavor.node_taints, [*(spec.get("tolerations") or []), *flavor.tolerations])
        if taint is not None:
            return (f"untolerated taint {{{taint.get('key', '')} {taint.get('value', '')} {taint.get('effect', '')} "
                    f"<nil>}} in flavor {flavor.name}")
        if not _selector_matches(spec, flavor):
            return f"flavor {flavor.name} doesn't match node affinity"
    return None


# -- quota (fitsResourceQuota) ---------------------------------------------------------------------------

@dataclass
class QuotaCheck:
    """The ClusterQueue's place in the quota tree, and how to ask whether preemption could make room.

    `simulate(fr, value)` is the preemption oracle: (NoCandidates | Preempt | Reclaim, borrowing height)."""

    cq: Node
    simulate: Callable[[FlavorResource, int], tuple[str, int]]
    borrow_preemption: bool  # borrowWithinCohort allows preempting while borrowing

    def fits(self, fr: FlavorResource, assumed: int, request: int) -> tuple[int, int, list[str]]:
        """(preemption mode, borrowing height, reasons) for `request` more of `fr` after `assumed`."""
        resource, flavor = fr[1], fr[0]
        available, most = self.cq.available(fr), self.cq.potential(fr)
        value = assumed + request
        if value > most:
            return NO_FIT, 0, [
                f"insufficient quota for {resource} in flavor {flavor}, previously considered podsets requests "
                f"({format_amount(resource, assumed)}) + current podset request ({format_amount(resource, request)}) "
                f"> maximum capacity ({format_amount(resource, most)})"]
        borrow, may_reclaim = lowest_fitting_height(self.cq, fr, value)
        if value <= available:
            return FIT, borrow, []
        reasons = [f"insufficient unused quota for {resource} in flavor {flavor}, "
                   f"{format_amount(resource, value - available)} more needed"]
        nominal = self.cq.quotas.get(fr, ResourceQuota(0)).nominal
        if nominal >= value or may_reclaim or self.borrow_preemption:
            possibility, borrow = self.simulate(fr, value)
            return {"NoCandidates": NO_CANDIDATES, "Preempt": PREEMPT, "Reclaim": RECLAIM}[possibility], borrow, reasons
        return NO_FIT, borrow, reasons


# -- one group of PodSets -----------------------------------------------------------------------------

@dataclass
class Pick:
    """The flavor one resource got, its mode (MODE_*), and the index searched to (-1: start over next time)."""

    flavor: Flavor
    mode: int
    tried: int


@dataclass
class GroupResult:
    picks: dict[str, Pick] | None  # resource -> pick; None when some resource found no flavor
    reasons: list[str] = field(default_factory=list)


ResourceGroup = tuple[frozenset[str] | None, tuple[Flavor, ...]]


def resource_group(queue: Queue, resource: str) -> ResourceGroup | None:
    """The ClusterQueue's resource group covering `resource` (every flavor when the queue is not known)."""
    if not queue.covered:
        return (None, queue.flavors) if queue.flavors else None
    covered = {queue.covered.get(f.name, frozenset()) for f in queue.flavors}
    for cov in covered:
        if resource in cov:
            return cov, tuple(f for f in queue.flavors if queue.covered.get(f.name) == cov)
    return None


def assign_group(members: Sequence[Member], requests: Mapping[str, int], queue: Queue, starts: Mapping[str, int],
                 usage: Mapping[FlavorResource, int], quota: QuotaCheck | None, fung: Fungibility) -> GroupResult:
    """Kueue's per-group loop of `assignFlavors`: one `findFlavorForPodSets` per resource group touched."""
    picks: dict[str, Pick] = {}
    reasons: list[str] = []
    for resource in kueue_order(list(requests)):
        rg = resource_group(queue, resource)
        if rg is None and (requests[resource] == 0 or not queue.cluster_queue):
            continue
        if resource in picks:
            continue
        if rg is None:
            return GroupResult(None, [f"resource {resource} unavailable in ClusterQueue"])
        found, why = _find_flavor(members, requests, rg, starts.get(resource, 0), usage, quota, fung)
        if not found and requests:
            return GroupResult(None, why)
        picks.update(found)
        reasons += why
    return GroupResult(picks, reasons)


def _find_flavor(members: Sequence[Member], requests: Mapping[str, int], rg: ResourceGroup, start: int,
                 usage: Mapping[FlavorResource, int], quota: QuotaCheck | None,
                 fung: Fungibility) -> tuple[dict[str, Pick], list[str]]:
    covered, flavors = rg
    wanted = [r for r in kueue_order(list(requests)) if covered is None or r in covered]
    best: dict[str, Pick] = {}
    best_mode = WORST
    reasons: list[str] = []
    attempted = -1
    for idx in range(start, len(flavors)):
        attempted = idx
        flavor = flavors[idx]
        problem = flavor_problem(flavor, members, covered)
        if problem is not None:
            reasons.append(problem)
            continue
        chosen: dict[str, Pick] = {}
        rep = BEST
        for resource in wanted:
            if quota is None:
                pm, borrow, why = FIT, 0, list[str]()
            else:
                fr = (flavor.name, resource)
                pm, borrow, why = quota.fits(fr, usage.get(fr, 0), requests[resource])
            reasons += why
            mode = Mode(pm, borrow)
            if is_preferred(rep, mode, fung):
                rep = mode
            if rep.preemption == NO_FIT:
                continue
            chosen[resource] = Pick(flavor, mode.assignment, idx)
        if not try_next(rep, fung):
            best, best_mode = chosen, rep
            break
        if is_preferred(rep, best_mode, fung):
            best, best_mode = chosen, rep
    for pick in best.values():
        pick.tried = -1 if attempted == len(flavors) - 1 else attempted
    return best, ([] if best_mode.preemption == FIT else reasons)
