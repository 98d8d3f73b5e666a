"""Kueue's own answer for a TAS scenario, from hack/tas-oracle (Kueue v0.19.2's scheduler code run in-process).

`kueue_decides` sends the scenario - nodes and pods as the API serves them, the Kueue objects, and the
Workloads a job makes (their PodSets' names, counts and pod templates) - to the oracle binary that
.ci/setup.d/40-tas-oracle.sh builds, and returns what Kueue decided per Workload: admitted or not, the
pods per domain of each PodSet's topology assignment, and the QuotaReserved messages of the cycles that
failed. `predicted` turns `topolabel fit`'s report into the same shape, so a test compares them whole.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
from pathlib import Path
from typing import Any, Sequence

from kueue_config.tas.fit import FitReport
from kueue_config.tas.workloads import GROUP_NAME, Workload
from tests.conftest import skip_or_fail

CACHE = Path(os.environ.get("TOPOLABEL_CACHE") or Path.home() / ".cache" / "topolabel")


def oracle() -> Path:
    """The oracle binary, or a skip naming the step that builds it."""
    found = sorted(glob.glob(str(CACHE / "tas-oracle-*" / "tas-oracle")))
    if not found:
        skip_or_fail("hack/tas-oracle is not built; run .ci/setup.d/40-tas-oracle.sh (or bash .ci/run)")
    return Path(found[-1])


def _by_kind(objects: Sequence[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o.get("kind") == kind]


def kueue_decides(nodes: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]], kueue: Sequence[dict[str, Any]],
                  workload: Workload, cluster_queue: str | None = None) -> list[dict[str, Any]]:
    """Per Workload of the object, in order (stopping after the first not admitted): Kueue's decision."""
    cqs = _by_kind(kueue, "ClusterQueue")
    cq = next((c for c in cqs if c["metadata"]["name"] == cluster_queue), cqs[0])
    podsets = [{"name": ps.name, "count": ps.count, "template": ps.template or {"spec": dict(ps.spec)}}
               for ps in workload.podsets]
    scenario = {"topologies": _by_kind(kueue, "Topology"), "flavors": _by_kind(kueue, "ResourceFlavor"),
                "clusterQueue": cq, "nodes": list(nodes), "pods": list(pods),
                "workloads": [{"name": f"{workload.name}-{i}", "podSets": podsets} for i in range(workload.workloads)]}
    done = subprocess.run([str(oracle())], input=json.dumps(scenario), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["workloads"]


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
