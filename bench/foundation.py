"""Benchmark: snapshot, plan and Kueue generation for a large cluster (default 100,000 nodes).

Each phase is one whole `topolabel` process (start-up, imports and reading the node file included), measured
by bench.measure (GNU time). The node file comes twice: as the synthetic generator writes it (labels,
allocatable, taints, the Ready condition: 92 MB at 100,000 nodes) and with the full status a live cluster
serves (every condition, addresses, nodeInfo, images: several times larger).
Run: python -m bench.foundation [--nodes N[,N...]] [--runs N] [--no-full-status]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
from pathlib import Path

from bench.measure import Run, load, measure, topolabel
from bench.table import print_table
from hack.synth import full_status, gke_cluster, node_list

PHASES = {
    "read nodes + discover (labels, gke)": ["discover", "--source", "labels", "--preset", "gke", "-o", "json"],
    "plan (snapshot vs nodes)": ["plan", "--snapshot", "{snap}", "-o", "json"],
    "kueue objects to files": ["kueue", "--snapshot", "{snap}", "--output-dir", "{out}"],
}


def write_files(tmp: Path, nodes: int, full: bool) -> dict[str, Path]:
    """The node list as JSON, and with full status when `full`; returns {variant: path}."""
    hosts = 125
    items, _ = gke_cluster(blocks=max(1, nodes // (8 * hosts)), subblocks=8, hosts=hosts)
    files = {"labels, allocatable, taints": tmp / "nodes.json"}
    files["labels, allocatable, taints"].write_text(json.dumps(node_list(items)))
    if full:
        files["full status"] = tmp / "nodes-full.json"
        with open(files["full status"], "w") as out:  # written item by item: the whole text would be 400 MB
            out.write('{"apiVersion": "v1", "kind": "List", "items": [')
            for i, item in enumerate(items):
                out.write((", " if i else "") + json.dumps(full_status(item)))
            out.write("]}")
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="100000", help="comma-separated sizes, smallest first; with two or "
                        "more, each phase's growth exponent from the first to the last is reported")
    parser.add_argument("--runs", type=int, default=1, help="runs of each phase (medians), interleaved")
    parser.add_argument("--no-full-status", dest="full", action="store_false", help="skip the full-status file")
    args = parser.parse_args()
    sizes = [int(n) for n in args.nodes.split(",")]
    start_load = load()
    rows, exponents = [], []
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            rows += _phases(Path(tmp), size, args.full, args.runs)
    if len(sizes) > 1:
        first, last = sizes[0], sizes[-1]
        for key in dict.fromkeys((r["node file"], r["phase"]) for r in rows):
            small, large = (next(r for r in rows if (r["node file"], r["phase"]) == key and r["nodes"] == n)
                            for n in (first, last))
            growth = {f"{what} exponent": math.log(float(large[what]) / float(small[what])) / math.log(last / first)
                      for what in ("CPU s", "peak RSS MB")}
            exponents.append({"node file": key[0], "phase": key[1], "nodes": f"{first:,} -> {last:,}",
                              **{what: f"{value:.2f}" for what, value in growth.items()}})
    print_table(f"Foundation pipeline, whole processes, medians of {args.runs} ({start_load} at the start, "
                f"{load()} at the end)", rows)
    if exponents:
        print_table("Growth: time or memory ~ nodes^exponent (1.00 is linear)", exponents)


def _phases(tmpdir: Path, size: int, full: bool, runs: int) -> list[dict[str, object]]:
    """Every phase on each node file of `size` nodes, `runs` times interleaved; a row per file and phase."""
    files = write_files(tmpdir, size, full)
    snap, outdir = tmpdir / "snap.json", tmpdir / "kueue"
    rows = []
    for variant, nodes_file in files.items():
        found: dict[str, list[Run]] = {name: [] for name in PHASES}
        for _ in range(runs):
            for name, template in PHASES.items():
                cmd = [a.format(snap=snap, out=outdir) for a in template] + ["--nodes", str(nodes_file)]
                found[name].append(measure(topolabel(*cmd), stdout=snap if template[0] == "discover" else None))
        count = len(json.loads(snap.read_text())["nodes"])
        file_mb = nodes_file.stat().st_size / 1e6
        for name, done in found.items():
            rss = statistics.median(r.rss_mb for r in done)
            rows.append({"node file": variant, "file MB": f"{file_mb:.0f}", "phase": name, "nodes": count,
                         "wall s": f"{statistics.median(r.wall for r in done):.2f}",
                         "CPU s": f"{statistics.median(r.cpu for r in done):.2f}", "peak RSS MB": f"{rss:.0f}",
                         "RSS / file": f"{rss * 2**20 / 1e6 / file_mb:.2f}"})
    return rows


if __name__ == "__main__":
    main()
