"""Benchmark: snapshot, plan and Kueue generation for a large cluster (default 100,000 nodes).

Each phase is one whole `topolabel` process (start-up, imports and reading the node file included), measured
by bench.measure (GNU time). The node file comes twice: as the synthetic generator writes it (labels,
allocatable, taints, the Ready condition: 92 MB at 100,000 nodes) and with the full status a live cluster
serves (every condition, addresses, nodeInfo, images: several times larger).
Run: python -m bench.foundation [--nodes N] [--no-full-status]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from bench.measure import load, measure, topolabel
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
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--no-full-status", dest="full", action="store_false", help="skip the full-status file")
    args = parser.parse_args()
    start_load = load()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        files = write_files(tmpdir, args.nodes, args.full)
        snap, outdir = tmpdir / "snap.json", tmpdir / "kueue"
        for variant, nodes_file in files.items():
            for name, template in PHASES.items():
                cmd = [a.format(snap=snap, out=outdir) for a in template] + ["--nodes", str(nodes_file)]
                run = measure(topolabel(*cmd), stdout=snap if template[0] == "discover" else None)
                count = len(json.loads(snap.read_text())["nodes"])
                rows.append({"node file": variant, "file MB": f"{nodes_file.stat().st_size / 1e6:.0f}",
                             "phase": name, "nodes": count, "wall s": f"{run.wall:.2f}", "CPU s": f"{run.cpu:.2f}",
                             "peak RSS MB": f"{run.rss_mb:.0f}"})
    print_table(f"Foundation pipeline, whole processes ({start_load} at the start, {load()} at the end)", rows)


if __name__ == "__main__":
    main()
