"""Benchmark: cutting a node list into items (`labeler.io.jsonlist.raw_items`), in this process, CPU seconds.

The files are bench.foundation's: 100,000 GKE-style nodes as the generator writes them (92 MB) and with full
status (382 MB). Each file is cut `--runs` times, as the commands read it (runs of items by one msgspec decode,
single values by the scanner), and as often with runs switched off, so every item goes through the scanner
(the path a list whose items repeat the bytes between items takes). A digest of the items shows that both ways
cut the same bytes. The figure is CPU time (time.process_time), which a loaded machine distorts least.
Run: python -m bench.jsonlist [--nodes N] [--runs N]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
import time
from pathlib import Path

from bench.foundation import write_files
from bench.measure import load
from bench.table import print_table
from labeler.io import jsonlist


def cut(path: Path) -> tuple[float, int, str]:
    """CPU seconds to cut every item, the item count, and a digest of the items' bytes."""
    digest, count = hashlib.sha256(), 0
    start = time.process_time()
    with jsonlist.raw_items(path) as items:
        assert items is not None, path
        for raw in items:
            digest.update(bytes(raw))
            count += 1
    return time.process_time() - start, count, digest.hexdigest()[:16]


def no_runs(scanner: jsonlist.ListScanner, separator: bytes) -> list[object]:
    return []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    start_load = load()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for variant, path in write_files(Path(tmp), args.nodes, True).items():
            for way in ("runs and scanner", "scanner only"):
                original = jsonlist.ListScanner._run
                if way == "scanner only":
                    jsonlist.ListScanner._run = no_runs
                try:
                    results = [cut(path) for _ in range(args.runs)]
                finally:
                    jsonlist.ListScanner._run = original
                cpu = [r[0] for r in results]
                rows.append({"node file": variant, "file MB": f"{path.stat().st_size / 1e6:.0f}", "cut by": way,
                             "items": results[0][1], "digest": results[0][2],
                             f"CPU s, median of {args.runs}": f"{statistics.median(cpu):.3f}",
                             "range": f"{min(cpu):.3f}-{max(cpu):.3f}"})
    print_table(f"Cutting node lists into items ({start_load} at the start, {load()} at the end)", rows)


if __name__ == "__main__":
    main()
