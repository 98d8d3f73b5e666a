"""Benchmark: start-up, the part of every command a user waits for: `topolabel --help`, and a small
discovery (`discover --source labels` on examples/nodes.yaml, 79 nodes, table output), each a whole process
measured by bench.measure (GNU time), beside the bare interpreter (`python -c pass`) in the same run.
Medians of --runs runs, interleaved. Run: python -m bench.startup [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import sys

from bench.measure import ROOT, Run, load, measure, topolabel
from bench.table import print_table

STEPS = {
    "python -c pass (the interpreter alone)": [sys.executable, "-c", "pass"],
    "topolabel --help": topolabel("--help"),
    "topolabel discover --source labels (79 nodes, YAML, table)":
        topolabel("discover", "--source", "labels", "--preset", "gke", "--nodes", str(ROOT / "examples/nodes.yaml")),
    "topolabel discover --source labels (79 nodes, JSON, table)":
        topolabel("discover", "--source", "labels", "--preset", "gke", "--nodes", "{json}"),
}


def main() -> None:
    import json
    import tempfile

    import yaml

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    start_load = load()
    runs: dict[str, list[Run]] = {name: [] for name in STEPS}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as as_json:
        json.dump(yaml.safe_load((ROOT / "examples/nodes.yaml").read_text()), as_json)
        as_json.flush()
        for _ in range(args.runs):
            for name, argv in STEPS.items():
                runs[name].append(measure([a.format(json=as_json.name) for a in argv]))
    rows = [{"step": name, "wall s": f"{statistics.median(r.wall for r in rs):.3f}",
             "CPU s": f"{statistics.median(r.cpu for r in rs):.3f}",
             "peak RSS MB": f"{statistics.median(r.rss_mb for r in rs):.0f}"} for name, rs in runs.items()]
    print_table(f"Start-up, medians of {args.runs} ({start_load} at the start, {load()} at the end)", rows)


if __name__ == "__main__":
    main()
