"""manifests/agent: the RBAC grants only what publishing needs, the DaemonSet runs what the CLI accepts,
and the admission policy (evaluated with a real CEL interpreter) keeps each agent to its own Node's annotation."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from providers.lldp.facts import ANNOTATION
from testkit.celpolicy import Policy
from topolabel.cli import parser

ROOT = Path(__file__).resolve().parent.parent / "manifests" / "agent"
NODE_NAME_CLAIM = "authentication.kubernetes.io/node-name"


def objects() -> dict[str, dict[str, Any]]:
    """kind -> object for everything the kustomization lists (each kind appears once)."""
    kustomization = yaml.safe_load((ROOT / "kustomization.yaml").read_text())
    found: dict[str, dict[str, Any]] = {}
    for name in kustomization["resources"]:
        for doc in yaml.safe_load_all((ROOT / name).read_text()):
            assert doc["kind"] not in found, f"two {doc['kind']} objects"
            found[doc["kind"]] = doc
    return found


OBJECTS = objects()
SA = OBJECTS["ServiceAccount"]["metadata"]
USER = f"system:serviceaccount:{SA['namespace']}:{SA['name']}"


def test_every_manifest_is_in_the_kustomization() -> None:
    listed = set(yaml.safe_load((ROOT / "kustomization.yaml").read_text())["resources"])
    assert listed == {p.name for p in ROOT.glob("*.yaml")} - {"kustomization.yaml"}


def test_rbac_grants_patch_on_nodes_and_nothing_else() -> None:
    role, binding = OBJECTS["ClusterRole"], OBJECTS["ClusterRoleBinding"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]}]
    assert not {"Role", "RoleBinding"} & set(OBJECTS)
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": SA["name"], "namespace": SA["namespace"]}]


def test_daemonset_runs_the_agent_the_cli_accepts_on_the_socket_lldpd_serves() -> None:
    ds = OBJECTS["DaemonSet"]
    pod = ds["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["serviceAccountName"] == SA["name"]
    assert ds["metadata"]["namespace"] == SA["namespace"]
    containers = {c["name"]: c for c in pod["containers"]}
    agent, lldpd = containers["agent"], containers["lldpd"]
    assert agent["command"][0] == "topolabel"
    args = parser().parse_args(agent["command"][1:])
    assert args.command == "agent" and not args.once and not args.print_only
    socket = lldpd["command"][lldpd["command"].index("-u") + 1]
    assert args.lldp_socket == socket
    mounts = {c: {m["name"]: m["mountPath"] for m in containers[c]["volumeMounts"]} for c in containers}
    shared = set(mounts["agent"]) & set(mounts["lldpd"])
    assert any(socket.startswith(mounts["agent"][v] + "/") and mounts["agent"][v] == mounts["lldpd"][v] for v in shared)
    env = {e["name"]: e for e in agent["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"


TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def test_daemonset_is_hardened_and_only_the_agent_holds_a_token() -> None:
    pod = OBJECTS["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    containers = {c["name"]: c for c in pod["containers"]}
    for container in containers.values():
        sc = container["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
        assert sc["capabilities"]["drop"] == ["ALL"]
    assert containers["agent"]["securityContext"]["capabilities"]["add"] == ["DAC_OVERRIDE"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounted = {name: {m["mountPath"]: m["name"] for m in c["volumeMounts"]} for name, c in containers.items()}
    assert TOKEN_DIR not in mounted["lldpd"]
    token = volumes[mounted["agent"][TOKEN_DIR]]["projected"]["sources"]
    assert any("serviceAccountToken" in source for source in token)
    assert all("secret" not in v and "hostPath" not in v for v in volumes.values())
    # lldpd writes only its chroot and socket directories, both emptyDirs
    assert {volumes[name].get("emptyDir") is not None for name in mounted["lldpd"].values()} == {True}


def test_daemonset_stays_off_control_plane_nodes() -> None:
    terms = OBJECTS["DaemonSet"]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [
        {"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"},
        {"key": "node-role.kubernetes.io/master", "operator": "DoesNotExist"}]}]


def test_the_liveness_probe_watches_the_file_the_agent_touches() -> None:
    pod = OBJECTS["DaemonSet"]["spec"]["template"]["spec"]
    agent = next(c for c in pod["containers"] if c["name"] == "agent")
    args = parser().parse_args(agent["command"][1:])
    probe = " ".join(agent["livenessProbe"]["exec"]["command"])
    assert str(args.alive_file) in probe and "-mmin -15" in probe  # 3 x the 300 s interval
    mounts = {m["mountPath"]: m["name"] for m in agent["volumeMounts"]}
    assert str(args.alive_file.parent) in mounts


POLICY = Policy(OBJECTS["ValidatingAdmissionPolicy"])


def entry(manager: str, fields: dict) -> dict:
    """A managedFields entry, as the API server records one."""
    return {"manager": manager, "operation": "Update", "apiVersion": "v1", "time": "2026-11-30T00:00:00Z",
            "fieldsType": "FieldsV1", "fieldsV1": fields}


KUBELET = entry("kubelet", {"f:metadata": {"f:labels": {".": {}, "f:kubernetes.io/hostname": {}}}})
AGENT = entry("topolabel-agent", {"f:metadata": {"f:annotations": {f"f:{ANNOTATION}": {}}}})


def node(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name},
                         "annotations": {"example.com/other": "x", ANNOTATION: '{"version":1,"neighbors":[]}'},
                         "managedFields": [copy.deepcopy(KUBELET)]},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}}


def request(user: str = USER, node_name: str | None = "gpu-001", **extra: Any) -> dict:
    info: dict[str, Any] = {"username": user}
    if node_name is not None:
        info["extra"] = {NODE_NAME_CLAIM: [node_name], "authentication.kubernetes.io/pod-name": ["agent-x"]}
    return {"operation": "UPDATE", "userInfo": info, **extra}


def changed(name: str, change) -> tuple[dict, dict]:
    old = node(name)
    new = copy.deepcopy(old)
    change(new)
    return old, new


def set_facts(n: dict) -> None:
    n["metadata"]["annotations"][ANNOTATION] = '{"version":1,"neighbors":[{"interface":"eth0"}]}'


def test_policy_matches_the_service_account_and_the_annotation() -> None:
    spec = OBJECTS["ValidatingAdmissionPolicy"]["spec"]
    assert USER in spec["matchConditions"][0]["expression"]
    assert POLICY.denials(request(), *changed("gpu-001", set_facts)) == []
    assert OBJECTS["ValidatingAdmissionPolicyBinding"]["spec"]["policyName"] == \
        OBJECTS["ValidatingAdmissionPolicy"]["metadata"]["name"]
    assert OBJECTS["ValidatingAdmissionPolicyBinding"]["spec"]["validationActions"] == ["Deny"]


def test_policy_allows_the_first_publication() -> None:
    old, new = changed("gpu-001", set_facts)
    del old["metadata"]["annotations"][ANNOTATION]
    assert POLICY.denials(request(), old, new) == []
    bare = node("gpu-001")
    del bare["metadata"]["annotations"]
    published = copy.deepcopy(bare)
    published["metadata"]["annotations"] = {ANNOTATION: "{}"}
    assert POLICY.denials(request(), bare, published) == []


def test_policy_allows_the_agents_own_managed_fields_entry() -> None:
    old, new = changed("gpu-001", lambda n: (set_facts(n), n["metadata"]["managedFields"].append(copy.deepcopy(AGENT))))
    assert POLICY.denials(request(), old, new) == []
    limit = changed("gpu-001", lambda n: n["metadata"]["annotations"].update({ANNOTATION: "x" * 65536}))
    assert POLICY.denials(request(), *limit) == []


def test_policy_ignores_other_users() -> None:
    old, new = changed("gpu-002", lambda n: n["metadata"]["labels"].update(x="y"))
    assert POLICY.denials(request(user="system:node:gpu-002"), old, new) is None


@pytest.mark.parametrize("what, name, change, req", [
    ("another node", "gpu-002", set_facts, request()),
    ("no node claim", "gpu-001", set_facts, request(node_name=None)),
    ("another annotation", "gpu-001", lambda n: n["metadata"]["annotations"].update({"example.com/other": "y"}),
     request()),
    ("an annotation removed", "gpu-001", lambda n: n["metadata"]["annotations"].pop("example.com/other"), request()),
    ("an annotation added", "gpu-001", lambda n: n["metadata"]["annotations"].update({"a.io/b": "c"}), request()),
    ("a label", "gpu-001", lambda n: n["metadata"]["labels"].update({"topolabel.dev/rack": "r1"}), request()),
    ("a taint", "gpu-001", lambda n: n["spec"].update(taints=[]), request()),
    ("unschedulable", "gpu-001", lambda n: n["spec"].update(unschedulable=True), request()),
    ("a finalizer", "gpu-001", lambda n: n["metadata"].update(finalizers=["x.io/y"]), request()),
    ("the status", "gpu-001", set_facts, request(subResource="status")),
    ("LLDP facts over 64 KiB", "gpu-001", lambda n: n["metadata"]["annotations"].update({ANNOTATION: "x" * 65537}),
     request()),
    ("an NVLink domain over 63 characters", "gpu-001",
     lambda n: n["metadata"]["annotations"].update({"topolabel.dev/gpu-clique": "c" * 64}), request()),
    ("another manager's managedFields", "gpu-001",
     lambda n: n["metadata"]["managedFields"][0]["fieldsV1"]["f:metadata"].update({"f:annotations": {}}), request()),
    ("managedFields wiped", "gpu-001", lambda n: n["metadata"].update(managedFields=[]), request()),
    ("its entry claiming labels", "gpu-001", lambda n: n["metadata"]["managedFields"].append(
        entry("topolabel-agent", {"f:metadata": {"f:labels": {"f:topolabel.dev/rack": {}}}})), request()),
    ("its entry claiming another annotation", "gpu-001", lambda n: n["metadata"]["managedFields"].append(
        entry("topolabel-agent", {"f:metadata": {"f:annotations": {"f:example.com/other": {}}}})), request()),
])
def test_policy_denies(what, name, change, req) -> None:
    old, new = changed(name, change)
    denied = POLICY.denials(req, old, new)
    assert denied, f"{what} was allowed"
    if what == "another node":
        assert "may only change the Node it runs on (gpu-001), not gpu-002" in denied[0]
