"""Small clusters for the TAS tests: Node and Pod objects as the API serves them, and job manifests.

Every cluster is small enough that the expected answers in the tests are worked out by hand.
"""

from __future__ import annotations

from typing import Any

BLOCK, RACK, HOST = "example.com/block", "example.com/rack", "kubernetes.io/hostname"
GPU = "nvidia.com/gpu"
GPU_TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}


def node(name: str, block: str | None = None, rack: str | None = None, gpus: int = 8, cpu: str = "64",
         ready: bool = True, taints: list[dict[str, str]] | None = None, unschedulable: bool = False,
         labels: dict[str, str] | None = None, max_pods: int = 110) -> dict[str, Any]:
    all_labels = {HOST: name, **(labels or {})}
    if block:
        all_labels[BLOCK] = block
    if rack:
        all_labels[RACK] = rack
    spec: dict[str, Any] = {"taints": taints or []}
    if unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": all_labels}, "spec": spec,
            "status": {"allocatable": {"cpu": cpu, "memory": "512Gi", GPU: str(gpus), "pods": str(max_pods)},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pod(name: str, node_name: str | None, gpus: int, phase: str = "Running",
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    # an extended resource needs its limit equal to its request, or the API server refuses the pod
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", GPU: str(gpus)},
                                                                       "limits": {GPU: str(gpus)}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "team", "annotations": annotations or {}},
            "spec": spec, "status": {"phase": phase}}


def pod_template(gpus: int = 8, annotations: dict[str, str] | None = None, tolerate: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "train", "image": "train:1",
                                            "resources": {"limits": {GPU: str(gpus)}}}]}
    if tolerate:
        spec["tolerations"] = [dict(GPU_TOLERATION)]
    meta: dict[str, Any] = {"labels": {"app": "train"}}
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": spec}


def batch_job(pods: int, annotations: dict[str, str] | None = None, gpus: int = 8,
              queue: str | None = "gpu") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "train", "namespace": "team"}
    if queue:
        meta["labels"] = {"kueue.x-k8s.io/queue-name": queue}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"parallelism": pods, "completions": pods, "template": pod_template(gpus, annotations)}}


def node_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": items}


def kueue_objects(levels: list[str], flavor_labels: dict[str, str] | None = None,
                  tolerations: list[dict[str, str]] | None = None) -> list[dict[str, Any]]:
    """A Topology, one TAS flavor, a ClusterQueue and LocalQueue `gpu` in namespace `team`."""
    api = "kueue.x-k8s.io/v1beta2"
    flavor_spec: dict[str, Any] = {"nodeLabels": flavor_labels or {}, "topologyName": "topo"}
    if tolerations:
        flavor_spec["tolerations"] = tolerations
    return [
        {"apiVersion": api, "kind": "Topology", "metadata": {"name": "topo"},
         "spec": {"levels": [{"nodeLabel": k} for k in levels]}},
        {"apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": "gpus"}, "spec": flavor_spec},
        {"apiVersion": api, "kind": "ClusterQueue", "metadata": {"name": "cq"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": [GPU], "flavors": [
             {"name": "gpus", "resources": [{"name": GPU, "nominalQuota": "1000"}]}]}]}},
        {"apiVersion": api, "kind": "LocalQueue", "metadata": {"name": "gpu", "namespace": "team"},
         "spec": {"clusterQueue": "cq"}},
    ]
