"""Benchmark: `topolabel fit` on 10,000 nodes and 50,000 running pods, time per query.

Synthetic GKE-shaped cluster (hack/synth.py: blocks x subblocks x hosts, 8 GPUs per node, GPU taint) with
topolabel's level labels applied and 5 pods per node on average, most of them small, some holding whole
GPUs, so free capacity varies. Timed separately, in this process: reading nodes and pods into free capacity
(once per invocation of the command), building the flavor's tree (once per command and flavor), and each
query: phase 1 and 2 of Kueue's algorithm for one job on the built tree, and cold (tree included), median
of several runs with CPU time beside. Then the whole `topolabel fit` command on the same cluster written as
files (`kubectl get nodes/pods -o json`, the Kueue objects `topolabel kueue` writes), by bench.measure.

Run: python -m bench.fit [--nodes N] [--pods P] [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import yaml

from bench.measure import ROOT, load as load_average, measure, topolabel
from bench.table import print_table
from hack.synth import H100, gke_cluster
from kueue_config.tas.capacity import free_capacity, parse_pods
from kueue_config.tas.fit import fit
from kueue_config.tas.setup import Flavor, Queue
from kueue_config.tas.tree import build_tree
from kueue_config.tas.workloads import workload_of
from labeler.io.nodes import parse_nodes
from labeler.topology.names import HOSTNAME

KEYS = ("topolabel.dev/block", "topolabel.dev/subblock", HOSTNAME)
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def cluster(nodes: int) -> list[dict[str, Any]]:
    """`nodes` nodes as 8 hosts per subblock and 16 subblocks per block, topolabel's labels applied."""
    hosts, subblocks = 8, 16
    blocks = -(-nodes // (hosts * subblocks))
    items, truth = gke_cluster(blocks, subblocks, hosts, pools=(H100,))
    items = items[:nodes]
    for item in items:
        block, sub, _ = truth[item["metadata"]["name"]]
        item["metadata"]["labels"].update({KEYS[0]: block[:12], KEYS[1]: sub[:12]})
    return items


def pods(node_items: list[dict[str, Any]], count: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    names = [n["metadata"]["name"] for n in node_items]
    out = []
    for i in range(count):
        gpus = rng.choice([1, 2, 4, 8]) if i % 10 == 0 else 0  # one pod in ten holds GPUs
        requests = {"cpu": rng.choice(["100m", "250m", "1", "4"]), "memory": rng.choice(["128Mi", "1Gi", "8Gi"])}
        if gpus:
            requests["nvidia.com/gpu"] = str(gpus)
        out.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "ns"},
                    "spec": {"nodeName": rng.choice(names), "containers": [{"name": "c", "resources": {"requests": requests}}]},
                    "status": {"phase": "Running"}})
    return out


def job(pods_count: int, annotations: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "bench"},
            "spec": {"parallelism": pods_count, "template": {
                "metadata": {"annotations": annotations},
                "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "8"},
                                                                     "requests": {"cpu": "16", "memory": "64Gi"}}}],
                         "tolerations": [TOLERATION]}}}}


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """Median wall and CPU seconds of `repeat` runs, and the last result."""
    times, cpu, result = [], [], None
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(times), statistics.median(cpu), result


def whole_command(node_items: list[dict[str, Any]], pod_items: list[dict[str, Any]], manifest: dict[str, Any],
                  repeat: int) -> dict[str, object]:
    """`topolabel fit` as users run it: files in, the answer out, start-up included (medians)."""
    from labeler.topology.model import Level, Snapshot

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "nodes.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": node_items}))
        (root / "pods.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": pod_items}))
        (root / "job.yaml").write_text(yaml.safe_dump(manifest))
        levels = (Level("block", KEYS[0]), Level("subblock", KEYS[1]))
        snap = Snapshot(levels, {n["metadata"]["name"]: {"block": n["metadata"]["labels"][KEYS[0]],
                                                         "subblock": n["metadata"]["labels"][KEYS[1]]}
                                 for n in node_items})
        (root / "snapshot.json").write_text(json.dumps(snap.to_dict()))
        subprocess.run(topolabel("kueue", "--snapshot", str(root / "snapshot.json"), "--nodes", str(root / "nodes.json"),
                                 "--output-dir", str(root / "kueue")), check=True, capture_output=True, cwd=ROOT)
        runs = [measure(topolabel("fit", str(root / "job.yaml"), "--nodes", str(root / "nodes.json"), "--pods",
                                  str(root / "pods.json"), "--kueue-dir", str(root / "kueue"), "-o", "json"),
                        check=False) for _ in range(repeat)]
    fits = json.loads(runs[-1].stdout)["fits"]
    return {"step": "whole `topolabel fit` command (files, start-up included)", "fits": str(fits),
            "median s": f"{statistics.median(r.wall for r in runs):.3f}",
            "CPU s": f"{statistics.median(r.cpu for r in runs):.3f}",
            "peak RSS MB": f"{statistics.median(r.rss_mb for r in runs):.0f}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    node_items = cluster(args.nodes)
    pod_items = pods(node_items, args.pods)

    def load():
        parsed = parse_nodes(node_items, "bench")
        return parsed, free_capacity(parsed, parse_pods(pod_items, "bench"))

    start_load = load_average()
    load_s, load_cpu, (nodes, free) = timed(load, args.repeat)
    tree_s, tree_cpu, _ = timed(lambda: build_tree(KEYS, nodes, free), args.repeat)
    queue = Queue.of([Flavor("h100", {}, (TOLERATION,), "topo", levels=KEYS)])
    queries = {
        "required block, 64 pods": job(64, {"kueue.x-k8s.io/podset-required-topology": KEYS[0]}),
        "preferred subblock, 64 pods": job(64, {"kueue.x-k8s.io/podset-preferred-topology": KEYS[1]}),
        "required block, 64 pods, slices of 4 per subblock": job(64, {
            "kueue.x-k8s.io/podset-required-topology": KEYS[0],
            "kueue.x-k8s.io/podset-slice-required-topology": KEYS[1], "kueue.x-k8s.io/podset-slice-size": "4"}),
        "required block, 4096 pods (does not fit)": job(4096, {"kueue.x-k8s.io/podset-required-topology": KEYS[0]}),
        "unconstrained, 1000 pods": job(1000, {"kueue.x-k8s.io/podset-unconstrained-topology": "true"}),
    }
    rows = [{"step": "read nodes + pods, free capacity", "fits": "-", "median s": f"{load_s:.3f}",
             "CPU s": f"{load_cpu:.3f}", "peak RSS MB": "-"},
            {"step": "build tree (one flavor)", "fits": "-", "median s": f"{tree_s:.3f}", "CPU s": f"{tree_cpu:.3f}",
             "peak RSS MB": "-"}]
    for name, manifest in queries.items():
        workload = workload_of(manifest, "bench")
        seconds, cpu, report = timed(lambda w=workload: fit(w, nodes, free, queue), args.repeat)
        rows.append({"step": f"query (tree + placement): {name}", "fits": str(report.fits), "median s": f"{seconds:.3f}",
                     "CPU s": f"{cpu:.3f}", "peak RSS MB": "-"})
    rows.append(whole_command(node_items, pod_items, queries["required block, 64 pods"], args.repeat))
    print_table(f"fit: {len(nodes)} nodes, {len(pod_items)} pods, {args.repeat} runs each ({start_load} at the "
                f"start, {load_average()} at the end)", rows)


if __name__ == "__main__":
    main()
