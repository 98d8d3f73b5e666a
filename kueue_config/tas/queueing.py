"""What Kueue checks before it looks at flavors: the job's LocalQueue, its ClusterQueue, and the namespace.

In Kueue's order and words (the workload controller's `getQueueBlocker`, the scheduler's `nominate`,
`workload.ValidateAdmissibility`): the LocalQueue must exist in the job's namespace and not be stopped
(`LocalQueue gpu doesn't exist`, `... is inactive`); its ClusterQueue must exist and be active - not
stopped, every flavor present, every TAS flavor's Topology present (`ClusterQueue cq is inactive`); and the
ClusterQueue's namespaceSelector must select the namespace (`workload namespace doesn't match ClusterQueue
selector`; a missing selector selects nothing, `{}` everything). Then the queue's policies: preemption and
flavor fungibility, with the defaults the API server fills in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from labeler.errors import InputError, TopologyError
from labeler.io.documents import mapping

from .setup import Queue, TASSetup


@dataclass(frozen=True)
class Preemption:
    """`spec.preemption` with the API server's defaults."""

    within_cluster_queue: str = "Never"
    reclaim_within_cohort: str = "Never"
    borrow_within_cohort: str = "Never"
    max_priority_threshold: int | None = None


@dataclass(frozen=True)
class Fungibility:
    """`spec.flavorFungibility` with the API server's defaults."""

    when_can_borrow: str = "MayStopSearch"
    when_can_preempt: str = "TryNextFlavor"
    preference: str | None = None


@dataclass(frozen=True)
class Blocker:
    """Why Kueue will not look at the job's flavors at all, in its words, and what part is at fault."""

    message: str
    part: str  # "LocalQueue", "ClusterQueue", "namespace"
    name: str


@dataclass(frozen=True)
class Policies:
    """What the ClusterQueue says about preemption and flavors."""

    preemption: Preemption = field(default_factory=Preemption)
    fungibility: Fungibility = field(default_factory=Fungibility)
    cohort: str | None = None
    strict_fifo: bool = False
    admission_checks: bool = False


def policies(cq: Mapping[str, Any]) -> Policies:
    spec = cq.get("spec") or {}
    try:
        pre = mapping(spec.get("preemption"), "spec.preemption")
        borrow = mapping(pre.get("borrowWithinCohort"), "spec.preemption.borrowWithinCohort")
        fung = mapping(spec.get("flavorFungibility"), "spec.flavorFungibility")
    except InputError as exc:
        raise TopologyError(f"ClusterQueue {cq.get('metadata', {}).get('name')}: {exc}") from None
    threshold = borrow.get("maxPriorityThreshold")
    return Policies(
        Preemption(str(pre.get("withinClusterQueue") or "Never"), str(pre.get("reclaimWithinCohort") or "Never"),
                   str(borrow.get("policy") or "Never"), threshold if isinstance(threshold, int) else None),
        Fungibility(str(fung.get("whenCanBorrow") or "MayStopSearch"), str(fung.get("whenCanPreempt") or "TryNextFlavor"),
                    fung.get("preference")),
        spec.get("cohortName") or None, spec.get("queueingStrategy") == "StrictFIFO",
        bool(spec.get("admissionChecks") or spec.get("admissionChecksStrategy")))


def _stopped(obj: Mapping[str, Any]) -> bool:
    return str((obj.get("spec") or {}).get("stopPolicy") or "None") != "None"


def inactive_reason(setup: TASSetup, name: str) -> str | None:
    """Why the ClusterQueue admits nothing (Kueue's Active condition, False), or None when it is active.

    From the cluster, the condition Kueue wrote decides; from files, the causes Kueue checks: stopped,
    a missing ResourceFlavor, a TAS flavor whose Topology is missing."""
    cq = setup.cluster_queue_objects[name]
    for cond in (cq.get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == "Active":
            return None if cond.get("status") == "True" else str(cond.get("message") or cond.get("reason") or "")
    reasons = []
    if _stopped(cq):
        reasons.append("is stopped")
    missing = [f for f, _ in setup.cluster_queues.get(name, []) if f not in setup.flavors]
    if missing:
        reasons.append(f"references missing ResourceFlavor(s): {','.join(missing)}")
    for f, _ in setup.cluster_queues.get(name, []):
        flavor = setup.flavors.get(f)
        if flavor is not None and flavor.topology is not None and flavor.levels is None:
            reasons.append(f'there is no Topology "{flavor.topology}" for TAS flavor "{f}"')
    return f"Can't admit new workloads: {', '.join(reasons)}." if reasons else None


def _expression(labels: Mapping[str, str], expr: Mapping[str, Any]) -> bool:
    key, op, values = str(expr.get("key")), expr.get("operator"), [str(v) for v in expr.get("values") or []]
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    raise TopologyError(f"namespaceSelector: operator {op!r} is not one Kubernetes accepts")


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A LabelSelector (`metav1.LabelSelectorAsSelector`): None selects nothing, {} everything."""
    if selector is None:
        return False
    return (all(labels.get(k) == str(v) for k, v in (selector.get("matchLabels") or {}).items())
            and all(_expression(labels, e) for e in selector.get("matchExpressions") or []))


@dataclass
class Resolved:
    """The job's queue after Kueue's checks: the flavors to try, or what stops it before them."""

    queue: Queue
    policies: Policies = field(default_factory=Policies)
    blocker: Blocker | None = None
    notes: list[str] = field(default_factory=list)
    unmodelled: list[str] = field(default_factory=list)  # what could still stop a job that fits


def resolve(setup: TASSetup, queue: str | None, namespace: str,
            namespaces: Mapping[str, Mapping[str, str]] | None) -> Resolved:
    """The LocalQueue -> ClusterQueue chain with Kueue's checks in its order.

    `namespaces` maps namespace names to their labels, None when not known (files): a namespaceSelector
    other than `{}` then cannot be judged, which a note says. A job without a queue label is not Kueue's
    at all; every flavor is tried so a person can see where it would go, and a note says so."""
    if not queue:
        return Resolved(setup.queue(None, namespace), notes=[
            "the job has no kueue.x-k8s.io/queue-name label: Kueue leaves it alone (unless a LocalQueue named "
            "'default' exists in its namespace); every flavor was tried, without quota"])
    lq = setup.local_queue_objects.get((namespace, queue))
    blank = Queue(None, ())
    if lq is None:
        return Resolved(blank, blocker=Blocker(f"LocalQueue {queue} doesn't exist", "LocalQueue", queue))
    if _stopped(lq):
        return Resolved(blank, blocker=Blocker(f"LocalQueue {queue} is inactive", "LocalQueue", queue))
    cq_name = setup.local_queues[(namespace, queue)]
    cq = setup.cluster_queue_objects.get(cq_name)
    if cq is None:
        return Resolved(blank, blocker=Blocker(f"ClusterQueue {cq_name} doesn't exist", "ClusterQueue", cq_name))
    resolved = Resolved(setup.queue(queue, namespace), policies(cq))
    why = inactive_reason(setup, cq_name)
    if why is not None:
        resolved.blocker = Blocker(f"ClusterQueue {cq_name} is inactive", "ClusterQueue", cq_name)
        resolved.notes.append(f"ClusterQueue {cq_name}: {why}")
        return resolved
    selector = (cq.get("spec") or {}).get("namespaceSelector")
    if namespaces is None:
        if selector != {}:
            resolved.unmodelled.append(f"ClusterQueue {cq_name} selects namespaces by label, and without a cluster "
                                       f"the labels of namespace {namespace} are unknown")
    elif namespace not in namespaces:
        resolved.blocker = Blocker(f'workload namespace "{namespace}" does not exist: namespaces "{namespace}" '
                                   "not found", "namespace", namespace)
    elif not selects(selector, namespaces[namespace]):
        resolved.blocker = Blocker("workload namespace doesn't match ClusterQueue selector", "namespace", namespace)
    if resolved.policies.admission_checks:
        resolved.unmodelled.append(f"ClusterQueue {cq_name} has admission checks, which Kueue must see pass "
                                   "before it admits; fit does not model them")
    return resolved


def queue_warning(setup: TASSetup, queue: str, namespace: str | None) -> str | None:
    """Why a job on `queue` in `namespace` would never be admitted, when its queue does not resolve there."""
    ns = namespace or "default"
    resolved = resolve(setup, queue, ns, None)
    if resolved.blocker is None or resolved.blocker.part == "namespace":
        return None
    elsewhere = sorted(n for n, q in setup.local_queues if q == queue and n != ns)
    here = sorted(q for n, q in setup.local_queues if n == ns)
    text = f"Kueue would keep it pending: {resolved.blocker.message}"
    if resolved.blocker.part == "LocalQueue" and "doesn't exist" in resolved.blocker.message:
        text += f" in namespace {ns}" + ("" if namespace else " (the job names no namespace; kubectl uses your "
                                         "context's, assumed default)")
        if here:
            text += f"; LocalQueues there: {', '.join(here)}"
        if elsewhere:
            text += f"; LocalQueue {queue} exists in namespace(s) {', '.join(elsewhere)}"
    return text
