"""Benchmark: label N nodes (default 10,000) on a real kube-apiserver 1.36, many patches in flight vs one
at a time.

Each concurrency gets a fresh test cluster (hack/testcluster.py) with the same synthetic GKE nodes, so
runs do not disturb each other. Timed: `apply_plan` writing the plan (one JSON merge patch per node)
through the same client the CLI builds; then the steady-state pass (list + plan + apply, no writes).
Patches are counted from the server's audit log; CPU is the benchmark process (the client) and
kube-apiserver + etcd (the server), which on a small shared machine says more than wall time.

With --latency MS the client reaches the server through a proxy that adds MS to every round trip
(bench.latency): a remote API server, where writing one patch at a time waits out every round trip.

Run: python -m bench.apply [--nodes N] [--concurrency 16,1] [--latency MS]   (needs hack/build-test-stack first)
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from bench.latency import delayed
from bench.measure import proc_cpu
from bench.table import print_table
from hack import testcluster
from hack.synth import gke_cluster
from labeler.cluster.apply import ApplyResult, apply_plan
from labeler.cluster.kube import connect, list_nodes, patch_node
from labeler.settings.config import Config
from labeler.topology.plan import Plan, make_plan
from providers.registry import get_source
from testkit.kubecluster import KubeCluster
from topolabel.pipeline import discover


class NewConnections(logging.Handler):
    """Counts urllib3's "Starting new HTTPS connection": each is a TCP connect and a TLS handshake."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += record.getMessage().startswith("Starting new HTTPS connection")


@contextmanager
def counting_connections() -> Iterator[NewConnections]:
    logger = logging.getLogger("urllib3.connectionpool")
    handler, level = NewConnections(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU of the server processes so far."""
    return sum(proc_cpu(pid) for pid in pids)


def gke_plan(api: object) -> Plan:
    """The label plan the CLI would make with `--source labels --preset gke`."""
    nodes = list_nodes(api)
    return make_plan(discover(Config(), get_source("labels"), {"preset": "gke"}, nodes), nodes)


def measure(cluster: KubeCluster, work: Callable[[], ApplyResult]) -> dict[str, object]:
    """Run `work` and measure it: wall and CPU time on both sides, patches the server received."""
    mark, server_cpu, client_cpu = cluster.audit_mark(), cpu_seconds(cluster.state.pids.values()), time.process_time()
    with counting_connections() as connections:
        start = time.perf_counter()
        result = work()
        seconds = time.perf_counter() - start
    sent = len(cluster.requests(since=mark, verb="patch", resource="nodes"))
    return {"seconds": f"{seconds:.1f}", "patches sent": sent, "patches/s": f"{sent / seconds:.0f}" if sent else "-",
            "written": len(result.written), "failed": len(result.failed), "retries": result.retries,
            "new TLS connections": connections.count,
            "client CPU s": f"{time.process_time() - client_cpu:.1f}",
            "server CPU s": f"{cpu_seconds(cluster.state.pids.values()) - server_cpu:.1f}"}


def run(items: list[dict], concurrency: int, latency: float = 0.0) -> list[dict[str, object]]:
    """A fresh cluster with `items`. First pass: apply a ready plan that labels every node. Second pass:
    everything a rerun does (list, discover, plan, apply), finding nothing to write. With `latency`, the
    client reaches the server through bench.latency, `latency` ms more each round trip."""
    with tempfile.TemporaryDirectory(prefix="bench-apply-") as tmp:
        root = Path(tmp)
        cluster = KubeCluster(root, testcluster.up(root))
        try:
            cluster.create_nodes(items)
            with delayed(cluster.state.server, latency) if latency else nullcontext(cluster.state.server) as url:
                kubeconfig = root / "client.kubeconfig"
                kubeconfig.write_text(cluster.kubeconfig.read_text().replace(cluster.state.server, url))
                api = connect(str(kubeconfig))

                def apply(plan: Plan) -> ApplyResult:
                    return apply_plan(plan, lambda name, body: patch_node(api, name, body), concurrency=concurrency)

                plan = gke_plan(api)
                first = measure(cluster, lambda: apply(plan))
                second = measure(cluster, lambda: apply(gke_plan(api)))
        finally:
            testcluster.down(root)
    row = {"nodes": len(items), "concurrency": concurrency, "added round trip ms": latency}
    return [{**row, "pass": "first: apply (label all)", **first},
            {**row, "pass": "second: list+plan+apply", **second}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--concurrency", default="16,1", help="comma-separated values to compare")
    parser.add_argument("--latency", type=float, default=0.0, metavar="MS",
                        help="add this many ms to every round trip (a remote API server; bench.latency)")
    args = parser.parse_args()
    if testcluster.find_binaries() is None:
        raise SystemExit("bench.apply: no test cluster binaries; run hack/build-test-stack first")
    hosts = 125
    items, _ = gke_cluster(blocks=max(1, args.nodes // (8 * hosts)), subblocks=8, hosts=hosts)
    load = os.getloadavg()[0]
    rows = [row for c in args.concurrency.split(",") for row in run(items, int(c), args.latency)]
    print_table(f"Applying labels on kube-apiserver 1.36, {len(items):,} nodes "
                f"({os.cpu_count()} CPUs, load average {load:.1f} -> {os.getloadavg()[0]:.1f})", rows)


if __name__ == "__main__":
    main()
