"""Benchmark: snapshot, plan and Kueue generation for a large cluster (default 100,000 nodes).

Each phase runs in a fresh process so its peak RSS is its own. Run: python -m bench.foundation [--nodes N]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.table import print_table
from hack.synth import gke_cluster, node_list

PHASES = {
    "read nodes + discover (labels, gke)": ["discover", "--source", "labels", "--preset", "gke", "-o", "json"],
    "plan (snapshot vs nodes)": ["plan", "--snapshot", "{snap}", "-o", "json"],
    "kueue objects to files": ["kueue", "--snapshot", "{snap}", "--output-dir", "{out}"],
}


def phase(args: list[str], stdout_path: Path | None) -> tuple[float, float, float]:
    """Run one `topolabel` command in-process; return (wall seconds, CPU seconds, peak RSS in MB).

    CPU seconds are the figure to compare across runs when other work shares the machine."""
    from topolabel.cli import main

    start, cpu = time.perf_counter(), time.process_time()
    with open(stdout_path or "/dev/null", "w") as out:
        real, sys.stdout = sys.stdout, out
        try:
            code = main(args)
        finally:
            sys.stdout = real
    if code not in (0,):
        raise SystemExit(f"phase failed ({code}): {args}")
    return (time.perf_counter() - start, time.process_time() - cpu,
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def main() -> None:
    if sys.argv[1:2] == ["--child"]:  # one phase, in its own process: --child OUT ARGS...
        out = sys.argv[2]
        print(json.dumps(phase(sys.argv[3:], Path(out) if out != "-" else None)))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=100_000)
    args = parser.parse_args()
    hosts = 125
    blocks = max(1, args.nodes // (8 * hosts))
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        items, _ = gke_cluster(blocks=blocks, subblocks=8, hosts=hosts)
        nodes_file = tmpdir / "nodes.json"
        nodes_file.write_text(json.dumps(node_list(items)))
        snap, outdir = tmpdir / "snap.json", tmpdir / "kueue"
        rows = []
        for name, template in PHASES.items():
            cmd = [a.format(snap=snap, out=outdir) for a in template] + ["--nodes", str(nodes_file)]
            capture = str(snap) if template[0] == "discover" else "-"
            result = subprocess.run([sys.executable, "-m", "bench.foundation", "--child", capture, *cmd],
                                    capture_output=True, text=True, check=True)
            seconds, cpu, rss = json.loads(result.stdout.strip().splitlines()[-1])
            rows.append({"phase": name, "nodes": len(items), "wall s": f"{seconds:.2f}", "CPU s": f"{cpu:.2f}",
                         "peak RSS MB": f"{rss:.0f}"})
    print_table(f"Foundation pipeline, {len(items):,} nodes", rows)


if __name__ == "__main__":
    main()
