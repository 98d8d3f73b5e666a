"""Everything admission reads, gathered once, and the what-ifs an operator asks before maintenance.

`Inputs` holds the Kueue set-up, the nodes, the pods bound to them, the Workloads holding quota and, from a
cluster, the namespaces' labels and PriorityClasses. `judge` answers for one job the way Kueue would:
queue checks, flavors with quota, TAS, preemption. `drained` marks nodes as cordoned (a node, or every
node of a domain); `without` takes Workloads away as if they had finished (their quota, their topology
assignments and their pods).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

from labeler.errors import TopologyError
from labeler.io.nodes import Node

from .admitted import Admitted, admitted_workloads
from .capacity import PodUsage, Resources, free_capacity
from .fit import Cluster, FitReport, admit
from .gates import Gates
from .preemption import Preemptor
from .queueing import Resolved, resolve
from .quota import QuotaTree, read_quotas
from .setup import Queue, TASSetup
from .workloads import PREFIX, Workload, queue_name

PRIORITY_CLASS_LABEL = PREFIX + "priority-class"


@dataclass
class Inputs:
    """What Kueue's scheduler would see. `workloads` None: the Workload objects are not known (files without
    --workloads), so TAS pods stand in for their Workloads and no quota is in use."""

    setup: TASSetup
    nodes: Sequence[Node]
    pods: Sequence[PodUsage] = ()
    workloads: Sequence[Mapping[str, Any]] | None = None
    namespaces: Mapping[str, Mapping[str, str]] | None = None
    priority_classes: Mapping[str, int] = field(default_factory=dict)
    default_priority: int = 0
    origin: str = "cluster"
    removed: frozenset[str] = frozenset()  # Workloads taken away (namespace/name)

    def admitted(self) -> list[Admitted]:
        found = admitted_workloads(self.workloads or (), self.origin)
        return [a for a in found if a.ref not in self.removed]

    def free(self) -> dict[str, Resources]:
        return free_capacity(self.nodes, self._pods(), self.workloads is not None)

    def _pods(self) -> list[PodUsage]:
        if not self.removed:
            return list(self.pods)
        gone = {str(ref.get("uid")) for w in self.workloads or () if _ref(w) in self.removed
                for ref in (w.get("metadata") or {}).get("ownerReferences") or [] if isinstance(ref, Mapping)}
        return [p for p in self.pods if p.owner is None or p.owner not in gone]

    def quota_tree(self, admitted: Iterable[Admitted]) -> QuotaTree:
        """ClusterQueues and Cohorts with the admitted workloads' quota charged."""
        queues = {name: ((obj.get("spec") or {}).get("cohortName") or None, read_quotas(obj.get("spec") or {},
                                                                                      f"ClusterQueue {name}"))
                  for name, obj in self.setup.cluster_queue_objects.items()}
        cohorts = {name: ((obj.get("spec") or {}).get("parentName") or None, read_quotas(obj.get("spec") or {},
                                                                                       f"Cohort {name}"))
                   for name, obj in self.setup.cohort_objects.items()}
        tree = QuotaTree(queues, cohorts)
        for wl in admitted:
            tree.charge(wl.cluster_queue, wl.quota)
        return tree

    # what-ifs ---------------------------------------------------------------------------------------
    def drained(self, targets: Sequence[str]) -> "Inputs":
        """As if every node named, or in a domain named (a label value, or `key=value`), were cordoned."""
        if not targets:
            return self
        hit: set[str] = set()
        keys = {k for levels in self.setup.topologies.values() for k in levels}
        for target in targets:
            key, sep, value = target.partition("=")
            found = {n.name for n in self.nodes if (n.labels.get(key) == value if sep else
                                                   n.name == target or any(n.labels.get(k) == target for k in keys))}
            if not found:
                raise TopologyError(f"--drain {target}: no node has that name, or that value of a Topology level "
                                    f"label ({', '.join(sorted(keys)) or 'no Topology known'})")
            hit |= found
        return replace(self, nodes=[replace(n, unschedulable=True) if n.name in hit else n for n in self.nodes])

    def without(self, refs: Sequence[str]) -> "Inputs":
        """As if these Workloads (namespace/name) had finished."""
        if not refs:
            return self
        known = {_ref(w) for w in self.workloads or ()}
        for ref in refs:
            if ref not in known:
                raise TopologyError(f"--without {ref}: no such Workload" + (
                    " (give namespace/name as `kubectl get workloads -A` lists it)" if "/" not in ref else ""))
        return replace(self, removed=self.removed | frozenset(refs))


def _ref(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def job_priority(workload: Workload, inputs: Inputs) -> int:
    """The priority Kueue gives the job's Workload: its WorkloadPriorityClass (label), else the pods'
    PriorityClass, else the cluster's default PriorityClass, else 0."""
    if workload.kind == "Workload":
        value = (workload.obj.get("spec") or {}).get("priority")
        return value if isinstance(value, int) else 0
    labels = ((workload.obj.get("metadata") or {}).get("labels") or {})
    name = labels.get(PRIORITY_CLASS_LABEL)
    if name:
        if name not in inputs.setup.workload_priority_classes:
            raise TopologyError(f"{workload.ref}: WorkloadPriorityClass {name!r} is not known; Kueue would refuse "
                                "the job")
        return inputs.setup.workload_priority_classes[name]
    for ps in workload.podsets:
        pc = ps.spec.get("priorityClassName")
        if pc:
            if pc not in inputs.priority_classes:
                raise TopologyError(f"{workload.ref}: PriorityClass {pc!r} is not known")
            return inputs.priority_classes[pc]
    return inputs.default_priority


def resolved_queue(workload: Workload, inputs: Inputs, flavor: str | None = None,
                   topology: str | None = None) -> Resolved:
    """The job's queue after Kueue's checks, narrowed by --flavor / --topology."""
    setup = inputs.setup
    resolved = resolve(setup, queue_name(workload), workload.namespace or "default", inputs.namespaces)
    if flavor and flavor not in setup.flavors:
        raise TopologyError(f"no ResourceFlavor {flavor!r}; known: {', '.join(sorted(setup.flavors)) or 'none'}")
    if topology and topology not in setup.topologies:
        raise TopologyError(f"no Topology {topology!r}; known: {', '.join(sorted(setup.topologies)) or 'none'}")
    narrowed = resolved.queue.only(flavor, topology)
    if flavor and not narrowed.flavors:
        narrowed = Queue(resolved.queue.cluster_queue, (setup.flavors[flavor],), resolved.queue.covered,
                         resolved.queue.local_queue)
    if flavor or topology:
        resolved.notes.append(f"only {'flavor ' + flavor if flavor else 'Topology ' + str(topology)} was tried "
                              "(--flavor/--topology): Kueue itself tries the queue's flavors in order")
    resolved.queue = narrowed
    return resolved


def judge(workload: Workload, inputs: Inputs, gates: Gates = Gates(), flavor: str | None = None,
          topology: str | None = None, resolved: Resolved | None = None) -> FitReport:
    """Kueue's whole answer for the job, now (or with the what-ifs `inputs` carries)."""
    resolved = resolved or resolved_queue(workload, inputs, flavor, topology)
    admitted = [a for a in inputs.admitted() if not (workload.kind == "Workload" and
                                                     a.ref == f"{workload.namespace}/{workload.name}")]
    tree = inputs.quota_tree(admitted) if inputs.workloads is not None and resolved.queue.cluster_queue else None
    if inputs.workloads is None and resolved.queue.cluster_queue:
        resolved.notes.append("the Workloads holding quota are not known (no --workloads): quota is taken to be "
                              "unused")
        tree = inputs.quota_tree([])
    ahead = _pending_in(inputs, resolved.queue.cluster_queue, workload)
    if ahead:
        resolved.notes.append(f"{ahead} other Workload(s) are pending in ClusterQueue {resolved.queue.cluster_queue}; "
                              "Kueue takes them in its queue order (priority, then age), which fit does not model: "
                              "an older one may be admitted first")
    created = str((workload.obj.get("metadata") or {}).get("creationTimestamp") or "")
    cluster = Cluster(inputs.nodes, inputs.free(), admitted, inputs.namespaces,
                      {n: f for n, f in inputs.setup.flavors.items() if f.tas})
    return admit(workload, cluster, resolved, gates, tree, Preemptor(job_priority(workload, inputs), created))


def _pending_in(inputs: Inputs, cluster_queue: str | None, workload: Workload) -> int:
    """Workloads waiting in the same ClusterQueue (not admitted, not finished, not the one judged)."""
    if not cluster_queue or not inputs.workloads:
        return 0
    me = f"{workload.namespace}/{workload.name}" if workload.kind == "Workload" else None
    count = 0
    for w in inputs.workloads:
        meta, status = w.get("metadata") or {}, w.get("status") or {}
        queue = inputs.setup.local_queues.get((str(meta.get("namespace")), str((w.get("spec") or {}).get("queueName"))))
        done = {c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"}
        if queue == cluster_queue and not done & {"QuotaReserved", "Finished"} and _ref(w) != me \
                and _ref(w) not in inputs.removed:
            count += 1
    return count
