"""Benchmark: the operator and Kueue on 5,000 KWOK nodes (the bench generators' GKE shape: blocks of 8 subblocks
of 125 hosts, 8 GPUs each, H100 and B200 blocks alternating), then 200 TAS jobs of mixed sizes submitted at once.

One test cluster (hack/testcluster.py) with the Kueue manager and KWOK. First, on the idle cluster, PROBES
Nodes are created one after another and each timed from the create call until it reads Ready and untainted
(polled every 0.2 s), then deleted: "a new Node Ready s". The nodes are created without status:
KWOK registers them (Ready, capacity), the node lifecycle controller lifts the not-ready taint, KWOK renews their
Leases every quarter of --lease seconds. Then `topolabel run` starts as the shipped set-up runs it (user
topolabel-operator, the manifests' ClusterRole, labels source with the GKE preset, one ResourceFlavor per GPU
pool), under GNU time: timed from its start until its metrics count every node labelled, and until its Kueue
objects exist with the ClusterQueue active; "Kueue objects applied" are its server-side applies (audit log).
Peak RSS and CPU are the operator's whole run, jobs included.

Then J Jobs (default 200, a fixed mix drawn with seed 1: 1 to 64 pods of 8 or 4 GPUs, each requiring one
block or one subblock, plus a few no domain can hold) are created at once, each pod running for an hour on
KWOK. Timed: from the submission until each Job's Workload is admitted or pending with a reason (its
QuotaReserved=False message), polled every half second. Once every admitted Job's pods run, "pods outside
their domain" counts the admitted Jobs whose running pods span more than one domain of the level they
require, read from the nodes' labels (must be 0). "cluster CPU s" is what etcd, the API server,
controller-manager, scheduler, Kueue and KWOK spent over the whole run.

Run: python -m bench.kwok [--nodes 5000] [--jobs 200] [--lease 600]   (needs hack/build-test-stack first)
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes import client

from bench.measure import Timed, load, topolabel
from bench.operator import PORT, cluster_cpu, poll, sample
from bench.table import print_table
from hack import testcluster
from hack.synth import gke_cluster
from testkit.environment import ROOT
from testkit.kubecluster import KubeCluster, node_ready
from testkit.kueue_jobs import BLOCK, TRAIN, operator_args, operator_objects
from testkit.kueue_workloads import QUEUE_LABEL, admission, is_admitted, pending_message, workloads

HOSTS, SUBBLOCKS = 125, 8
LEVELS = {"block": BLOCK, "subblock": "topolabel.dev/subblock"}
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
RUN_FOR = "test-cluster.topolabel.dev/run-for"
KUEUE_PLURALS = ("topologies", "resourceflavors", "clusterqueues", "localqueues")
PROBES = 5  # Nodes created one by one, timed to Ready, before the others
RUNNING_POLL = 2.0  # seconds between lists of the Jobs' pods
SETTLE = 60.0  # seconds without a new decision, Kueue having no active pending Workload, before giving up


def job_mix(count: int, seed: int = 1) -> list[dict[str, Any]]:
    """`count` Jobs: mostly small and medium, requiring one block or one subblock; one in 40 asks for more
    nodes than a subblock (or a block) holds, so Kueue must leave it pending with a reason."""
    rng = random.Random(seed)
    jobs = []
    for i in range(count):
        level = rng.choice(["block", "subblock", "subblock"])
        pods, gpus = rng.choice([1, 2, 4, 8, 8, 16, 16, 32, 64]), rng.choice([8, 8, 8, 4])
        if i % 40 == 39:
            pods, gpus = (HOSTS + 5 if level == "subblock" else HOSTS * SUBBLOCKS + 5), 8
        jobs.append({"apiVersion": "batch/v1", "kind": "Job",
                     "metadata": {"name": f"mix-{i:03d}", "namespace": TRAIN, "labels": {QUEUE_LABEL: "gpu"}},
                     "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed",
                              "template": {"metadata": {"annotations": {REQUIRED: LEVELS[level], RUN_FOR: "1h"}},
                                           "spec": {"restartPolicy": "Never", "containers": [
                                               {"name": "train", "image": "registry.invalid/train:1",
                                                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}}})
    return jobs


def decided(workload: dict[str, Any]) -> str | None:
    """"admitted", or the reason Kueue gives for keeping it pending, or None while it has not decided."""
    if is_admitted(workload):
        return "admitted"
    return pending_message(workload)


def decisions(cluster: KubeCluster, count: int, submitted: float) -> dict[str, tuple[float, str]]:
    """job -> (seconds after submission, "admitted" or Kueue's reason), polled every half second until all
    `count` are decided, or until Kueue has nothing left to try (no active pending Workload) and nothing has
    changed for SETTLE seconds: a Workload Kueue nominated in a cycle and then lost to another admitted in the
    same cycle is set aside without a status update (v0.19.2, scheduler.requeueAndUpdate) and stays undecided."""
    seen: dict[str, tuple[float, str]] = {}
    changed, deadline = time.monotonic(), time.monotonic() + 1800
    while len(seen) < count:
        now = time.perf_counter() - submitted
        for w in workloads(cluster.api(), TRAIN):
            job = next((r["name"] for r in w["metadata"].get("ownerReferences") or [] if r["kind"] == "Job"), None)
            if job and job not in seen and (why := decided(w)):
                seen[job], changed = (now, why), time.monotonic()
        if time.monotonic() - changed > SETTLE and \
                cluster.kueue_metric("kueue_pending_workloads", cluster_queue="e2e", status="active") == 0:
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"bench.kwok: {count - len(seen)} Workloads undecided after 30 minutes")
        time.sleep(0.5)
    return seen


def pods_by_job(api: client.ApiClient) -> dict[str, list[dict[str, Any]]]:
    resp = client.CoreV1Api(api).list_namespaced_pod(TRAIN, _preload_content=False)
    out: dict[str, list[dict[str, Any]]] = {}
    for p in json.loads(resp.data)["items"]:
        out.setdefault(p["metadata"]["labels"].get("batch.kubernetes.io/job-name", ""), []).append(p)
    return out


def all_running(api: client.ApiClient, want: dict[str, int]) -> bool:
    """Whether every Job of `want` has its count of pods Running: one list of the namespace's pods (thousands:
    seconds of the API server's time on a loaded machine), then a pause, so polling does not flood it."""
    by_job = pods_by_job(api)
    if all(sum(p["status"].get("phase") == "Running" for p in by_job.get(name, [])) == n for name, n in want.items()):
        return True
    time.sleep(RUNNING_POLL)
    return False


def new_node_ready(cluster: KubeCluster, count: int = PROBES) -> list[float]:
    """Seconds from each of `count` Nodes' creation (one after another, on the idle cluster, as a kubelet
    registers one: labels, no status) until it is Ready and rid of the not-ready taint, as kube-scheduler and
    Kueue then see it; the Nodes are deleted after."""
    core = client.CoreV1Api(cluster.api())
    took = []
    for name in (f"probe-n{i}" for i in range(count)):
        started = time.perf_counter()
        core.create_node({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}},
                         _preload_content=False)
        poll(lambda: node_ready(json.loads(core.read_node(name, _preload_content=False).data)), 60, f"{name} Ready")
        took.append(time.perf_counter() - started)
        core.delete_node(name, _preload_content=False)
    return took


def labelling(cluster: KubeCluster, items: list[dict[str, Any]], log: Path, mark: int, started: float
              ) -> dict[str, object]:
    """Until the operator has labelled every node and its Kueue objects are in place (ClusterQueue active)."""
    poll(lambda: PORT.search(log.read_bytes()) is not None, 120, "the operator's metrics port")
    port = int(PORT.search(log.read_bytes()).group(1))
    poll(lambda: sample(port, 'topolabel_nodes{state="labelled"}') >= len(items), 1800, "every node labelled")
    labelled = time.perf_counter() - started
    poll(lambda: operator_objects(cluster.api()) is not None, 600, "the operator's Kueue objects, an active queue")
    applied = [e for e in cluster.requests(mark, user=testcluster.OPERATOR, verb="patch")
               if e.resource in KUEUE_PLURALS and e.code < 300]
    return {"operator: all labelled s": f"{labelled:.1f}",
            "Kueue objects ready s": f"{time.perf_counter() - started:.1f}", "Kueue objects applied": len(applied)}


def scheduling(cluster: KubeCluster, jobs: list[dict[str, Any]]) -> dict[str, object]:
    """The Jobs created at once; Kueue's decisions; once the admitted ones run, whose pods leave their domain."""
    api = cluster.api()
    batch = client.BatchV1Api(api)
    submitted = time.perf_counter()
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda j: batch.create_namespaced_job(TRAIN, j, _preload_content=False), jobs))
    seen = decisions(cluster, len(jobs), submitted)
    latencies = sorted(t for t, _ in seen.values())
    admitted = {w["metadata"]["ownerReferences"][0]["name"]: w for w in workloads(api, TRAIN) if is_admitted(w)}
    want = {name: sum(p.count for p in admission(w).values()) for name, w in admitted.items()}
    poll(lambda: all_running(api, want), 1800, "every admitted Job's pods Running")
    running_at = time.perf_counter() - submitted
    labels, by_job = cluster.node_labels(), pods_by_job(api)
    level = {j["metadata"]["name"]: j["spec"]["template"]["metadata"]["annotations"][REQUIRED] for j in jobs}
    domains = {name: {labels[p["spec"]["nodeName"]][level[name]] for p in by_job[name]} for name in admitted}
    outside = [name for name, found in domains.items() if len(found) != 1]
    reasons: dict[str, int] = {}
    for _, why in seen.values():
        if why != "admitted":
            reasons[why[:90]] = reasons.get(why[:90], 0) + 1
    print("pending reasons (first 90 characters):", json.dumps(reasons, indent=1))
    return {"jobs": len(jobs), "admitted": len(admitted), "pending with a reason": len(seen) - len(admitted),
            "pending, no reason": len(jobs) - len(seen), "last decided s": f"{latencies[-1]:.1f}",
            "median decided s": f"{statistics.median(latencies):.1f}", "admitted pods Running s": f"{running_at:.0f}",
            "pods Running": sum(want.values()), "jobs with pods outside their domain": len(outside)}


def run(args: argparse.Namespace, root: Path) -> dict[str, object]:
    items, _ = gke_cluster(blocks=max(1, args.nodes // (SUBBLOCKS * HOSTS)), subblocks=SUBBLOCKS, hosts=HOSTS)
    cluster = KubeCluster(root, testcluster.up(root, kueue=True, kwok=True, lease_seconds=args.lease))
    arguments = operator_args(cluster, root)  # its CRD and RBAC, while the cluster is still idle
    probes = new_node_ready(cluster)
    cpu_start, started = cluster_cpu(cluster), time.perf_counter()
    cluster.create_nodes(items, ready_timeout=1800)
    row: dict[str, object] = {"a new Node Ready s (median, max)": f"{statistics.median(probes):.1f}, {max(probes):.1f}",
                              "nodes": len(items), "KWOK: all Ready s": f"{time.perf_counter() - started:.0f}"}
    mark, log = cluster.audit_mark(), root / "operator.log"
    started = time.perf_counter()
    with open(log, "wb") as out:
        operator = Timed(topolabel("run", *arguments), stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        row.update(labelling(cluster, items, log, mark, started))
        row.update(scheduling(cluster, job_mix(args.jobs)))
    finally:
        operator.signal(signal.SIGTERM)
        done = operator.wait(60)
    row.update({"operator CPU s": f"{done.cpu:.1f}", "operator peak RSS MiB": f"{done.rss_mb:.0f}",
                "cluster CPU s": f"{cluster_cpu(cluster) - cpu_start:.0f}"})
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5_000)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--lease", type=int, default=600, help="KWOK's Node Lease duration, seconds (renewed every "
                        "quarter of it; also the node lifecycle controller's grace period)")
    args = parser.parse_args()
    binaries = testcluster.find_binaries()
    if binaries is None or not binaries.has_kueue or not binaries.has_kwok:
        raise SystemExit("bench.kwok: no test cluster, Kueue or KWOK binaries; run hack/build-test-stack first")
    start_load = load()
    with tempfile.TemporaryDirectory(prefix="bench-kwok-") as tmp:
        root = Path(tmp)
        try:
            row = run(args, root)
        finally:
            testcluster.down(root)
    print_table(f"KWOK nodes, the operator and Kueue ({start_load} at the start, {load()} at the end)", [row])


if __name__ == "__main__":
    main()
