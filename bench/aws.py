"""Benchmark: the aws source on 10,000 instances over 3 regions against moto (DescribeInstanceTopology added).

moto runs in this process (testkit/moto_topology.py); `topolabel discover --source aws` runs in a child
process so client and server do not share one interpreter lock, measured by bench.measure (GNU time). One row
per server page size: 100 (one page per batch of 100 ids) and 20 (the API's documented default page size, the
worst case for paging).
"discover s" is the child's wall time, mostly moto's work serving it; "client CPU s" and "peak RSS MB"
are the child's, Python start-up and imports included.
Run: python -m bench.aws [--instances N] [--regions R]
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import tempfile
import time
from pathlib import Path

from bench.measure import load, measure, topolabel
from bench.table import print_table
from testkit.moto_topology import TopologyServer

REGIONS = ("us-east-1", "us-west-2", "eu-west-1", "ap-northeast-1", "eu-central-1")
LAUNCH = 1000  # instances per run_instances call while setting up


def cluster(server: TopologyServer, instances: int, regions: tuple[str, ...]) -> list[dict[str, object]]:
    """Launch and place the instances (one in ten a 4-layer p6-b200) and return their Node objects."""
    items: list[dict[str, object]] = []
    for r, region in enumerate(regions):
        count = instances // len(regions) + (r < instances % len(regions))
        for start in range(0, count, LAUNCH):
            size = min(LAUNCH, count - start)
            deep = size // 10
            for kind, n, layers in (("p6-b200.48xlarge", deep, 4), ("p5.48xlarge", size - deep, 3)):
                if not n:
                    continue
                ids = server.launch(region, n, kind)
                server.place_tree(ids, f"{region}-{start}-{layers}", layers=layers)
                items += [{"kind": "Node", "metadata": {"name": f"{region}-{i}", "labels": {}},
                           "spec": {"providerID": f"aws:///{region}a/{i}"}} for i in ids]
    return items


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--instances", type=int, default=10_000)
    parser.add_argument("--regions", type=int, default=3, choices=range(1, len(REGIONS) + 1))
    args = parser.parse_args()
    regions = REGIONS[:args.regions]
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    env = dict(os.environ, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench")
    os.environ.update(env)
    for key in ("AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_MAX_ATTEMPTS"):
        os.environ.pop(key, None)
        env.pop(key, None)
    rows = []
    with TopologyServer() as server, tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        items = cluster(server, args.instances, regions)
        setup = time.perf_counter() - start
        nodes_file, snap_file = Path(tmp) / "nodes.json", Path(tmp) / "snap.json"
        nodes_file.write_text(json.dumps({"kind": "List", "items": items}))
        per_region = {r: sum(1 for i in items if str(i["metadata"]["name"]).startswith(r + "-")) for r in regions}
        bound = sum(math.ceil(n / 100) for n in per_region.values())
        for page in (100, 20):
            server.fabric.page_size = page
            server.fabric.calls.clear()
            argv = ["discover", "--source", "aws", "--nodes", str(nodes_file), "--endpoint-url", server.url,
                    "-o", "json"]
            run = measure(topolabel(*argv), env=env, stdout=snap_file)
            placed = len(json.loads(snap_file.read_text())["nodes"])
            rows.append({"instances": len(items), "regions": len(regions), "page size": page,
                         "placed": placed, "calls": sum(server.calls.values()),
                         "calls per region": " / ".join(str(server.calls[r]) for r in regions),
                         "ceil(n/100) bound": bound, "discover s": f"{run.wall:.2f}",
                         "client CPU s": f"{run.cpu:.2f}", "peak RSS MB": f"{run.rss_mb:.0f}"})
    print_table(f"aws source against moto (setup: {setup:.0f} s to launch and place; {load()})", rows)


if __name__ == "__main__":
    main()
