"""Benchmark: `topolabel export` (Slurm tree, block and yaml; Volcano) for a large InfiniBand-like snapshot.

The snapshot is a fat tree: 32 nodes per leaf, 16 leaves per spine group, one fabric, one node in 50 missing
(gaps in the hostlists). Each export runs in a fresh process (bench.foundation's child mode), so its time
and peak RSS are its own; both include reading the snapshot and Python's start-up. "CPU s" is the child's CPU
time, steadier than wall time on a shared machine. Run: python -m bench.export [--nodes N]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.table import print_table
from labeler.model import Level, Snapshot

PHASES = {
    "slurm tree": ["export", "slurm", "--snapshot", "{snap}"],
    "slurm block (leaf)": ["export", "slurm", "--snapshot", "{snap}", "--format", "block", "--block-level", "leaf"],
    "slurm yaml": ["export", "slurm", "--snapshot", "{snap}", "--format", "yaml"],
    "volcano HyperNodes": ["export", "volcano", "--snapshot", "{snap}"],
}


def fat_tree(nodes: int) -> Snapshot:
    levels = (Level("core", "example.com/core"), Level("group", "example.com/group"), Level("leaf", "example.com/leaf"))
    placed = {}
    for i in range(nodes):
        if i % 50 != 49:
            leaf = i // 32
            placed[f"gpu{i:06d}"] = {"core": "fabric", "group": f"sg{leaf // 16:04d}", "leaf": f"leaf{leaf:05d}"}
    return Snapshot(levels, placed)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=100_000)
    args = parser.parse_args()
    snapshot = fat_tree(args.nodes)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        snap, out = Path(tmp) / "snap.json", Path(tmp) / "out"
        snap.write_text(json.dumps(snapshot.to_dict()))
        for name, template in PHASES.items():
            cmd = [a.format(snap=snap) for a in template]
            before = _children_cpu()
            result = subprocess.run([sys.executable, "-m", "bench.foundation", "--child", str(out), *cmd],
                                    capture_output=True, text=True, check=True)
            seconds, rss = json.loads(result.stdout.strip().splitlines()[-1])
            rows.append({"export": name, "nodes": len(snapshot.nodes), "seconds": f"{seconds:.2f}",
                         "CPU s": f"{_children_cpu() - before:.2f}",
                         "peak RSS MB": f"{rss:.0f}", "output KB": f"{out.stat().st_size / 1024:.0f}"})
    print_table(f"topolabel export, {len(snapshot.nodes):,} nodes", rows)


if __name__ == "__main__":
    main()
