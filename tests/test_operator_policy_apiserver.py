"""manifests/admission-policy.yaml enforced by a real kube-apiserver 1.36, for the operator's real identity: the
manifests' ServiceAccount topolabel in topolabel-system, bound to the manifests' ClusterRole, with a token the
server minted (issue 32, S2 and S4).

RBAC grants that token `patch nodes` and the Kueue kinds whole; the policy keeps it to label keys topolabel owns,
its own annotation, taints under topolabel.dev/, the FabricHealthy condition, and Kueue objects labelled
managed-by=topolabel. `topolabel apply` as that identity writes its labels; a config whose keyPrefix the policy
was not told of is refused by the server, one failed write per node.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from labeler.cluster.kube import MERGE_PATCH, connect, request_json
from testkit.environment import ROOT
from testkit.ibcluster import sa_kubeconfig
from testkit.kubecluster import KubeCluster, kube, kube_cluster  # noqa: F401
from testkit.operatorrun import wait_until
from topolabel.cli import main

pytestmark = pytest.mark.slow
MANIFESTS = ROOT / "manifests"
POLICY = next(d for d in yaml.safe_load_all((MANIFESTS / "admission-policy.yaml").read_text())
              if d["kind"] == "ValidatingAdmissionPolicy")
DENIED = f"ValidatingAdmissionPolicy '{POLICY['metadata']['name']}'"
MANAGED = {"app.kubernetes.io/managed-by": "topolabel"}
QUEUES = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
STRATEGIC = "application/strategic-merge-patch+json"


@pytest.fixture(scope="module")
def identity(kube_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:  # noqa: F811
    """The manifests' namespace, ServiceAccount, RBAC and admission policy, Kueue's CRDs, and a kubeconfig with
    the ServiceAccount's token, once for the module. The policy is removed afterwards (the chart's tests install
    their own of the same name)."""
    kube_cluster.kubectl("apply", *(a for f in ("namespace.yaml", "rbac.yaml", "admission-policy.yaml")
                                    for a in ("-f", str(MANIFESTS / f))))
    kube_cluster.install_kueue_crds()
    try:
        yield sa_kubeconfig(kube_cluster, "topolabel-system", "topolabel",
                            tmp_path_factory.mktemp("operator") / "operator.kubeconfig")
    finally:
        kube_cluster.kubectl("delete", "--ignore-not-found", "-f", str(MANIFESTS / "admission-policy.yaml"))


@pytest.fixture
def operator(kube: KubeCluster, identity: Path) -> Iterator[Path]:  # noqa: F811
    """Two GKE-like Nodes (the `kube` fixture removed every other), the policy in force; the operator's
    kubeconfig. ClusterQueues are removed after the test."""
    kube.create_nodes([{"apiVersion": "v1", "kind": "Node",
                        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                               "cloud.google.com/gce-topology-block": "b1",
                                                               "cloud.google.com/gce-topology-subblock": "s1",
                                                               "cloud.google.com/gce-topology-host": name}},
                        "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
                        "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
                       for name in ("gpu-1", "gpu-2")])
    try:
        wait_until(lambda: in_force(identity), 30, "the admission policy to take effect")
        yield identity
    finally:
        kube.kubectl("delete", "clusterqueues.kueue.x-k8s.io", "--all", "--ignore-not-found")


def call(config: Path, method: str, path: str, body: Any = None, content_type: str = MERGE_PATCH,
         dry_run: bool = False) -> Any:
    return request_json(connect(str(config)), method, path, body=body, content_type=content_type,
                        query=[("dryRun", "All")] if dry_run else [])


def denial(config: Path, method: str, path: str, body: Any = None, content_type: str = MERGE_PATCH) -> str:
    with pytest.raises(ApiException) as denied:
        call(config, method, path, body, content_type)
    assert denied.value.status == 403, denied.value.body
    message = json.loads(denied.value.body)["message"]
    assert DENIED in message, message
    return message


def in_force(config: Path) -> bool:
    """Whether the policy refuses a dry run of what RBAC allows: the server compiles a new policy
    asynchronously, and until then passes such a patch."""
    try:
        call(config, "PATCH", "/api/v1/nodes/gpu-1", {"metadata": {"labels": {"kubernetes.io/hostname": "x"}}},
             dry_run=True)
    except ApiException as exc:
        if exc.status == 403 and DENIED in (exc.body or ""):
            return True
        raise
    return False


def node(kube: KubeCluster, name: str = "gpu-1") -> dict[str, Any]:  # noqa: F811
    return json.loads(kube.kubectl("get", "node", name, "-o", "json").stdout)


def test_the_server_type_checks_the_policy_without_warnings(operator: Path, kube: KubeCluster) -> None:  # noqa: F811
    assert kube.type_check_warnings(POLICY["metadata"]["name"]) == []


def test_the_operator_writes_what_it_owns(operator: Path, kube: KubeCluster) -> None:  # noqa: F811
    call(operator, "PATCH", "/api/v1/nodes/gpu-1", {
        "metadata": {"labels": {"topolabel.dev/block": "b1"},
                     "annotations": {"topolabel.dev/managed-labels": "topolabel.dev/block"}},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"},
                            {"key": "topolabel.dev/fabric-unhealthy", "effect": "NoSchedule"}]}})
    call(operator, "PATCH", "/api/v1/nodes/gpu-1/status",
         {"status": {"conditions": [{"type": "FabricHealthy", "status": "False", "reason": "LinkDown"}]}}, STRATEGIC)
    found = node(kube)
    assert found["metadata"]["labels"]["topolabel.dev/block"] == "b1"
    assert {t["key"] for t in found["spec"]["taints"]} == {"nvidia.com/gpu", "topolabel.dev/fabric-unhealthy"}
    assert {c["type"]: c["status"] for c in found["status"]["conditions"]} == {"Ready": "True", "FabricHealthy": "False"}
    queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
             "metadata": {"name": "tl-queue", "labels": MANAGED}, "spec": {}}
    call(operator, "POST", QUEUES, queue, "application/json")
    call(operator, "PATCH", f"{QUEUES}/tl-queue", {"spec": {"cohortName": "research"}})
    call(operator, "DELETE", f"{QUEUES}/tl-queue")


@pytest.mark.parametrize("what, path, body, content_type, fragment", [
    ("kubernetes.io/hostname rewritten", "/api/v1/nodes/gpu-1",
     {"metadata": {"labels": {"kubernetes.io/hostname": "evil"}}}, MERGE_PATCH,
     "may change only label keys under topolabel.dev/, not kubernetes.io/hostname"),
    ("a cloud's label removed", "/api/v1/nodes/gpu-1",
     {"metadata": {"labels": {"cloud.google.com/gce-topology-block": None}}}, MERGE_PATCH,
     "not cloud.google.com/gce-topology-block"),
    ("the agent's annotation", "/api/v1/nodes/gpu-1",
     {"metadata": {"annotations": {"topolabel.dev/ib-node-guids": "mlx5_0=0x1"}}}, MERGE_PATCH,
     "may change only its annotations topolabel.dev/managed-labels, topolabel.dev/managed-taints, not "
     "topolabel.dev/ib-node-guids"),
    ("a cordon", "/api/v1/nodes/gpu-1", {"spec": {"unschedulable": True}}, MERGE_PATCH, "(no cordon, no other taint)"),
    ("a NoExecute taint", "/api/v1/nodes/gpu-1",
     {"spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}, {"key": "evict", "effect": "NoExecute"}]}},
     MERGE_PATCH, "no part of a Node's spec but taints whose key starts with topolabel.dev/"),
    ("Ready turned False", "/api/v1/nodes/gpu-1/status",
     {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}, STRATEGIC,
     "may change only the FabricHealthy condition of a Node's status"),
    ("its addresses", "/api/v1/nodes/gpu-1/status",
     {"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.9"}]}}, STRATEGIC,
     "may change only the FabricHealthy condition of a Node's status"),
    ("a Node deleted", "/api/v1/nodes/gpu-2", None, MERGE_PATCH, None),
])
def test_the_operator_may_not_touch_what_others_own(operator: Path, kube: KubeCluster, what: str, path: str,  # noqa: F811
                                                    body: Any, content_type: str, fragment: str | None) -> None:
    if body is None:  # RBAC grants no delete: the server says so before any policy
        with pytest.raises(ApiException) as refused:
            call(operator, "DELETE", path)
        assert refused.value.status == 403
        return
    before = node(kube, path.split("/")[4])
    message = denial(operator, "PATCH", path, body, content_type)
    assert fragment in message, (what, message)
    assert node(kube, path.split("/")[4])["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_the_operator_may_touch_only_its_kueue_objects(operator: Path, kube: KubeCluster) -> None:  # noqa: F811
    """Issue 32, S4: the code checked managed-by before deleting or patching; RBAC did not."""
    theirs = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "team-queue"},
              "spec": {}}
    kube.kubectl("apply", "-f", "-", input=json.dumps(theirs))
    expected = "may {} only Kueue objects labelled app.kubernetes.io/managed-by=topolabel, not clusterqueues {}"
    assert expected.format("delete", "team-queue") in denial(operator, "DELETE", f"{QUEUES}/team-queue")
    assert expected.format("update", "team-queue") in denial(operator, "PATCH", f"{QUEUES}/team-queue",
                                                             {"metadata": {"labels": MANAGED}})
    assert expected.format("create", "mine") in denial(operator, "POST", QUEUES, {**theirs, "metadata": {"name": "mine"}},
                                                       "application/json")


def test_topolabel_apply_as_the_operator_passes_and_an_unknown_prefix_is_refused_by_the_server(
        operator: Path, kube: KubeCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    args = ["apply", "--source", "labels", "--preset", "gke", "--kubeconfig", str(operator), "-o", "json"]
    assert main(args) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["result"]["written"] == 2
    assert node(kube)["metadata"]["labels"]["topolabel.dev/block"]
    config = tmp_path / "other-prefix.yaml"
    config.write_text("keyPrefix: topo.example.com/\n")  # the policy was not told of it
    assert main([*args, "--config", str(config), "--force"]) == 1
    report = json.loads(capsys.readouterr().out)["result"]
    assert report["written"] == 0 and set(report["failed"]) == {"gpu-1", "gpu-2"}
    assert all("403" in why and "topo.example.com/block" in why for why in report["failed"].values())
