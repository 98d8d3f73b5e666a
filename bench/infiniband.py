"""Benchmark: the InfiniBand source on 8,192-HCA 3-level fat trees, next to the real ibnetdiscover.

Two fabrics from hack/ibfabric.py, both 8 pods under 8 cores: rail-optimised (1,024 hosts x 8 HCAs, 32 hosts
per scalable unit of 8 rail leaves) and classic (8,192 single-HCA hosts, 32 per leaf). For each: ibsim's
start-up, `ibnetdiscover` wall time against it, then parse + inference (text -> graph -> snapshot) in a fresh
process, timed without imports (median of 3, wall and CPU) and with that process's peak RSS. Needs ibsim-utils and
infiniband-diags. Run: python -m bench.infiniband
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.table import print_table
from hack.ibfabric import Spec, build

FABRICS = {
    "rail-optimised, 1,024 hosts x 8 HCAs": Spec(pods=8, sus=4, rails=8, hosts=32, spines=16, uplinks=2, cores=8),
    "classic, 8,192 hosts x 1 HCA": Spec(pods=8, sus=32, rails=1, hosts=32, spines=16, uplinks=2, cores=8),
}


def child(path: str, runs: int) -> None:
    """Parse + inference of one saved output, `runs` times; prints timings, placements and peak RSS as JSON."""
    from labeler.config import Config
    from providers.registry import get_source
    from topolabel.pipeline import discover

    times, cpu, snap = [], [], None
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        snap = discover(Config(), get_source("infiniband"), {"ibnetdiscover": path}, [])
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    assert snap is not None
    print(json.dumps({"times": times, "cpu": cpu, "nodes": snap.nodes, "levels": [lv.name for lv in snap.levels],
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def measure(name: str, spec: Spec, tmp: Path, runs: int) -> dict[str, object]:
    from tests.ibsim import simulate

    fabric = build(spec)
    start = time.perf_counter()
    with simulate(fabric, tmp) as sim:
        ready = time.perf_counter() - start
        start = time.perf_counter()
        text = sim.discover(timeout=600)
        discovered = time.perf_counter() - start
    out = tmp / "fabric.ibnetdiscover"
    out.write_text(text)
    result = subprocess.run([sys.executable, "-m", "bench.infiniband", "--child", str(out), "--runs", str(runs)],
                            capture_output=True, text=True, check=True)
    found = json.loads(result.stdout)
    truth = fabric.truth
    groups = {}
    for host, values in found["nodes"].items():
        groups.setdefault(tuple(values.values()), set()).add(host)
    exact = all(len({(truth.block[h], truth.leafgroup[h]) for h in hosts}) == 1 for hosts in groups.values()) \
        and len(groups) == len(set(truth.leafgroup.values())) and len(found["nodes"]) == len(truth.guids)
    hcas = sum(len(v) for v in truth.guids.values())
    return {"fabric": name, "HCAs": hcas, "switches": sum(n.kind == "Switch" for n in fabric.nodes.values()),
            "output MB": round(len(text) / 2**20, 1), "ibsim ready s": round(ready, 2),
            "ibnetdiscover s": round(discovered, 2), "parse+inference s": round(statistics.median(found["times"]), 2),
            "parse+inference CPU s": round(statistics.median(found["cpu"]), 2),
            "peak RSS MB": round(found["peak_rss_mb"]), "levels": " > ".join(found["levels"]),
            "placed = truth": "yes" if exact else "NO"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", metavar="FILE", help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.runs)
        return
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(name, spec, Path(tmp), args.runs) for name, spec in FABRICS.items()]
    print_table("InfiniBand source: parse + inference vs ibnetdiscover", rows)


if __name__ == "__main__":
    main()
