"""Benchmark: the gcp source for 10,000 instances over several zones, against the local Compute API.

For each scenario: the list calls made (counted by the server), the bound (one call per zone page of the
cluster's nodes), what listing whole zones unfiltered would take, the response bytes (instances are
GKE-sized, ~14 KB each, before the field mask), wall time and the client's CPU time. The server runs in its own process so it
does not share the client's interpreter lock.
Run: python -m bench.gcp [--instances N]
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import random
import string
import time
from dataclasses import dataclass

from bench.table import print_table
from labeler.io.nodes import Node
from labeler.topology.model import Discovery
from providers.base import SourceContext
from providers.gcp import PAGE_SIZE, discover, node_refs, plan_calls


@dataclass(frozen=True)
class Scenario:
    name: str
    zones: int
    names: str  # "gke": pool names sharing a stem per zone; "random": unrelated 20-40 character names
    others: int = 0  # instances in the same zones that are not cluster nodes


SCENARIOS = (
    Scenario("GKE pools, 4 zones", 4, "gke"),
    Scenario("GKE pools, 4 zones, among 30,000 other VMs", 4, "gke", others=30_000),
    Scenario("GKE pools, 40 zones", 40, "gke"),
    Scenario("unrelated names, 4 zones", 4, "random"),
)


def cluster_names(s: Scenario, count: int) -> list[tuple[str, str]]:
    """(zone, name) for the cluster's instances, spread evenly over the zones."""
    rng = random.Random(1)
    out = []
    for i in range(count):
        zone = f"us-central1-z{i % s.zones:02d}"
        if s.names == "gke":
            name = f"gke-train-a3-pool-{i % s.zones:02d}c0ffee-{i // s.zones:04x}"
        else:
            name = rng.choice(string.ascii_lowercase) + "".join(
                rng.choice(string.ascii_lowercase + string.digits) for _ in range(rng.randint(19, 39)))
        out.append((zone, name))
    return out


def serve(s: Scenario, count: int, conn) -> None:
    """Child process: build the instances, serve them, report the URL, then the call count on request."""
    from testkit.compute_server import ComputeServer, instance

    bodies = [instance("proj-bench", zone, name, {"cluster": "c1", "block": f"b{i // 512}",
                                                   "subblock": f"s{i // 64}", "host": name}, bulk=True)
              for i, (zone, name) in enumerate(cluster_names(s, count))]
    bodies += [instance("proj-bench", f"us-central1-z{i % s.zones:02d}", f"other-vm-{i:06d}", bulk=True)
               for i in range(s.others)]
    with ComputeServer(bodies) as server:
        conn.send(server.url)
        conn.recv()
        conn.send((server.count(), server.count(aggregated=True), server.bytes_sent))


def run(s: Scenario, count: int) -> dict[str, object]:
    parent, child = mp.Pipe()
    proc = mp.Process(target=serve, args=(s, count, child), daemon=True)
    proc.start()
    url = parent.recv()
    nodes = [Node(name, provider_id=f"gce://proj-bench/{zone}/{name}") for zone, name in cluster_names(s, count)]
    start, cpu = time.perf_counter(), time.process_time()
    found = discover(SourceContext(nodes=nodes, options={"api_endpoint": url, "anonymous": True}))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    parent.send("stop")
    calls, aggregated, sent = parent.recv()
    proc.join()
    per_zone = math.ceil(count / s.zones)
    refs = node_refs(nodes, Discovery("gcp", ()))
    return {
        "scenario": s.name, "nodes": f"{count:,}", "instances in project": f"{count + s.others:,}",
        "list calls": f"{calls} ({'aggregated' if aggregated else 'zonal'})",
        "planned": len(plan_calls(refs.values())),
        "bound: zone pages": s.zones * math.ceil(per_zone / PAGE_SIZE),
        "unfiltered zone lists": s.zones * math.ceil((per_zone + s.others / s.zones) / PAGE_SIZE),
        "placed": f"{len(found.paths):,}", "response MB": f"{sent / 1e6:.1f}", "seconds": f"{seconds:.2f}",
        "client CPU s": f"{cpu:.2f}",
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--instances", type=int, default=10_000)
    args = parser.parse_args()
    from google.cloud import compute_v1  # noqa: F401  (import once, outside the timings)

    rows = [run(s, args.instances) for s in SCENARIOS]
    print_table(f"gcp source, {args.instances:,} instances", rows)


if __name__ == "__main__":
    main()
