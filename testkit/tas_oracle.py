"""Kueue's own answer for a TAS scenario, from hack/tas-oracle (Kueue v0.19.2's scheduler code run in-process).

`kueue_decides` sends the scenario - nodes and pods as the API serves them, the Kueue objects, and the
Workloads a job makes (their PodSets' names, counts and pod templates) - to the oracle binary that
.ci/setup.d/40-tas-oracle.sh builds, and returns what Kueue decided per Workload: admitted or not, the
pods per domain of each PodSet's topology assignment, and the QuotaReserved messages of the cycles that
failed. `predicted` turns `topolabel fit`'s report into the same shape, so a test compares them whole.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from kueue_config.tas.fit import FitReport
from kueue_config.tas.workloads import GROUP_NAME, QUEUE_LABEL, Workload
from testkit.environment import ROOT, skip_or_fail

CACHE = Path(os.environ.get("TOPOLABEL_CACHE") or Path.home() / ".cache" / "topolabel")


ORACLE_SOURCES = [ROOT / "hack" / "tas-oracle" / f for f in ("go.mod", "go.sum", "main.go")]


@lru_cache(maxsize=1)
def oracle() -> Path:
    """The oracle built from this checkout's hack/tas-oracle (its cache key, as hack/build-tas-oracle computes
    it: the module files, the source, the Go version, the flags), or $TOPOLABEL_TAS_ORACLE; else a skip (a
    failure in CI) naming the step that builds it. Another checkout's build, with another main.go, is never
    taken for it."""
    if os.environ.get("TOPOLABEL_TAS_ORACLE"):
        return Path(os.environ["TOPOLABEL_TAS_ORACLE"])
    try:
        version = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, timeout=60).stdout
    except OSError:
        version = ""
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in ORACLE_SOURCES) + version.encode() + b"-s -w\n")
    found = CACHE / f"tas-oracle-{digest.hexdigest()[:12]}" / "tas-oracle"
    if not found.exists():
        skip_or_fail(f"hack/tas-oracle is not built for this checkout ({found.parent.name}); run hack/build-tas-oracle "
                     "(.ci/setup.d/40-tas-oracle.sh)")
    return found


def _by_kind(objects: Sequence[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o.get("kind") == kind]


def run_oracle(scenario: dict[str, Any] | list[dict[str, Any]]) -> Any:
    """The oracle's answer for one scenario, or for a list of them in one run (Kueue's packages take half a
    second to start, a scenario a few milliseconds)."""
    done = subprocess.run([str(oracle())], input=json.dumps(scenario), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    for one in out if isinstance(out, list) else [out]:
        assert "error" not in one, one
    return out


def workloads_in_oracle(workload: Workload, priority: int | None = None) -> list[dict[str, Any]]:
    """The Workloads a job controller makes of the object, as the oracle takes them."""
    podsets = [{"name": ps.name, "count": ps.count, "template": ps.template or {"spec": dict(ps.spec)}}
               for ps in workload.podsets]
    meta = workload.obj.get("metadata") or {}
    queue = (meta.get("labels") or {}).get(QUEUE_LABEL)
    return [{"name": f"{workload.name}-{i}" if workload.workloads > 1 else workload.name,
             "namespace": workload.namespace or "default", "queueName": queue, "priority": priority,
             "podSets": podsets} for i in range(workload.workloads)]


def placement_payload(nodes: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]], kueue: Sequence[dict[str, Any]],
                      workload: Workload, cluster_queue: str | None = None) -> dict[str, Any]:
    """A placement scenario as the oracle takes it: one ClusterQueue, reached through LocalQueue "lq"."""
    cqs = _by_kind(kueue, "ClusterQueue")
    cq = next((c for c in cqs if c["metadata"]["name"] == cluster_queue), cqs[0])
    return {"topologies": _by_kind(kueue, "Topology"), "flavors": _by_kind(kueue, "ResourceFlavor"),
            "clusterQueue": cq, "nodes": list(nodes), "pods": list(pods),
            "workloads": [{**w, "queueName": "lq"} for w in workloads_in_oracle(workload)]}


def kueue_decides(nodes: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]], kueue: Sequence[dict[str, Any]],
                  workload: Workload, cluster_queue: str | None = None) -> list[dict[str, Any]]:
    """Per Workload of the object, in order (stopping after the first not admitted): Kueue's decision."""
    return run_oracle(placement_payload(nodes, pods, kueue, workload, cluster_queue))["workloads"]


def _grouped(message: str, workload: Workload) -> str:
    """The message with a grouped PodSet's name replaced by its group's: Kueue names either member at random
    (it picks the failure from a map), so only the group can be compared."""
    for ps in workload.podsets:
        group = ps.annotations.get(GROUP_NAME)
        if group and f"pod set {ps.name}:" in message:
            return message.replace(f"pod set {ps.name}:", f"pod set (group {group}):")
    return message


def decided(results: list[dict[str, Any]], workload: Workload) -> list[dict[str, Any]]:
    """Kueue's decisions cut to what a test compares: admitted, pods per domain per PodSet, the message of each
    scheduling cycle that failed, and the last one (a pending Workload keeps it once every flavor was tried,
    until something in the cluster makes Kueue try them all again)."""
    out = []
    for r in results:
        placed = {ps["name"]: {"/".join(d["values"]): d["count"] for d in ps["domains"]} for ps in r["podSets"] or []}
        cycles = [_grouped(m, workload) for m in r["messages"]]
        out.append({"admitted": r["admitted"], "placed": placed if r["admitted"] else {},
                    "message": cycles[-1] if cycles and not r["admitted"] else "", "cycles": cycles})
    return out


def predicted(report: FitReport, workload: Workload) -> list[dict[str, Any]]:
    """`fit`'s report in the shape of `decided`."""
    by_workload: dict[int, list[Any]] = {}
    for p in report.podsets:
        by_workload.setdefault(p.workload, []).append(p)
    out = []
    for index in sorted(by_workload):
        podsets = by_workload[index]
        admitted = all(p.fits for p in podsets)
        placed = {p.podset: {n.get("node") or n["domain"]: n["pods"] for n in p.nodes} for p in podsets}
        cycles = [_grouped(a.message, workload) for a in report.attempts if a.workload == index and not a.fits]
        out.append({"admitted": admitted, "placed": placed if admitted else {},
                    "message": "" if admitted else _grouped(report.kueue_message, workload), "cycles": cycles})
    return out


# -- whole admission (quota, cohorts, preemption): testkit/quota_scenarios.py -----------------------------

def job_priority_of(manifest: dict[str, Any], kueue: Sequence[dict[str, Any]]) -> int | None:
    """The priority a job controller puts on the job's Workload: its WorkloadPriorityClass's value."""
    name = ((manifest.get("metadata") or {}).get("labels") or {}).get("kueue.x-k8s.io/priority-class")
    if not name:
        return None
    return next(o["value"] for o in kueue if o.get("kind") == "WorkloadPriorityClass" and o["metadata"]["name"] == name)


def admission_payload(sc: Any) -> dict[str, Any]:
    """A QuotaScenario as the oracle takes it: Kueue's objects by kind, background jobs, then the job."""
    from kueue_config.tas.workloads import workload_of

    def workloads(manifest: dict[str, Any]) -> list[dict[str, Any]]:
        wl = workload_of(manifest, sc.name)
        assert wl is not None
        return workloads_in_oracle(wl, job_priority_of(manifest, sc.kueue))
    return {"topologies": _by_kind(sc.kueue, "Topology"), "flavors": _by_kind(sc.kueue, "ResourceFlavor"),
            "clusterQueues": _by_kind(sc.kueue, "ClusterQueue"), "cohorts": _by_kind(sc.kueue, "Cohort"),
            "localQueues": _by_kind(sc.kueue, "LocalQueue"), "namespaces": list(sc.namespaces),
            "nodes": list(sc.nodes), "pods": list(sc.pods),
            "background": [w for m in sc.background for w in workloads(m)], "workloads": workloads(sc.job)}


def oracle_verdict(result: dict[str, Any], workload: Workload) -> dict[str, Any]:
    """The oracle's answer on the job, cut to what a test compares."""
    last = result["workloads"][-1]
    placed = {ps["name"]: {"/".join(d["values"]): d["count"] for d in ps["domains"]} for ps in last["podSets"] or []}
    cycles = [_grouped(m, workload) for m in last["messages"]]
    outcome = {"admitted": "fits", "preempt": "preempts"}.get(last["outcome"], "pending")
    return {"outcome": outcome, "placed": placed if outcome != "pending" else {},
            "message": cycles[-1] if cycles and outcome != "fits" else "", "cycles": cycles,
            "targets": sorted(last["targets"])}


def report_verdict(report: FitReport, workload: Workload) -> dict[str, Any]:
    """`fit`'s report in the shape of `oracle_verdict`."""
    outcome = "pending" if report.outcome == "blocked" else report.outcome
    placed = {p.podset: {n.get("node") or n["domain"]: n["pods"] for n in p.nodes}
              for p in report.podsets if p.nodes or outcome != "pending"}
    cycles = [_grouped(a.message, workload) for a in report.attempts if not a.fits]
    if report.outcome == "blocked":
        cycles = [report.kueue_message]
    return {"outcome": outcome, "placed": placed if outcome != "pending" else {},
            "message": _grouped(report.kueue_message, workload) if outcome != "fits" else "", "cycles": cycles,
            "targets": sorted(t.workload.ref for t in report.preempting)}
