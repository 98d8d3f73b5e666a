"""Benchmark: the InfiniBand source on 8,192-HCA 3-level fat trees, next to the real ibnetdiscover.

Two fabrics from hack/ibfabric.py, both 8 pods under 8 cores: rail-optimised (1,024 hosts x 8 HCAs, 32 hosts
per scalable unit of 8 rail leaves) and classic (8,192 single-HCA hosts, 32 per leaf). For each: ibsim's
start-up; then, interleaved `--runs` times, the capture (the real `ibnetdiscover` against ibsim: its wall time,
and its CPU plus ibsim's while serving) and the whole `topolabel discover --source infiniband` process on that
capture (start-up and imports included), both measured by bench.measure (GNU time), medians; "whole / capture"
divides medians from the same run. "parse+inference" is text -> graph -> snapshot timed inside one process
without its imports (median of --runs). Needs ibsim-utils and infiniband-diags.
Run: python -m bench.infiniband [--runs N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.measure import Run, load, measure, proc_cpu, topolabel
from bench.table import print_table
from hack.ibfabric import Spec, build

FABRICS = {
    "rail-optimised, 1,024 hosts x 8 HCAs": Spec(pods=8, sus=4, rails=8, hosts=32, spines=16, uplinks=2, cores=8),
    "classic, 8,192 hosts x 1 HCA": Spec(pods=8, sus=32, rails=1, hosts=32, spines=16, uplinks=2, cores=8),
}


def child(path: str, runs: int) -> None:
    """Parse + inference of one saved output, `runs` times; prints timings and placements as JSON."""
    from labeler.settings.config import Config
    from providers.registry import get_source
    from topolabel.pipeline import discover

    times, cpu, snap = [], [], None
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        snap = discover(Config(), get_source("infiniband"), {"ibnetdiscover": path}, [])
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    assert snap is not None
    print(json.dumps({"times": times, "cpu": cpu, "nodes": snap.nodes, "levels": [lv.name for lv in snap.levels]}))


def median(runs: list[Run], field: str) -> float:
    return statistics.median(getattr(r, field) for r in runs)


def fabric_row(name: str, spec: Spec, tmp: Path, runs: int) -> dict[str, object]:
    from testkit.ibsim import simulate

    fabric = build(spec)
    out = tmp / "fabric.ibnetdiscover"
    captures, wholes = [], []
    start = time.perf_counter()
    with simulate(fabric, tmp) as sim:
        ready = time.perf_counter() - start
        for _ in range(runs):
            before = proc_cpu(sim.proc.pid)
            capture = measure(["ibnetdiscover"], env=sim.env())
            capture.cpu += proc_cpu(sim.proc.pid) - before
            out.write_text(capture.stdout)
            capture.stdout = ""
            captures.append(capture)
            wholes.append(measure(topolabel("discover", "--source", "infiniband", "--ibnetdiscover", str(out),
                                            "-o", "json")))
    inner = measure([sys.executable, "-m", "bench.infiniband", "--child", str(out), "--runs", str(runs)])
    found = json.loads(inner.stdout)
    truth = fabric.truth
    groups = {}
    for host, values in found["nodes"].items():
        groups.setdefault(tuple(values.values()), set()).add(host)
    exact = all(len({(truth.block[h], truth.leafgroup[h]) for h in hosts}) == 1 for hosts in groups.values()) \
        and len(groups) == len(set(truth.leafgroup.values())) and len(found["nodes"]) == len(truth.guids)
    hcas = sum(len(v) for v in truth.guids.values())
    return {"fabric": name, "HCAs": hcas, "switches": sum(n.kind == "Switch" for n in fabric.nodes.values()),
            "output MB": round(out.stat().st_size / 2**20, 1), "ibsim ready s": round(ready, 2),
            "capture s": f"{median(captures, 'wall'):.2f}", "capture CPU s": f"{median(captures, 'cpu'):.2f}",
            "whole discover s": f"{median(wholes, 'wall'):.2f}", "whole discover CPU s": f"{median(wholes, 'cpu'):.2f}",
            "whole / capture": f"{median(wholes, 'wall') / median(captures, 'wall'):.2f}x",
            "whole / capture CPU": f"{median(wholes, 'cpu') / median(captures, 'cpu'):.2f}x",
            "parse+inference s": round(statistics.median(found["times"]), 2),
            "parse+inference CPU s": round(statistics.median(found["cpu"]), 2),
            "peak RSS MB": f"{median(wholes, 'rss_mb'):.0f}", "levels": " > ".join(found["levels"]),
            "placed = truth": "yes" if exact else "NO"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", metavar="FILE", help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.runs)
        return
    start_load = load()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [fabric_row(name, spec, Path(tmp), args.runs) for name, spec in FABRICS.items()]
    print_table(f"InfiniBand source vs the capture ({start_load} at the start, {load()} at the end)", rows)


if __name__ == "__main__":
    main()
