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


CONDITIONS = ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable", "Ready")


def full_status(item: dict[str, Any], images: int = 4) -> dict[str, Any]:
    """The node as a live cluster serves it: uid, annotations, capacity, every condition with its times and
    messages, addresses, nodeInfo and cached images (about 2.9 KB of JSON more per node, none of it topology)."""
    name, ts = item["metadata"]["name"], "2026-01-01T00:00:00Z"
    meta = {**item["metadata"], "uid": _id("uid", name), "resourceVersion": str(int(_id("rv", name)[:7], 16)),
            "creationTimestamp": ts, "annotations": {
                "node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "container.googleapis.com/instance_id": str(int(_id("instance", name)[:15], 16))}}
    status = item["status"]
    conditions = [{"type": t, "status": "True" if t == "Ready" else "False", "lastHeartbeatTime": ts,
                   "lastTransitionTime": ts, "reason": f"Kubelet{t}", "message": f"kubelet reports {t}"}
                  for t in CONDITIONS]
    return {**item, "metadata": meta, "spec": {**item["spec"], "podCIDR": "10.0.0.0/24", "podCIDRs": ["10.0.0.0/24"]},
            "status": {**status, "capacity": dict(status["allocatable"]), "conditions": conditions,
                       "addresses": [{"type": "InternalIP", "address": "10.1.2.3"},
                                     {"type": "Hostname", "address": name}],
                       "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                       "nodeInfo": {"machineID": _id("machine", name), "systemUUID": _id("system", name),
                                    "bootID": _id("boot", name), "kernelVersion": "6.6.0-gke",
                                    "osImage": "Container-Optimized OS from Google",
                                    "containerRuntimeVersion": "containerd://1.7.24", "kubeletVersion": "v1.33.1",
                                    "kubeProxyVersion": "v1.33.1", "operatingSystem": "linux",
                                    "architecture": "amd64"},
                       "images": [{"names": [f"us-docker.pkg.dev/gke-release/gke/image-{i}@sha256:{_id('img', i) * 2}",
                                             f"us-docker.pkg.dev/gke-release/gke/image-{i}:v1.{i}"],
                                   "sizeBytes": 100_000_000 + i} for i in range(images)]}}
