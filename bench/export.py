"""Benchmark: `topolabel export` (Slurm tree, block and yaml; Volcano) for a large InfiniBand-like snapshot.

The snapshot is a fat tree: 32 nodes per leaf, 16 leaves per spine group, one fabric, one node in 50 missing
(gaps in the hostlists). Each export is one whole `topolabel` process measured by bench.measure (GNU time), so
its time and peak RSS are its own; both include reading the snapshot and Python's start-up. "CPU s" is the
child's CPU time, steadier than wall time on a shared machine. Run: python -m bench.export [--nodes N]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from bench.measure import load, measure, topolabel
from bench.table import print_table
from labeler.topology.model import Level, Snapshot

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
            run = measure(topolabel(*cmd), stdout=out)
            rows.append({"export": name, "nodes": len(snapshot.nodes), "seconds": f"{run.wall:.2f}",
                         "CPU s": f"{run.cpu:.2f}", "peak RSS MB": f"{run.rss_mb:.0f}",
                         "output KB": f"{out.stat().st_size / 1024:.0f}"})
    print_table(f"topolabel export, {len(snapshot.nodes):,} nodes ({load()})", rows)


if __name__ == "__main__":
    main()
