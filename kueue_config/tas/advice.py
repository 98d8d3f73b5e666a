"""What a person needs after Kueue's "no": why, in plain words, and the smallest changes that would fit.

`explain` says what stops the job at the stage Kueue stopped it: the queue (which LocalQueues exist, and
where), the quota (nominal, in use, what the cohort lends), or the topology (the roomiest domain at the
level asked for, and what it holds). `advise` proposes changes - fewer pods, a coarser level, `preferred`
instead of required, another LocalQueue of the namespace, waiting for named workloads, and when none of
these alone does, fewer pods once named workloads finish - and keeps only those that, applied to the job and
judged again the way Kueue would (quota, TAS, preemption), make it fit. Nothing is guessed: every piece of
advice was run. A queue with no quota for the job, or stopped, has no advice: only an administrator can change
that, and `explain` says so.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable

from labeler.errors import TopologyError

from .admitted import Admitted
from .capacity import pod_requests
from .fit import FITS, PREEMPTS, FitReport
from .flavors import format_amount
from .gates import Gates
from .judge import Inputs, judge
from .slots import room_for
from .workloads import (PREFERRED, QUEUE_LABEL, REQUIRED, SLICE_CONSTRAINTS, SLICE_SIZE, Workload,
                        from_kueue_workload, lookup, queue_name, with_count, workload_of)

MAX_WAIT = 8  # workloads one piece of advice may ask to wait for


@dataclass
class Advice:
    """One change that was checked: applied to the job, Kueue would admit it (`outcome` fits)."""

    kind: str  # fewer-pods, coarser-level, preferred, other-queue, other-namespace, wait-for, fewer-pods-after-waiting
    text: str
    manifest: Any | None = None  # the job with the change (None: the job stays as it is)
    without: tuple[str, ...] = ()  # workloads to wait for
    outcome: str = FITS

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "text": self.text, "verified": self.outcome}
        if self.without:
            out["waitFor"] = list(self.without)
        return out


def _short(value: str, width: int = 16) -> str:
    return value if len(value) <= width else value[:width - 1] + "…"


def _main_resource(workload: Workload, podset: str) -> tuple[str, int]:
    """The resource a person thinks of for this PodSet (an accelerator, else cpu) and one pod's amount."""
    ps = next(p for p in workload.podsets if p.name == podset)
    requests = pod_requests(ps.spec)
    for res in sorted(requests):
        if "/" in res and requests[res] > 0:
            return res, requests[res]
    return "cpu", requests.get("cpu", 0)


# -- why ---------------------------------------------------------------------------------------------

def explain(workload: Workload, report: FitReport, inputs: Inputs, gates: Gates = Gates()) -> list[str]:
    """Plain words for the stage that stopped the job."""
    if report.outcome == FITS:
        return []
    if report.stage == "queue":
        return _queue_words(workload, report, inputs)
    lines = []
    if report.outcome == PREEMPTS:
        names = ", ".join(f"{t.workload.ref} (priority {t.workload.priority}, ClusterQueue "
                          f"{t.workload.cluster_queue})" for t in report.preempting)
        lines.append(f"it fits only by preempting {len(report.preempting)} workload(s): {names}")
    if report.stage == "quota" or "insufficient" in report.kueue_message:
        lines += _quota_words(workload, report, inputs)
    if report.stage == "topology":
        lines += _topology_words(workload, report, inputs, gates)
    return lines


def _queue_words(workload: Workload, report: FitReport, inputs: Inputs) -> list[str]:
    namespace, queue = workload.namespace or "default", queue_name(workload)
    here = sorted(lq for ns, lq in inputs.setup.local_queues if ns == namespace)
    where = sorted(ns for ns, lq in inputs.setup.local_queues if lq == queue)
    if "LocalQueue" in report.kueue_message and "doesn't exist" in report.kueue_message:
        text = f"namespace {namespace} has no LocalQueue {queue}"
        text += f"; it has {', '.join(here)}" if here else "; it has no LocalQueue at all"
        if where:
            text += f"; LocalQueue {queue} exists in namespace(s) {', '.join(where)}"
        return [text]
    if "ClusterQueue" in report.kueue_message:
        return [f"{report.kueue_message}: nothing is admitted through it until an administrator changes that"] + [
            p for p in report.problems if p.startswith("ClusterQueue")]
    if "namespace" in report.kueue_message:
        cq = inputs.setup.cluster_queue_objects.get(report.cluster_queue or "", {})
        selector = (cq.get("spec") or {}).get("namespaceSelector")
        return [f"ClusterQueue {report.cluster_queue} admits only namespaces matching {selector}; namespace "
                f"{namespace} has labels {dict((inputs.namespaces or {}).get(namespace, {}))}"]
    return []


def _quota_words(workload: Workload, report: FitReport, inputs: Inputs) -> list[str]:
    cq = report.cluster_queue
    if not cq or cq not in inputs.setup.cluster_queue_objects:
        return []
    admitted = inputs.admitted()
    tree = inputs.quota_tree(admitted)
    node = tree.queues[cq]
    lines = []
    for (flavor, res), quota in sorted(node.quotas.items()):
        if f"for {res} in flavor {flavor}" not in report.kueue_message:
            continue
        holders = [a for a in admitted if a.cluster_queue == cq and (flavor, res) in a.quota]
        fr = (flavor, res)
        text = (f"ClusterQueue {cq} has {format_amount(res, quota.nominal)} {res} of flavor {flavor}; "
                f"{format_amount(res, node.usage.get(fr, 0))} in use by {len(holders)} workload(s)")
        if node.parent is not None:
            text += (f"; with what cohort {node.root().name} lends, it can use at most "
                     f"{format_amount(res, node.potential(fr))}, {format_amount(res, node.available(fr))} now")
            if quota.borrowing_limit is not None:
                text += f" (borrowingLimit {format_amount(res, quota.borrowing_limit)})"
        asked = sum(pod_requests(ps.spec).get(res, 0) * ps.count for ps in workload.podsets)
        lines.append(f"{text}; the job asks for {format_amount(res, asked)}")
    return lines


def _topology_words(workload: Workload, report: FitReport, inputs: Inputs, gates: Gates) -> list[str]:
    failed = report.deciding
    if failed is None or failed.fits or not report.flavor or failed.level is None:
        return []
    flavor = inputs.setup.flavors.get(report.flavor)
    if flavor is None or not flavor.tas:
        return []
    res, each = _main_resource(workload, failed.podset)
    level = next((lv for lv in room_for(workload, failed.podset, flavor, inputs, gates)
                  if lv.level == failed.level), None)
    if level is None:
        return []
    name = failed.level.rsplit("/", 1)[-1]
    return [f"the roomiest {name} of flavor {flavor.name} ({_short(level.largest_domain, 24)}) holds "
            f"{level.largest} pod(s) of {format_amount(res, each)} {res} each; the job needs {failed.pods} "
            f"in one {name}"]


# -- what would fit ----------------------------------------------------------------------------------

@dataclass
class _Trial:
    """Judging changed copies of the job, with the same inputs and gates."""

    workload: Workload
    inputs: Inputs
    gates: Gates
    tried: int = 0
    limit: int = 40

    def fits(self, manifest: Any, inputs: Inputs | None = None) -> bool:
        if self.tried >= self.limit:
            return False
        self.tried += 1
        changed = (from_kueue_workload(manifest, "advice") if manifest.get("kind") == "Workload"
                   else workload_of(manifest, "advice"))
        if changed is None:
            return False
        try:
            return judge(changed, inputs or self.inputs, self.gates).outcome == FITS
        except TopologyError:  # a change Kueue would refuse, or one fit cannot judge, is no advice
            return False


def _annotations(obj: Any, podset_path: tuple[Any, ...]) -> dict[str, Any]:
    template = lookup(obj, podset_path)
    meta = template.setdefault("metadata", {})
    ann = meta.get("annotations")
    if ann is None:
        ann = meta["annotations"] = {}
    return ann


def _with_annotation(workload: Workload, change: Callable[[dict[str, Any]], None]) -> Any:
    """A copy of the job with `change` applied to every pod template's annotations."""
    obj = copy.deepcopy(workload.obj)
    for ps in workload.podsets:
        if ps.template is not None:
            change(_annotations(obj, ps.path))
    return obj


def _requiring(level: str) -> Callable[[dict[str, Any]], None]:
    """A change to a pod template's annotations: a required level, if it has one, becomes `level`."""
    def change(annotations: dict[str, Any]) -> None:
        if REQUIRED in annotations:
            annotations[REQUIRED] = level
    return change


def advise(workload: Workload, report: FitReport, inputs: Inputs, gates: Gates = Gates()) -> list[Advice]:
    """Changes that make the job fit, each judged again; the first kind that works, smallest first."""
    if report.outcome == FITS:
        return []
    trial = _Trial(workload, inputs, gates)
    out: list[Advice] = []
    if report.stage == "queue":
        return _other_queue(workload, trial) or _other_namespace(workload, trial)
    failed = max((p for p in report.podsets if not p.fits), key=lambda p: p.pods, default=None)
    if failed is not None and report.stage != "flavors":
        out += _fewer_pods(workload, failed.podset, failed.pods, failed.max_pods_in_one_domain, trial)
        out += _looser(workload, report, trial)
    out += _wait_for(workload, report, trial)
    out += _other_queue(workload, trial)
    if not out and failed is not None and report.stage != "flavors":
        out += _fewer_pods_after_waiting(workload, report, failed.podset, failed.pods, trial)
    return out


def _fewer_pods(workload: Workload, podset: str, count: int, hint: int, trial: _Trial) -> list[Advice]:
    """The most pods (below `count`, in whole slices) that fit: a search down from Kueue's best domain."""
    ps = next(p for p in workload.podsets if p.name == podset)
    step = 1
    for key in (SLICE_SIZE,):
        if str(ps.annotations.get(key, "")).isdigit():
            step = int(ps.annotations[key])
    if SLICE_CONSTRAINTS in ps.annotations:
        return []

    def fits(n: int) -> bool:
        changed = with_count(workload, podset, n)
        return changed is not None and trial.fits(changed)
    low, high = 0, (count - 1) // step  # in slices
    best = 0
    start = min(high, max(hint // step, 1))
    if start and fits(start * step):
        best, low = start, start
    else:
        high = start - 1
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid * step):
            best, low = mid, mid
        else:
            high = mid - 1
    if not best:
        return []
    n = best * step
    return [Advice("fewer-pods", f"at most {n} pod(s) in PodSet {podset} (it asks for {count})",
                   with_count(workload, podset, n))]


def _looser(workload: Workload, report: FitReport, trial: _Trial) -> list[Advice]:
    """`preferred` at the same level, or required at a coarser one."""
    failed = report.deciding
    if failed is None or failed.mode != "required" or not report.levels or failed.level not in report.levels:
        return []
    level = failed.level
    out = []
    preferred = _with_annotation(workload, lambda a: a.update({PREFERRED: a.pop(REQUIRED)}) if REQUIRED in a else None)
    if trial.fits(preferred):
        out.append(Advice("preferred", f"prefer {level.rsplit('/', 1)[-1]} instead of requiring it "
                                       f"(`--within {level} --preferred`): Kueue then spreads the pods over more "
                                       "domains when one does not hold them", preferred))
    for coarser in reversed(report.levels[:report.levels.index(level)]):
        changed = _with_annotation(workload, _requiring(coarser))
        if trial.fits(changed):
            out.append(Advice("coarser-level", f"require one {coarser.rsplit('/', 1)[-1]} instead of one "
                                               f"{level.rsplit('/', 1)[-1]} (`--within {coarser}`)", changed))
            break
    return out


def _other_queue(workload: Workload, trial: _Trial) -> list[Advice]:
    namespace, current = workload.namespace or "default", queue_name(workload)
    out = []
    for ns, lq in sorted(trial.inputs.setup.local_queues):
        if ns != namespace or lq == current or workload.kind == "Workload":
            continue
        obj = copy.deepcopy(workload.obj)
        obj.setdefault("metadata", {}).setdefault("labels", {})[QUEUE_LABEL] = lq
        if trial.fits(obj):
            out.append(Advice("other-queue", f"submit it to LocalQueue {lq} (`--queue {lq}`)", obj))
            break
    return out


def _other_namespace(workload: Workload, trial: _Trial) -> list[Advice]:
    """The namespaces where the job's LocalQueue exists, if submitting it there would fit."""
    queue = queue_name(workload)
    for ns, lq in sorted(trial.inputs.setup.local_queues):
        if lq != queue or ns == (workload.namespace or "default") or workload.kind == "Workload":
            continue
        obj = copy.deepcopy(workload.obj)
        obj.setdefault("metadata", {})["namespace"] = ns
        if trial.fits(obj):
            return [Advice("other-namespace", f"submit it in namespace {ns}, where LocalQueue {queue} exists", obj)]
    return []


def _candidates(report: FitReport, trial: _Trial) -> list[Admitted]:
    """The admitted workloads whose finishing could free what the job needs: those holding quota or topology
    of a flavor of the job's ClusterQueue (every flavor when it has none), lowest priority and newest first,
    MAX_WAIT at most."""
    cq = trial.inputs.setup.cluster_queue_objects.get(report.cluster_queue or "") or {}
    mine = {str(f.get("name")) for rg in (cq.get("spec") or {}).get("resourceGroups") or []
            for f in rg.get("flavors") or []} or {f.name for f in trial.inputs.setup.flavors.values()}
    found = [a for a in trial.inputs.admitted() if any(fr[0] in mine for fr in a.quota) or set(a.tas) & mine]
    found.sort(key=lambda a: (a.priority, [-ord(c) for c in a.reserved_at], a.uid))
    return found[:MAX_WAIT]


def _fewest(candidates: list[Admitted], fits: Callable[[list[Admitted]], bool]) -> list[Admitted] | None:
    """The fewest candidates whose finishing makes `fits` true: one alone if one does, else candidates added in
    order until it does, then those not needed taken back out; None when all of them are not enough."""
    for one in candidates:
        if fits([one]):
            return [one]
    chosen: list[Admitted] = []
    for wl in candidates:
        chosen.append(wl)
        if fits(chosen):
            for i in range(len(chosen) - 2, -1, -1):
                if fits(chosen[:i] + chosen[i + 1:]):
                    chosen.pop(i)
            return chosen
    return None


def _wait_for(workload: Workload, report: FitReport, trial: _Trial) -> list[Advice]:
    """The fewest admitted workloads whose finishing would let the job in as it is."""
    chosen = _fewest(_candidates(report, trial),
                     lambda gone: trial.fits(workload.obj, trial.inputs.without([a.ref for a in gone])))
    return [_waiting(chosen)] if chosen else []


def _fewer_pods_after_waiting(workload: Workload, report: FitReport, podset: str, count: int,
                              trial: _Trial) -> list[Advice]:
    """When neither change alone fits: the most pods that fit once the candidates have finished, and the fewest
    of them that must finish for that many (a job asking beyond its queue's quota while others hold it)."""
    candidates = _candidates(report, trial)
    if not candidates:
        return []
    after = _Trial(workload, trial.inputs.without([a.ref for a in candidates]), trial.gates)
    fewer = _fewer_pods(workload, podset, count, 1, after)
    if not fewer:
        return []
    changed = fewer[0].manifest
    chosen = _fewest(candidates, lambda gone: trial.fits(changed, trial.inputs.without([a.ref for a in gone])))
    if not chosen:
        return []
    return [Advice("fewer-pods-after-waiting", f"{fewer[0].text}, once {_names(chosen)} finish", changed,
                   tuple(a.ref for a in chosen))]


def _names(chosen: list[Admitted]) -> str:
    return ", ".join(f"{a.ref} (ClusterQueue {a.cluster_queue}, priority {a.priority})" for a in chosen)


def _waiting(chosen: list[Admitted]) -> Advice:
    return Advice("wait-for", f"wait for {_names(chosen)} to finish", None, tuple(a.ref for a in chosen))
