"""Benchmark: `topolabel run` labelling N nodes (default 10,000) on a real kube-apiserver 1.36, next to the
same work done by `topolabel apply` one patch at a time.

Each row gets a fresh test cluster (hack/testcluster.py) holding the same synthetic GKE nodes and Kueue's
CRDs. The operator runs as a child process with `--source labels --preset gke`, as user
`topolabel-operator` bound to the manifests' ClusterRole; timed from its start until its metrics say every
node is labelled (its first full pass, Kueue objects included, follows within the same pass). Writes are
counted from the server's audit log; "second resync writes" are the operator's writes during its next full
pass. `topolabel apply --concurrency 1` runs as a child process too (list, discover, plan, then one patch at
a time). Peak RSS is each child's maximum resident set, by bench.measure (GNU time). "cluster CPU s" is what
etcd, the API server, controller-manager and scheduler spent from the start until every node was labelled
(/proc/PID/stat): with the client's, it bounds how much concurrency can gain on these CPUs.

Run: python -m bench.operator [--nodes N] [--resync S]   (needs hack/build-test-stack first)
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Callable

from bench.measure import Timed, load, topolabel
from bench.table import print_table
from hack import testcluster
from hack.synth import gke_cluster
from testkit.environment import ROOT
from testkit.kubecluster import KubeCluster

WRITES = ("create", "update", "patch", "delete")
PORT = re.compile(rb"serving /metrics.* on http://[^:]+:(\d+)")
FIRST_PASS = re.compile(rb"full pass over \d+ node\(s\) took ([0-9.]+)s")


def fresh_cluster(root: Path, items: list[dict]) -> KubeCluster:
    cluster = KubeCluster(root, testcluster.up(root))
    cluster.install_kueue_crds()
    cluster.bind_operator(ROOT / "manifests")
    cluster.create_nodes(items)
    return cluster


def child(args: list[str], log: Path) -> Timed:
    with open(log, "wb") as out:
        return Timed(topolabel(*args), stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                     env={**os.environ, "PYTHONPATH": str(ROOT)})


def cluster_cpu(cluster: KubeCluster) -> float:
    """CPU seconds (user + system) the test cluster's processes (etcd, API server, controller-manager,
    scheduler) have used so far: what the server side of the labelling costs on the shared CPUs."""
    return sum(map(process_cpu, cluster.state.pids.values()))


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14, 15 of proc(5)


def sample(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    match = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def poll(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"bench.operator: timed out waiting for {what}")
        time.sleep(0.2)


def operator_row(items: list[dict], resync: float) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="bench-operator-") as tmp:
        root = Path(tmp)
        cluster = fresh_cluster(root, items)
        try:
            mark, log = cluster.audit_mark(), root / "operator.log"
            start, server_start = time.perf_counter(), cluster_cpu(cluster)
            proc = child(["run", "--source", "labels", "--preset", "gke", "--kubeconfig",
                          str(cluster.operator_kubeconfig), "--resync", str(resync), "--http", "127.0.0.1:0"], log)
            port_found: list[int] = []

            def port() -> bool:
                found = PORT.search(log.read_bytes())
                port_found[:] = [int(found.group(1))] if found else []
                return bool(found)

            poll(port, 120, "the operator's metrics port")
            metric = lambda name: sample(port_found[0], name)  # noqa: E731
            poll(lambda: metric('topolabel_nodes{state="labelled"}') >= len(items), 1800, "every node labelled")
            labelled, server = time.perf_counter() - start, cluster_cpu(cluster) - server_start
            client = process_cpu(proc.child_pid())
            poll(lambda: metric('topolabel_syncs_total{scope="full"}') >= 1, 600, "the first full pass")
            writes = cluster.requests(since=mark, user=testcluster.OPERATOR, verb="patch", resource="nodes")
            second = cluster.audit_mark()
            poll(lambda: metric('topolabel_syncs_total{scope="full"}') >= 2, resync + 600, "the second full pass")
            again = [e for e in cluster.requests(since=second, user=testcluster.OPERATOR) if e.verb in WRITES]
            proc.signal(signal.SIGTERM)
            run = proc.wait(60)
            first_pass = float(FIRST_PASS.search(log.read_bytes()).group(1))
        finally:
            testcluster.down(root)
    return {"run": "topolabel run (operator, 16 in flight)", "nodes": len(items),
            "time to all labelled s": f"{labelled:.1f}", "of which first full pass s": f"{first_pass:.1f}",
            "node writes": len(writes), "nodes changed": len(items), "second resync writes": len(again),
            "CPU s": f"{run.cpu:.1f}", "CPU s until labelled": f"{client:.1f}", "cluster CPU s": f"{server:.1f}",
            "peak RSS MiB": f"{run.rss_mb:.0f}"}


def sequential_row(items: list[dict]) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="bench-operator-") as tmp:
        root = Path(tmp)
        cluster = fresh_cluster(root, items)
        try:
            mark = cluster.audit_mark()
            start, server_start = time.perf_counter(), cluster_cpu(cluster)
            run = child(["apply", "--source", "labels", "--preset", "gke", "--kubeconfig", str(cluster.kubeconfig),
                         "--concurrency", "1", "-o", "json"], root / "apply.log").wait()
            seconds, server = time.perf_counter() - start, cluster_cpu(cluster) - server_start
            writes = cluster.requests(since=mark, verb="patch", resource="nodes")
        finally:
            testcluster.down(root)
    return {"run": "topolabel apply --concurrency 1", "nodes": len(items), "time to all labelled s": f"{seconds:.1f}",
            "of which first full pass s": "-", "node writes": len(writes), "nodes changed": len(items),
            "second resync writes": "-", "CPU s": f"{run.cpu:.1f}", "CPU s until labelled": f"{run.cpu:.1f}",
            "cluster CPU s": f"{server:.1f}",
            "peak RSS MiB": f"{run.rss_mb:.0f}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--resync", type=float, default=30.0, help="the operator's resync interval (seconds)")
    args = parser.parse_args()
    if testcluster.find_binaries() is None:
        raise SystemExit("bench.operator: no test cluster binaries; run hack/build-test-stack first")
    hosts = 125
    items, _ = gke_cluster(blocks=max(1, args.nodes // (8 * hosts)), subblocks=8, hosts=hosts)
    start_load = load()
    rows = [operator_row(items, args.resync), sequential_row(items)]
    print_table(f"Operator on kube-apiserver 1.36, {len(items):,} nodes "
                f"({start_load} at the start, {load()} at the end)", rows)


if __name__ == "__main__":
    main()
