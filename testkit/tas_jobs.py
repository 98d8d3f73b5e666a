"""One manifest per supported workload kind (with comments, to check they survive), and minimal schemas.

The schemas are structural: they pin the paths from the top object to each pod template, that metadata
labels and annotations are string maps, and the integer fields Kueue counts pods from. They stand in for
the upstream CRDs, which are too large to vendor.
"""

from __future__ import annotations

from typing import Any

JOB = """\
# a plain Job
apiVersion: batch/v1
kind: Job
metadata:
  name: train   # the name
  namespace: team
spec:
  parallelism: 4
  completions: 6
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: train
        image: train:1
        resources:
          limits: {nvidia.com/gpu: 8}
"""

JOBSET = """\
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: js
  namespace: team
  annotations:
    kueue.x-k8s.io/podset-required-topology: example.com/block   # wrong place
spec:
  replicatedJobs:
  - name: workers   # 3 Jobs of 4 pods
    replicas: 3
    template:
      metadata:
        annotations:
          kueue.x-k8s.io/podset-preferred-topology: example.com/rack
      spec:
        parallelism: 4
        completions: 4
        template:
          spec:
            containers:
            - name: w
              image: train:1
              resources: {limits: {nvidia.com/gpu: 8}}
"""

PYTORCHJOB = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: pt
  namespace: team
spec:
  pytorchReplicaSpecs:
    Worker:   # listed first on purpose: Kueue orders Master, Worker
      replicas: 3
      template:
        spec:
          containers:
          - {name: pytorch, image: train:1, resources: {limits: {nvidia.com/gpu: 8}}}
    Master:
      replicas: 1
      template:
        metadata:
          labels: {app: pt}
        spec:
          containers:
          - {name: pytorch, image: train:1, resources: {limits: {nvidia.com/gpu: 8}}}
"""

LEADERWORKERSET = """\
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: serve
  namespace: team
spec:
  replicas: 2        # two groups, two Workloads
  leaderWorkerTemplate:
    size: 4          # leader + 3 workers
    leaderTemplate:
      spec:
        containers:
        - {name: leader, image: vllm:1, resources: {limits: {nvidia.com/gpu: 8}}}
    workerTemplate:
      spec:
        containers:
        - {name: worker, image: vllm:1, resources: {limits: {nvidia.com/gpu: 8}}}
"""

RAYCLUSTER = """\
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: rc
  namespace: team
spec:
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
        - {name: head, image: ray:2, resources: {requests: {cpu: "4"}}}
  workerGroupSpecs:
  - groupName: GPU-Workers
    replicas: 2
    numOfHosts: 2     # multi-host: 2 x 2 pods
    rayStartParams: {}
    template:
      spec:
        containers:
        - {name: worker, image: ray:2, resources: {limits: {nvidia.com/gpu: 8}}}
"""

RAYJOB = """\
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: rj
  namespace: team
spec:
  entrypoint: python train.py
  rayClusterSpec:
    headGroupSpec:
      rayStartParams: {}
      template:
        spec:
          containers:
          - {name: head, image: ray:2}
    workerGroupSpecs:
    - groupName: gpu
      replicas: 4
      rayStartParams: {}
      template:
        spec:
          containers:
          - {name: worker, image: ray:2, resources: {limits: {nvidia.com/gpu: 8}}}
"""

# kind -> (manifest, [(PodSet name, pods)], Workloads) worked out from Kueue's rules by hand.
KINDS: dict[str, tuple[str, list[tuple[str, int]], int]] = {
    "Job": (JOB, [("main", 4)], 1),                      # min(parallelism 4, completions 6)
    "JobSet": (JOBSET, [("workers", 12)], 1),            # 3 replicas x 4
    "PyTorchJob": (PYTORCHJOB, [("master", 1), ("worker", 3)], 1),
    "LeaderWorkerSet": (LEADERWORKERSET, [("leader", 1), ("worker", 3)], 2),
    "RayCluster": (RAYCLUSTER, [("head", 1), ("gpu-workers", 4)], 1),
    "RayJob": (RAYJOB, [("head", 1), ("gpu", 4), ("submitter", 1)], 1),  # default submitter in K8sJobMode
}

_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_META = {"type": "object", "properties": {"name": {"type": "string"}, "namespace": {"type": "string"},
                                          "labels": _STRING_MAP, "annotations": _STRING_MAP}}
_POD_TEMPLATE = {"type": "object", "required": ["spec"],
                 "properties": {"metadata": _META,
                                "spec": {"type": "object", "required": ["containers"],
                                         "properties": {"containers": {"type": "array", "minItems": 1}}}}}
_INT = {"type": "integer", "minimum": 0}
_JOB_SPEC = {"type": "object", "required": ["template"],
             "properties": {"parallelism": _INT, "completions": _INT, "template": _POD_TEMPLATE}}
_RAY_CLUSTER_SPEC = {"type": "object", "required": ["headGroupSpec"], "properties": {
    "headGroupSpec": {"type": "object", "required": ["template"], "properties": {"template": _POD_TEMPLATE}},
    "workerGroupSpecs": {"type": "array", "items": {
        "type": "object", "required": ["groupName", "template"],
        "properties": {"replicas": _INT, "numOfHosts": _INT, "template": _POD_TEMPLATE}}}}}


def _top(api_version: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": ["apiVersion", "kind", "metadata", "spec"],
            "properties": {"apiVersion": {"const": api_version}, "kind": {"const": kind}, "metadata": _META,
                           "spec": spec}}


SCHEMAS: dict[str, dict[str, Any]] = {
    "Job": _top("batch/v1", "Job", _JOB_SPEC),
    "JobSet": _top("jobset.x-k8s.io/v1alpha2", "JobSet", {"type": "object", "required": ["replicatedJobs"],
        "properties": {"replicatedJobs": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["name", "template"],
            "properties": {"replicas": _INT, "template": {"type": "object", "required": ["spec"], "properties": {
                "metadata": _META, "spec": _JOB_SPEC}}}}}}}),
    "PyTorchJob": _top("kubeflow.org/v1", "PyTorchJob", {"type": "object", "required": ["pytorchReplicaSpecs"],
        "properties": {"pytorchReplicaSpecs": {"type": "object", "additionalProperties": {
            "type": "object", "required": ["template"],
            "properties": {"replicas": _INT, "template": _POD_TEMPLATE}}}}}),
    "LeaderWorkerSet": _top("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", {
        "type": "object", "required": ["leaderWorkerTemplate"], "properties": {
            "replicas": _INT, "leaderWorkerTemplate": {"type": "object", "required": ["workerTemplate"], "properties": {
                "size": {"type": "integer", "minimum": 1}, "leaderTemplate": _POD_TEMPLATE,
                "workerTemplate": _POD_TEMPLATE}}}}),
    "RayCluster": _top("ray.io/v1", "RayCluster", _RAY_CLUSTER_SPEC),
    "RayJob": _top("ray.io/v1", "RayJob", {"type": "object", "required": ["rayClusterSpec"], "properties": {
        "rayClusterSpec": _RAY_CLUSTER_SPEC, "submitterPodTemplate": _POD_TEMPLATE}}),
}
