"""Benchmark: the published InfiniBand fabric at 8,192 and 100,000 HCAs (what the collector writes, the operator reads).

Fabrics from hack.ibfabric.SIZED (GUIDs scattered as on a real fabric, so compression is not flattered), written
as `ibnetdiscover` output without ibsim (`Fabric.capture_text`; 100,000 HCAs are too many to simulate here). In a
fresh process each, timed without imports: the collector's side (parse, compact JSON, xz) and the operator's side
(unxz, decode, graph), with each process's peak RSS. Beside them, for comparison, gzip -9 of the same JSON and xz
of the raw capture. Run: python -m bench.ibpublish
"""

from __future__ import annotations

import argparse
import gzip
import json
import lzma
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.table import print_table
from hack.ibfabric import SIZED, build
from labeler.cluster.shards import SHARD_BYTES


def collector_side(capture: str, out: str) -> None:
    from providers.infiniband.parse import parse_ibnetdiscover
    from providers.infiniband.published import encode, pack, to_bytes

    cpu = time.process_time()
    raw = to_bytes(encode(parse_ibnetdiscover(Path(capture).read_text(), capture)))
    parsed = time.process_time() - cpu
    blob = pack(raw)
    Path(out).write_bytes(blob)
    print(json.dumps({"json": len(raw), "parse_cpu": parsed, "xz_cpu": time.process_time() - cpu - parsed,
                      "gzip": len(gzip.compress(raw, 9, mtime=0)), "rss": _rss()}))


def operator_side(blob_path: str) -> None:
    from providers.infiniband.published import decode, unpack

    cpu = time.process_time()
    fabric = decode(unpack(Path(blob_path).read_bytes(), blob_path), blob_path)
    print(json.dumps({"cpu": time.process_time() - cpu, "nodes": len(fabric), "rss": _rss()}))


def _rss() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "bench.ibpublish", *args], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def measure(hcas: int, tmp: Path) -> dict[str, object]:
    fabric = build(SIZED[hcas])
    text = fabric.capture_text()
    capture, blob = tmp / f"{hcas}.ibnetdiscover", tmp / f"{hcas}.xz"
    capture.write_text(text)
    wrote = _child("--collector", str(capture), str(blob))
    read = _child("--operator", str(blob))
    published = blob.stat().st_size
    return {"HCAs": f"{hcas:,}", "switches": sum(n.kind == "Switch" for n in fabric.nodes.values()),
            "capture MB": round(len(text) / 1e6, 1), "compact JSON MB": round(wrote["json"] / 1e6, 2),
            "published (xz) bytes": f"{published:,}", "shards": -(-published // SHARD_BYTES),
            "gzip -9 bytes": f"{wrote['gzip']:,}", "capture xz bytes": f"{len(lzma.compress(text.encode())):,}",
            "collector parse CPU s": round(wrote["parse_cpu"], 1), "collector xz CPU s": round(wrote["xz_cpu"], 1),
            "collector peak RSS MB": round(wrote["rss"]), "operator read CPU s": round(read["cpu"], 2),
            "operator peak RSS MB": round(read["rss"])}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--collector", nargs=2, metavar=("CAPTURE", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--operator", metavar="BLOB", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.collector:
        collector_side(*args.collector)
        return
    if args.operator:
        operator_side(args.operator)
        return
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(hcas, Path(tmp)) for hcas in sorted(SIZED)]
    print_table("InfiniBand: the published fabric", rows)


if __name__ == "__main__":
    main()
