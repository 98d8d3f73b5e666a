"""manifests/agent's ValidatingAdmissionPolicy enforced by a real kube-apiserver 1.36, for the agent's real
identity: a ServiceAccount token bound to a Pod on the node (TokenRequest with a Pod boundObjectRef), which
the server turns into the user system:serviceaccount:topolabel-agent:topolabel-agent with the pod's node in
userInfo.extra["authentication.kubernetes.io/node-name"], exactly as a kubelet-mounted token in the DaemonSet.

The agent may patch its own Node's four annotations (lldp-neighbors, gpu-clique, ib-node-guids, ib-port-health)
under its own field manager, `topolabel-agent`, also where the operator's patches own other fields; every other
change, including one that would touch another manager's managedFields entry or report another node's fabric
health, is denied (403) with the policy's message.
"""

from __future__ import annotations

import json
import time
from typing import Any, Iterator

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from labeler.cluster.kube import MERGE_PATCH, connect, patch_node
from hack import testcluster
from testkit.environment import ROOT
from testkit.kubecluster import KubeCluster, kube, kube_cluster  # noqa: F401

pytestmark = pytest.mark.slow
AGENT = ROOT / "manifests" / "agent"
POLICY = yaml.safe_load((AGENT / "admission-policy.yaml").read_text().split("\n---\n")[0])
SA = yaml.safe_load((AGENT / "serviceaccount.yaml").read_text())["metadata"]
AGENT_MANAGER = "topolabel-agent"  # the field manager the agent patches under (topolabel/commands/agent.py)
KEYS = ("topolabel.dev/lldp-neighbors", "topolabel.dev/gpu-clique", "topolabel.dev/ib-node-guids",
        "topolabel.dev/ib-port-health")
IB_GUIDS, PORT_HEALTH = KEYS[2], KEYS[3]
RECORD = '{"v":1,"at":1764590400.5,"window":300,"ports":[["mlx5_0",1,4,5,400,{"link_downed":2}]]}'
DENIED = f"ValidatingAdmissionPolicy '{POLICY['metadata']['name']}'"
OWN, OTHER = "gpu-a", "gpu-b"


def policy_message(index: int) -> str:
    return POLICY["spec"]["validations"][index]["message"]


SIZES, LABELS_SPEC, OTHER_MANAGERS = 3, 4, 5  # the policy's rules, by position (6: tests/test_lldp_manifests.py)


@pytest.fixture
def agent(kube: KubeCluster) -> Iterator[client.CoreV1Api]:  # noqa: F811
    """Two Nodes; the agent's namespace, ServiceAccount, RBAC and admission policy from manifests/agent; a pod
    of the agent on gpu-a; and the CoreV1Api of that pod's ServiceAccount token. The policy is removed after
    the test (the cluster is shared with tests of what RBAC alone allows)."""
    kube.kubectl("apply", *(a for f in ("namespace.yaml", "serviceaccount.yaml", "rbac.yaml", "admission-policy.yaml")
                            for a in ("-f", str(AGENT / f))))
    try:
        kube.create_nodes([{"apiVersion": "v1", "kind": "Node",
                            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name},
                                         "annotations": {"example.com/keep": "me"}}} for name in (OWN, OTHER)])
        admin = client.CoreV1Api(kube.api())
        pod = admin.create_namespaced_pod(SA["namespace"], {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "topolabel-agent-"},
            "spec": {"nodeName": OWN, "serviceAccountName": SA["name"],
                     "containers": [{"name": "agent", "image": "topolabel:0.1.0"}]}})
        token = admin.create_namespaced_service_account_token(SA["name"], SA["namespace"], {
            "spec": {"expirationSeconds": 3600,
                     "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": pod.metadata.name,
                                        "uid": pod.metadata.uid}}}).status.token
        config = kube.dir / "agent.kubeconfig"
        config.write_text(testcluster.kubeconfig(kube.server, kube.dir / "pki" / "ca.crt", SA["name"], token))
        yield client.CoreV1Api(connect(str(config)))
    finally:
        kube.kubectl("delete", "--ignore-not-found", "-f", str(AGENT / "admission-policy.yaml"))
        kube.kubectl("delete", "pods", "--all", "-n", SA["namespace"], "--wait=false")


def patch(agent: client.CoreV1Api, name: str, body: dict[str, Any], dry_run: bool = False,
          manager: str = AGENT_MANAGER) -> Any:
    """A merge patch as the agent sends it, under its own field manager."""
    return agent.patch_node(name, body, _content_type=MERGE_PATCH, dry_run="All" if dry_run else None,
                            field_manager=manager)


def denial(agent: client.CoreV1Api, name: str, body: dict[str, Any], manager: str | None = AGENT_MANAGER) -> str:
    with pytest.raises(ApiException) as denied:
        patch(agent, name, body, manager=manager)
    assert denied.value.status == 403, denied.value.body  # the policy's reason: Forbidden
    return json.loads(denied.value.body)["message"]


def wait_for_policy(agent: client.CoreV1Api) -> None:
    """The server compiles a new policy and its binding asynchronously: until then a patch RBAC allows
    passes. A dry-run patch of the other Node is denied once the policy is in force."""
    deadline = time.monotonic() + 30
    while True:
        try:
            patch(agent, OTHER, {"metadata": {"annotations": {KEYS[0]: "{}"}}}, dry_run=True)
        except ApiException as exc:
            if exc.status == 403 and DENIED in (exc.body or ""):
                return
            raise
        assert time.monotonic() < deadline, "the admission policy never took effect"
        time.sleep(0.2)


def annotations(kube: KubeCluster, name: str) -> dict[str, str]:  # noqa: F811
    return json.loads(kube.kubectl("get", "node", name, "-o", "json").stdout)["metadata"]["annotations"]


def test_the_server_type_checks_the_policy_without_warnings(agent: client.CoreV1Api, kube: KubeCluster) -> None:  # noqa: F811
    """The controller-manager type-checks every expression against the Node schema and reports warnings in
    the policy's status."""
    assert kube.type_check_warnings(POLICY["metadata"]["name"]) == []


def test_the_agent_patches_its_own_nodes_four_annotations(agent: client.CoreV1Api, kube: KubeCluster) -> None:  # noqa: F811
    wait_for_policy(agent)
    # the operator labelled the node first (its own managedFields entry, which the agent's patches leave alone)
    patch_node(kube.api(), OWN, {"metadata": {"labels": {"topolabel.dev/rack": "r1"},
                                              "annotations": {"topolabel.dev/managed-labels": "rack"}}})
    guids = "0" * 4096  # the policy's bound, exactly
    health = RECORD + " " * (8192 - len(RECORD))  # the policy's bound on the port record
    patch(agent, OWN, {"metadata": {"annotations": {KEYS[0]: '{"version":1,"neighbors":[]}', KEYS[1]: "clique-7",
                                                    IB_GUIDS: guids, PORT_HEALTH: health}}})
    assert annotations(kube, OWN) == {"example.com/keep": "me", "topolabel.dev/managed-labels": "rack",
                                      KEYS[0]: '{"version":1,"neighbors":[]}', KEYS[1]: "clique-7", IB_GUIDS: guids,
                                      PORT_HEALTH: health}
    patch(agent, OWN, {"metadata": {"annotations": {KEYS[1]: None}}})  # and removes what it published
    assert KEYS[1] not in annotations(kube, OWN)


@pytest.mark.parametrize("what, name, body, rule, manager", [
    ("another node", OTHER, {"metadata": {"annotations": {KEYS[0]: "{}"}}}, 1, AGENT_MANAGER),
    ("its own labels", OWN, {"metadata": {"labels": {"topolabel.dev/rack": "r1"}}}, LABELS_SPEC, AGENT_MANAGER),
    ("HCA GUIDs over 4096 characters", OWN, {"metadata": {"annotations": {IB_GUIDS: "0" * 4097}}}, SIZES,
     AGENT_MANAGER),
    ("an NVLink domain over 63 characters", OWN, {"metadata": {"annotations": {KEYS[1]: "c" * 64}}}, SIZES,
     AGENT_MANAGER),
    ("another node's fabric health", OTHER, {"metadata": {"annotations": {PORT_HEALTH: RECORD}}}, 1,
     AGENT_MANAGER),
    ("a port record over 8192 characters", OWN, {"metadata": {"annotations": {PORT_HEALTH: "{" + " " * 8192}}},
     SIZES, AGENT_MANAGER),
    ("another annotation key", OWN, {"metadata": {"annotations": {"example.com/keep": "changed"}}}, 2,
     AGENT_MANAGER),
    ("a new annotation key", OWN, {"metadata": {"annotations": {"topolabel.dev/other": "x"}}}, 2, AGENT_MANAGER),
    ("its taints", OWN, {"spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]}}, LABELS_SPEC, AGENT_MANAGER),
    ("managedFields wiped", OWN, {"metadata": {"managedFields": [{}]}}, OTHER_MANAGERS, AGENT_MANAGER),
    ("managedFields forged", OWN, {"metadata": {"managedFields": [{
        "manager": "kubelet", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:labels": {"f:kubernetes.io/hostname": {}}}}}]}}, OTHER_MANAGERS,
     AGENT_MANAGER),
    # its own annotation, but under the manager of the admin's Python client, whose entry it would change
    ("the admin client's field manager", OWN, {"metadata": {"annotations": {KEYS[0]: "{}"}}}, OTHER_MANAGERS,
     None),
])
def test_the_agent_is_denied_with_the_policys_message(agent: client.CoreV1Api, kube: KubeCluster, what: str,  # noqa: F811
                                                     name: str, body: dict, rule: int, manager: str | None) -> None:
    wait_for_policy(agent)
    if manager is None:  # the admin's client (same library, so the same default manager) owns fields first
        patch_node(kube.api(), name, {"metadata": {"annotations": {"topolabel.dev/managed-labels": "rack"}}})
    before = json.loads(kube.kubectl("get", "node", name, "-o", "json").stdout)["metadata"]
    message = denial(agent, name, body, manager)
    assert DENIED in message, what
    if rule == 1:
        assert f"the topolabel agent may only change the Node it runs on ({OWN}), not {OTHER}" in message
    else:
        assert policy_message(rule) in message, what
    after = json.loads(kube.kubectl("get", "node", name, "-o", "json").stdout)["metadata"]
    assert after["resourceVersion"] == before["resourceVersion"]


def test_the_agent_cannot_write_a_health_condition_on_any_node(agent: client.CoreV1Api) -> None:
    """The FabricHealthy condition is the operator's: the agent's RBAC grants no nodes/status at all."""
    wait_for_policy(agent)
    for name in (OWN, OTHER):
        with pytest.raises(ApiException) as denied:
            agent.patch_node_status(name, {"status": {"conditions": [{"type": "FabricHealthy", "status": "False",
                                                                        "reason": "FabricDegraded", "message": "x"}]}},
                                    field_manager=AGENT_MANAGER)
        assert denied.value.status == 403 and "nodes/status" in denied.value.body, denied.value.body
