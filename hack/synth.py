"""Synthetic GPU clusters with known topology, for the example, the tests and the benchmarks.

`gke_cluster(...)` returns Node objects as `kubectl get nodes -o json` shows them, with GKE's topology
labels, GPU allocatable and taints, and the ground truth (node -> (block, subblock, host)).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

GKE_KEYS = ("cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock",
            "cloud.google.com/gce-topology-host")


@dataclass(frozen=True)
class PoolSpec:
    machine: str
    accelerator: str
    gpus: int
    cpu: str
    memory: str


H100 = PoolSpec("a3-megagpu-8g", "nvidia-h100-mega-80gb", 8, "207", "1850Gi")
B200 = PoolSpec("a4-highgpu-8g", "nvidia-b200", 8, "221", "3800Gi")


def _id(*parts: object) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:32]


def node_object(name: str, labels: dict[str, str], pool: PoolSpec, zone: str, ready: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name,
            "node.kubernetes.io/instance-type": pool.machine,
            "topology.kubernetes.io/zone": zone,
            "cloud.google.com/gke-accelerator": pool.accelerator,
            "cloud.google.com/gke-nodepool": pool.machine.split("-")[0] + "-pool",
            **labels}},
        "spec": {"providerID": f"gce://example-project/{zone}/{name}",
                 "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        "status": {
            "allocatable": {"cpu": pool.cpu, "memory": pool.memory, "nvidia.com/gpu": str(pool.gpus),
                            "pods": "110", "ephemeral-storage": "1000Gi"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def gke_cluster(blocks: int, subblocks: int, hosts: int, pools: tuple[PoolSpec, ...] = (H100, B200),
                zone: str = "us-central1-b") -> tuple[list[dict[str, Any]], dict[str, tuple[str, str, str]]]:
    """`blocks` x `subblocks` x `hosts` nodes; each block is one pool, cycling through `pools`."""
    nodes, truth = [], {}
    for b in range(blocks):
        pool = pools[b % len(pools)]
        block = _id("block", b)
        for s in range(subblocks):
            sub = _id("subblock", b, s)
            for h in range(hosts):
                name = f"gke-{pool.machine.split('-')[0]}-b{b:02d}-s{s:02d}-n{h:03d}"
                host = _id("host", b, s, h)
                truth[name] = (block, sub, host)
                nodes.append(node_object(name, dict(zip(GKE_KEYS, (block, sub, host))), pool, zone))
    return nodes, truth


def node_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": items}
