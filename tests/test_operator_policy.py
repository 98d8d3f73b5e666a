"""manifests/admission-policy.yaml, the operator's ValidatingAdmissionPolicy, evaluated with a CEL interpreter
(testkit/celpolicy.py) for every rule; tests/test_operator_policy_apiserver.py proves it on the real API server.

Issue 32, S2: the operator's token could cordon, taint (NoExecute) and rewrite kubernetes.io/hostname on any
Node, and (S4) delete or patch Kueue objects it did not create: RBAC grants `patch nodes` and Kueue kinds
whole. The policy allows label keys topolabel owns, its own annotation, taints under topolabel.dev/ and the
FabricHealthy condition (issue 28's isolation), and Kueue objects labelled managed-by=topolabel.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import pytest
import yaml

from testkit.celpolicy import Policy
from testkit.environment import ROOT

DOCS = list(yaml.safe_load_all((ROOT / "manifests" / "admission-policy.yaml").read_text()))
SPEC = next(d for d in DOCS if d["kind"] == "ValidatingAdmissionPolicy")
POLICY = Policy(SPEC)
USER = "system:serviceaccount:topolabel-system:topolabel"
MANAGED = {"app.kubernetes.io/managed-by": "topolabel"}


def request(operation: str = "UPDATE", resource: str = "nodes", sub: str | None = None, name: str = "gpu-1",
            user: str = USER) -> dict[str, Any]:
    found = {"operation": operation, "name": name, "userInfo": {"username": user},
             "resource": {"group": "" if resource == "nodes" else "kueue.x-k8s.io", "resource": resource}}
    if sub:
        found["subResource"] = sub
    return found


def node() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "gpu-1", "labels": {"kubernetes.io/hostname": "gpu-1", "topolabel.dev/block": "b1"},
                         "annotations": {"topolabel.dev/managed-labels": "topolabel.dev/block",
                                         "topolabel.dev/ib-node-guids": "mlx5_0=0x1"}},
            "spec": {"providerID": "gce://p/z/gpu-1", "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
            "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def changed(edit: Callable[[dict[str, Any]], None]) -> tuple[dict[str, Any], dict[str, Any]]:
    old = node()
    new = copy.deepcopy(old)
    edit(new)
    return old, new


def labels(**values: str | None) -> Callable[[dict[str, Any]], None]:
    def edit(n: dict[str, Any]) -> None:
        for key, value in values.items():
            key = key.replace("__", "/").replace("_", "-")
            n["metadata"]["labels"].pop(key, None) if value is None else n["metadata"]["labels"].update({key: value})
    return edit


ALLOWED = {
    "its labels": changed(lambda n: n["metadata"]["labels"].update({"topolabel.dev/block": "b2",
                                                                     "topolabel.dev/rack": "r1"})),
    "removing its label": changed(lambda n: n["metadata"]["labels"].pop("topolabel.dev/block")),
    "its annotation": changed(lambda n: n["metadata"]["annotations"].update({"topolabel.dev/managed-labels": ""})),
    "its taints' annotation": changed(lambda n: n["metadata"]["annotations"].update(
        {"topolabel.dev/managed-taints": "topolabel.dev/fabric-degraded:NoSchedule"})),
    "its taint": changed(lambda n: n["spec"]["taints"].append({"key": "topolabel.dev/fabric-unhealthy",
                                                               "effect": "NoSchedule"})),
}
DENIED = {
    "kubernetes.io/hostname rewritten": (changed(lambda n: n["metadata"]["labels"].update(
        {"kubernetes.io/hostname": "evil"})), "may change only label keys under topolabel.dev/, not kubernetes.io/hostname"),
    "another tool's label removed": (changed(lambda n: n["metadata"]["labels"].pop("kubernetes.io/hostname")),
                                     "not kubernetes.io/hostname"),
    "a label under a sub-domain": (changed(lambda n: n["metadata"]["labels"].update({"x.topolabel.dev/a": "1"})),
                                   "not x.topolabel.dev/a"),
    "the agent's annotation": (changed(lambda n: n["metadata"]["annotations"].update(
        {"topolabel.dev/ib-node-guids": "mlx5_0=0x2"})), "not topolabel.dev/ib-node-guids"),
    "a cordon": (changed(lambda n: n["spec"].update({"unschedulable": True})), "no cordon"),
    "a NoExecute taint": (changed(lambda n: n["spec"]["taints"].append({"key": "evil", "effect": "NoExecute"})),
                          "no other taint"),
    "another taint removed": (changed(lambda n: n["spec"].pop("taints")), "no other taint"),
    "the provider ID": (changed(lambda n: n["spec"].update({"providerID": "x"})), "no part of a Node's spec"),
    "a finalizer": (changed(lambda n: n["metadata"].update({"finalizers": ["x"]})), "nor its finalizers"),
}


@pytest.mark.parametrize("what", ALLOWED)
def test_the_operator_may_write_what_topolabel_owns(what: str) -> None:
    assert POLICY.denials(request(), *ALLOWED[what]) == []


@pytest.mark.parametrize("what", DENIED)
def test_the_operator_may_not_write_what_others_own(what: str) -> None:
    (old, new), fragment = DENIED[what]
    denied = POLICY.denials(request(), old, new)
    assert denied and any(fragment in message for message in denied), denied
    assert POLICY.denials(request(user="system:admin"), old, new) is None  # the policy is the operator's alone


def test_nodes_are_neither_created_nor_deleted() -> None:
    assert "the topolabel operator may only patch Nodes, not create or delete them" in POLICY.denials(
        request("DELETE"), node(), None)
    assert POLICY.denials(request("CREATE"), None, node())


def test_through_status_only_the_fabric_health_condition() -> None:
    def condition(status: str) -> Callable[[dict[str, Any]], None]:
        return lambda n: n["status"]["conditions"].append({"type": "FabricHealthy", "status": status})

    assert POLICY.denials(request(sub="status"), *changed(condition("False"))) == []
    ready = changed(lambda n: n["status"]["conditions"][0].update({"status": "False"}))
    assert POLICY.denials(request(sub="status"), *ready) == [
        "the topolabel operator may change only the FabricHealthy condition of a Node's status"]
    address = changed(lambda n: n["status"].update({"addresses": [{"type": "InternalIP", "address": "10.0.0.9"}]}))
    assert POLICY.denials(request(sub="status"), *address)


def kueue(kind: str, labels: dict[str, str] | None) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind,
            "metadata": {"name": "q", **({"labels": labels} if labels is not None else {})}, "spec": {}}


@pytest.mark.parametrize("operation, old, new, allowed", [
    ("CREATE", None, kueue("ClusterQueue", MANAGED), True),
    ("UPDATE", kueue("ClusterQueue", MANAGED), kueue("ClusterQueue", MANAGED), True),
    ("DELETE", kueue("ClusterQueue", MANAGED), None, True),
    ("CREATE", None, kueue("ClusterQueue", None), False),
    ("UPDATE", kueue("ClusterQueue", None), kueue("ClusterQueue", MANAGED), False),  # taking one over
    ("UPDATE", kueue("ClusterQueue", MANAGED), kueue("ClusterQueue", {}), False),
    ("DELETE", kueue("ClusterQueue", {"app.kubernetes.io/managed-by": "argocd"}), None, False),
])
def test_kueue_objects_only_with_topolabels_label(operation: str, old: Any, new: Any, allowed: bool) -> None:
    denied = POLICY.denials(request(operation, "clusterqueues", name="q"), old, new)
    assert (denied == []) == allowed, denied
    if not allowed:
        assert denied == [f"the topolabel operator may {operation.lower()} only Kueue objects labelled "
                          "app.kubernetes.io/managed-by=topolabel, not clusterqueues q"]


def test_a_config_s_keys_widen_the_allowlist() -> None:
    """The chart puts config.keyPrefix and config.levels[].label in the variables; so may an administrator."""
    spec = copy.deepcopy(SPEC)
    widened = {"prefixes": '["topolabel.dev/", "topo.example.com/"]', "keys": '["example.com/rack"]'}
    for variable in spec["spec"]["variables"]:
        variable["expression"] = widened.get(variable["name"], variable["expression"])
    policy = Policy(spec)
    for key in ("topo.example.com/block", "example.com/rack"):
        assert policy.denials(request(), *changed(lambda n, k=key: n["metadata"]["labels"].update({k: "v"}))) == []
    denied = policy.denials(request(), *changed(lambda n: n["metadata"]["labels"].update({"example.com/row": "v"})))
    assert denied == ["the topolabel operator may change only label keys under topolabel.dev/, topo.example.com/ "
                      "or named example.com/rack, not example.com/row"]
