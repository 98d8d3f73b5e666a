"""Annotated job manifests with what Kueue v0.19.2 does when they are created, kept as data.

`verdict` is Kueue's answer at default feature gates, worked out from its webhooks and Workload schema:
- `accepted`: the object is created and Kueue makes its Workload;
- `rejected`: the API server or Kueue's webhook refuses the object (`origin` names the rule);
- `no-workload`: the object is created, but the Workload Kueue builds breaks its CRD schema, so it is
  never created and the job stays suspended.
`topolabel job check` must reach the same verdict (tests/test_tas_lint.py); once the real Kueue runs in
the tests, the same table is created on it (`kubectl create --dry-run=server` reaches the webhooks).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

from kueue_config.tas.lint import Finding
from testkit.tas_cluster import pod_template
from testkit.tas_scenarios import (BLOCK, GROUP, LAYERS, PREF, QUEUE, RACK, REQ, SLICE_LEVEL, SLICE_SIZE, UNC, job,
                                 jobset, lws, pytorchjob)

HOST = "kubernetes.io/hostname"
ACCEPTED, REJECTED, NO_WORKLOAD = "accepted", "rejected", "no-workload"
TAS_VALIDATION = "jobframework.ValidateTASPodSetRequest"
UPPER_BOUND = "jobframework.ValidateSliceSizeAnnotationUpperBound"
GROUPING = "jobframework.ValidatePodSetGroupingTopology"
LAYER_RULES = "jobframework.validateSliceRequiredTopologyConstraintsAnnotation"


@dataclass(frozen=True)
class Manifest:
    name: str
    obj: dict[str, Any]
    verdict: str
    origin: str = ""


def verdict(findings: Sequence[Finding]) -> str:
    """`job check`'s findings as Kueue's verdict: any rejection, else a Workload that cannot be created, else accepted."""
    effects = {f.effect for f in findings if f.severity == "error"}
    return REJECTED if "rejected" in effects else NO_WORKLOAD if "no-workload" in effects else ACCEPTED


def layers(*pairs: tuple[str, int]) -> str:
    return json.dumps([{"topology": t, "size": s} for t, s in pairs])


def raycluster(head: dict[str, str], groups: list[tuple[str, int, dict[str, str]]]) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rc", "namespace": "team", "labels": {QUEUE: "gpu"}},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": pod_template(0, head)},
                     "workerGroupSpecs": [{"groupName": name, "replicas": replicas, "rayStartParams": {},
                                           "template": pod_template(annotations=ann)}
                                          for name, replicas, ann in groups]}}


def elastic(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    return obj


LONG_KEY = "example.com/" + "x" * 55  # a valid label key of 67 characters
MANIFESTS: list[Manifest] = [
    # modes
    Manifest("required block", job(8, {REQ: BLOCK}), ACCEPTED),
    Manifest("preferred rack", job(8, {PREF: RACK}), ACCEPTED),
    Manifest("unconstrained true", job(8, {UNC: "true"}), ACCEPTED),
    Manifest("unconstrained T (Go's ParseBool)", job(8, {UNC: "T"}), ACCEPTED),
    Manifest("unconstrained yes", job(8, {UNC: "yes"}), REJECTED, f"{TAS_VALIDATION}: must be a boolean value"),
    Manifest("required and preferred", job(8, {REQ: BLOCK, PREF: RACK}), REJECTED,
             f"{TAS_VALIDATION}: must not contain more than one topology annotation"),
    Manifest("level not a label key", job(8, {REQ: "Block Level"}), REJECTED, f"{TAS_VALIDATION}: ValidateLabelName"),
    Manifest("level with an empty prefix", job(8, {REQ: "/block"}), REJECTED, f"{TAS_VALIDATION}: ValidateLabelName"),
    Manifest("level key over 63 characters", job(8, {REQ: LONG_KEY}), NO_WORKLOAD,
             "Workload schema: topologyRequest.required maxLength 63"),
    # single-layer slices
    Manifest("slices of 4 within racks", job(8, {REQ: BLOCK, SLICE_LEVEL: RACK, SLICE_SIZE: "4"}), ACCEPTED),
    Manifest("slice size +4 (Go's ParseInt takes a sign)", job(8, {REQ: BLOCK, SLICE_LEVEL: RACK, SLICE_SIZE: "+4"}),
             ACCEPTED),
    Manifest("slice size with a space", job(8, {REQ: BLOCK, SLICE_LEVEL: RACK, SLICE_SIZE: " 4"}), REJECTED,
             f"{TAS_VALIDATION}: must be a numeric value"),
    Manifest("slice size 4_0", job(8, {REQ: BLOCK, SLICE_LEVEL: RACK, SLICE_SIZE: "4_0"}), REJECTED,
             f"{TAS_VALIDATION}: must be a numeric value"),
    Manifest("slice size 0", job(8, {REQ: BLOCK, SLICE_LEVEL: RACK, SLICE_SIZE: "0"}), REJECTED,
             f"{TAS_VALIDATION}: must be greater than or equal to 1"),
    Manifest("slice size above the pod count", job(8, {REQ: BLOCK, SLICE_LEVEL: RACK, SLICE_SIZE: "16"}), REJECTED,
             f"{UPPER_BOUND}: must not be greater than pod set count"),
    Manifest("slice size that does not divide the pods", job(8, {REQ: BLOCK, SLICE_LEVEL: RACK, SLICE_SIZE: "3"}),
             ACCEPTED, "accepted; the last 2 pods never start"),
    Manifest("slice level without a size", job(8, {REQ: BLOCK, SLICE_LEVEL: RACK}), REJECTED,
             f"{TAS_VALIDATION}: must be set when slice topology is specified"),
    Manifest("slice size without a level", job(8, {REQ: BLOCK, SLICE_SIZE: "4"}), REJECTED,
             f"{TAS_VALIDATION}: may not be set when slice topology is not specified"),
    Manifest("slices only, no mode", job(8, {SLICE_LEVEL: RACK, SLICE_SIZE: "4"}), ACCEPTED),
    Manifest("slice size not a string", job(8, {REQ: BLOCK, SLICE_LEVEL: RACK, SLICE_SIZE: 4}), REJECTED,
             "API server: annotations are a map of strings"),
    # multi-layer slices
    Manifest("multi-layer rack 4, host 2", job(8, {REQ: BLOCK, LAYERS: layers((RACK, 4), (HOST, 2))}), ACCEPTED),
    Manifest("multi-layer, keys in another case (Go's JSON)", job(8, {REQ: BLOCK, LAYERS: json.dumps(
        [{"Topology": RACK, "SIZE": 4}])}), ACCEPTED),
    Manifest("multi-layer not JSON", job(8, {REQ: BLOCK, LAYERS: "rack=4"}), REJECTED,
             f"{LAYER_RULES}: must be a valid JSON array"),
    Manifest("multi-layer size 4.0", job(8, {REQ: BLOCK, LAYERS: '[{"topology": "example.com/rack", "size": 4.0}]'}),
             REJECTED, f"{LAYER_RULES}: must be a valid JSON array (cannot unmarshal number 4.0 into int32)"),
    Manifest("multi-layer empty", job(8, {REQ: BLOCK, LAYERS: "[]"}), REJECTED,
             f"{LAYER_RULES}: between 1 and 3 entries"),
    Manifest("multi-layer four layers", job(8, {REQ: BLOCK, LAYERS: layers(("a.io/l1", 8), ("a.io/l2", 4),
                                                                          ("a.io/l3", 2), (HOST, 1))}),
             REJECTED, f"{LAYER_RULES}: between 1 and 3 entries"),
    Manifest("multi-layer 3 does not divide 4", job(8, {REQ: BLOCK, LAYERS: layers((RACK, 4), (HOST, 3))}), REJECTED,
             f"{LAYER_RULES}: must evenly divide the parent layer size"),
    Manifest("multi-layer first size above the pods", job(8, {REQ: BLOCK, LAYERS: layers((RACK, 16), (HOST, 2))}),
             REJECTED, f"{UPPER_BOUND}: must not be greater than pod set count"),
    Manifest("multi-layer size 0", job(8, {REQ: BLOCK, LAYERS: layers((RACK, 0))}), REJECTED,
             f"{LAYER_RULES}: must be greater than or equal to 1"),
    Manifest("multi-layer same level twice", job(8, {REQ: BLOCK, LAYERS: layers((RACK, 4), (RACK, 2))}), REJECTED,
             f"{LAYER_RULES}: Duplicate value"),
    Manifest("multi-layer beside a slice size", job(8, {REQ: BLOCK, LAYERS: layers((RACK, 4)), SLICE_SIZE: "4"}),
             REJECTED, f"{LAYER_RULES}: may not be set when slice size is specified"),
    Manifest("multi-layer beside a group name", job(8, {REQ: BLOCK, LAYERS: layers((RACK, 4)), GROUP: "g"}),
             REJECTED, f"{LAYER_RULES}: group name may not be set"),
    # group names on a batch Job (its webhook does not check groups)
    Manifest("group on a Job's only PodSet", job(8, {REQ: BLOCK, GROUP: "g"}), ACCEPTED),
    Manifest("group name a number", job(8, {REQ: BLOCK, GROUP: "123"}), REJECTED, f"{TAS_VALIDATION}: must not be "
             "a number"),
    Manifest("group name +1 (not a number to ParseUint)", job(8, {REQ: BLOCK, GROUP: "+1"}), ACCEPTED),
    Manifest("group beside slices", job(8, {REQ: BLOCK, GROUP: "g", SLICE_LEVEL: RACK, SLICE_SIZE: "4"}), REJECTED,
             f"{TAS_VALIDATION}: may not be set when slice size is specified"),
    Manifest("group without required or preferred", job(8, {UNC: "true", GROUP: "g"}), REJECTED,
             f"{TAS_VALIDATION}: may not be set when neither preferred nor required"),
    Manifest("group name of 256 characters", job(8, {REQ: BLOCK, GROUP: "g" * 256}), ACCEPTED),
    Manifest("group name of 257 characters", job(8, {REQ: BLOCK, GROUP: "g" * 257}), NO_WORKLOAD,
             "Workload schema: topologyRequest.podSetGroupName maxLength 256"),
    # elastic jobs
    Manifest("elastic Job with required topology", elastic(job(8, {REQ: BLOCK})), REJECTED,
             "job webhook: required topology is not supported with elastic jobs"),
    Manifest("elastic Job unconstrained", elastic(job(8, {UNC: "true"})), ACCEPTED),
    # groups where the webhook checks them
    Manifest("JobSet leader and workers grouped", jobset([("leader", 1, 1, {REQ: RACK, GROUP: "lw"}),
                                                          ("workers", 1, 3, {REQ: RACK, GROUP: "lw"})]), ACCEPTED),
    Manifest("JobSet group of three", jobset([("a", 1, 1, {REQ: RACK, GROUP: "g"}), ("b", 1, 3, {REQ: RACK, GROUP: "g"}),
                                              ("c", 1, 2, {REQ: RACK, GROUP: "g"})]), REJECTED,
             f"{GROUPING}: groups of exactly 2 pod sets"),
    Manifest("JobSet group of 2 and 3 pods", jobset([("a", 1, 2, {REQ: RACK, GROUP: "g"}),
                                                     ("b", 1, 3, {REQ: RACK, GROUP: "g"})]), REJECTED,
             f"{GROUPING}: at least one pod set has only 1 replica"),
    Manifest("JobSet group with different levels", jobset([("a", 1, 1, {REQ: RACK, GROUP: "g"}),
                                                           ("b", 1, 3, {REQ: BLOCK, GROUP: "g"})]), REJECTED,
             f"{GROUPING}: topology consistent"),
    Manifest("JobSet group, required beside preferred", jobset([("a", 1, 1, {REQ: RACK, GROUP: "g"}),
                                                                ("b", 1, 3, {PREF: RACK, GROUP: "g"})]), REJECTED,
             f"{GROUPING}: topology consistent"),
    Manifest("LeaderWorkerSet leader and workers grouped", lws(1, 4, {REQ: RACK, GROUP: "lw"}), ACCEPTED),
    Manifest("RayCluster head and one worker group grouped", raycluster({REQ: RACK, GROUP: "g"},
                                                                        [("gpu", 4, {REQ: RACK, GROUP: "g"})]),
             ACCEPTED),
    Manifest("RayCluster two worker groups of 2 grouped", raycluster({}, [("a", 2, {REQ: RACK, GROUP: "g"}),
                                                                         ("b", 2, {REQ: RACK, GROUP: "g"})]),
             REJECTED, f"{GROUPING}: at least one pod set has only 1 replica"),
    # groups where the webhook does not check them (Kubeflow jobs)
    Manifest("PyTorchJob master and workers grouped", pytorchjob(1, 3, {REQ: BLOCK, GROUP: "g"},
                                                                 {REQ: BLOCK, GROUP: "g"}), ACCEPTED),
    Manifest("PyTorchJob group of 2 and 3 pods", pytorchjob(2, 3, {REQ: BLOCK, GROUP: "g"}, {REQ: BLOCK, GROUP: "g"}),
             ACCEPTED, "accepted; the scheduler places 1 of the 2 masters, the other never starts"),
    Manifest("PyTorchJob group with different levels", pytorchjob(1, 3, {REQ: RACK, GROUP: "g"},
                                                                  {REQ: BLOCK, GROUP: "g"}), ACCEPTED,
             "accepted; both are placed by the workers' request"),
]
