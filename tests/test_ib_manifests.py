"""manifests/ib-collector: the collector's Deployment runs what the CLI accepts with no capability, its RBAC
grants leases and ConfigMaps in its namespace only (checked on the real API server as its ServiceAccount),
the admission policies (evaluated with a CEL interpreter) keep it to topolabel-ib-* objects and bound the
agent's GUID annotation, and the operator only reads the published fabrics."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from providers.infiniband import ANNOTATION as IB_ANNOTATION, DEFAULT_NAMESPACE
from testkit.environment import ROOT
from testkit.ibcluster import AGENT, COLLECTOR, NAMESPACE, apply_docs, manifest_docs
from testkit.kubecluster import KubeCluster, kube_cluster  # noqa: F401
from testkit.celpolicy import Policy
from tests.test_lldp_manifests import POLICY as AGENT_POLICY, changed, node, request
from topolabel.cli import parser

KUSTOMIZATION = yaml.safe_load((COLLECTOR / "kustomization.yaml").read_text())
DOCS = {(d["kind"], d["metadata"]["name"]): d for d in manifest_docs(*(COLLECTOR / f for f in KUSTOMIZATION["resources"]
                                                                           if f.endswith(".yaml")))}
SA = DOCS[("ServiceAccount", "topolabel-ib-collector")]["metadata"]
USER = f"system:serviceaccount:{SA['namespace']}:{SA['name']}"
GROUPS = ("system:serviceaccounts", f"system:serviceaccounts:{SA['namespace']}", "system:authenticated")
OPERATOR_SA = next(d for d in manifest_docs(ROOT / "manifests" / "rbac.yaml") if d["kind"] == "ServiceAccount")
POLICY = Policy(DOCS[("ValidatingAdmissionPolicy", "topolabel-ib-collector-own-objects")])


def test_the_kustomization_is_the_agent_plus_every_file_here() -> None:
    assert set(KUSTOMIZATION["resources"]) == {"../agent"} | {p.name for p in COLLECTOR.glob("*.yaml")} - {
        "kustomization.yaml"}
    assert SA["namespace"] == NAMESPACE == DEFAULT_NAMESPACE == yaml.safe_load((AGENT / "namespace.yaml").read_text())[
        "metadata"]["name"]


def test_the_deployment_runs_the_collector_as_root_with_no_capability_and_the_umad_device() -> None:
    deployment = DOCS[("Deployment", "topolabel-ib-collector")]
    assert deployment["metadata"]["namespace"] == NAMESPACE and deployment["spec"]["replicas"] >= 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == SA["name"] and not pod.get("hostNetwork")
    assert pod["nodeSelector"] and pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    [container] = pod["containers"]
    args = parser().parse_args(container["command"][1:])
    assert container["command"][0] == "topolabel" and args.command == "agent" and args.ib_collector
    assert args.ib_timeout < args.interval and args.lease_duration >= 3
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
    assert env == {"NODE_NAME": "spec.nodeName", "POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
    security = container["securityContext"]
    assert security["capabilities"] == {"drop": ["ALL"]} and not security.get("privileged")
    assert security["allowPrivilegeEscalation"] is False and security["readOnlyRootFilesystem"] is True
    assert container["resources"]["limits"]["rdma/rdma_shared_device_a"] == 1


def test_the_roles_grant_leases_and_configmaps_here_and_the_operator_only_reads() -> None:
    role = DOCS[("Role", "topolabel-ib-collector")]
    assert role["metadata"]["namespace"] == NAMESPACE
    default = ["topolabel-ib-fe80000000000000"]  # InfiniBand's default subnet prefix names the default fabric
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": default,
         "verbs": ["get", "update"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "delete"]},
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": default, "verbs": ["get", "update", "patch"]}]
    assert not any(kind.startswith("Cluster") for kind, _ in DOCS)
    reader = DOCS[("Role", "topolabel-ib-fabric-reader")]
    assert reader["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]
    binding = DOCS[("RoleBinding", "topolabel-ib-fabric-reader")]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": OPERATOR_SA["metadata"]["name"],
                                    "namespace": OPERATOR_SA["metadata"]["namespace"]}]


POD, OTHER_POD = "topolabel-ib-collector-7d9f-a", "topolabel-ib-collector-7d9f-b"


def cel_request(operation: str, resource: str, name: str, user: str = USER, pod: str | None = POD) -> dict[str, Any]:
    info: dict[str, Any] = {"username": user}
    if pod is not None:
        info["extra"] = {"authentication.kubernetes.io/pod-name": [pod]}
    return {"operation": operation, "name": name, "userInfo": info,
            "resource": {"group": "" if resource == "configmaps" else "coordination.k8s.io", "resource": resource}}


def configmap(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NAMESPACE}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {}}


def lease(holder: str | None, name: str = "topolabel-ib-compute") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NAMESPACE}, "spec": {"holderIdentity": holder} if holder else {}}


MINE = {"app.kubernetes.io/managed-by": "topolabel"}
COMPUTE = {**MINE, "topolabel.dev/ib-fabric": "compute"}
SHARD = {**COMPUTE, "topolabel.dev/shard-of": "topolabel-ib-compute"}
LEASE_WRITES = Policy(DOCS[("ValidatingAdmissionPolicy", "topolabel-ib-collector-lease-writes")])
LEASE_POLICY = Policy(DOCS[("ValidatingAdmissionPolicy", "topolabel-ib-collector-lease-holder")])


@pytest.mark.parametrize("operation, resource, name, old, new", [
    ("CREATE", "configmaps", "topolabel-ib-compute", None, configmap("topolabel-ib-compute", COMPUTE)),
    ("UPDATE", "configmaps", "topolabel-ib-compute", configmap("topolabel-ib-compute", COMPUTE),
     configmap("topolabel-ib-compute", COMPUTE)),
    ("CREATE", "configmaps", "topolabel-ib-compute-0a1b2c3d4e5f-0", None,
     configmap("topolabel-ib-compute-0a1b2c3d4e5f-0", SHARD)),
    ("DELETE", "configmaps", "topolabel-ib-compute-0a1b2c3d4e5f-0", configmap("x", SHARD), None),
    ("CREATE", "leases", "topolabel-ib-compute", None, lease(POD)),  # contending
    ("UPDATE", "leases", "topolabel-ib-compute", lease(POD), lease(POD)),  # renewing
    ("UPDATE", "leases", "topolabel-ib-fe80000000000000", lease(OTHER_POD), lease(POD)),  # taking an expired one
    ("UPDATE", "leases", "topolabel-ib-compute", lease(POD), lease(None)),  # handing it over
])
def test_policy_allows_the_collectors_own_objects(operation: str, resource: str, name: str, old: Any, new: Any) -> None:
    request = cel_request(operation, resource, name)
    assert POLICY.denials(request, old, new) == []
    if resource == "leases":
        assert LEASE_WRITES.denials(request, old, new) == []


@pytest.mark.parametrize("what, operation, resource, name, old, new", [
    ("the namespace's CA bundle", "UPDATE", "configmaps", "kube-root-ca.crt", configmap("kube-root-ca.crt"),
     configmap("kube-root-ca.crt")),
    ("another ConfigMap", "CREATE", "configmaps", "evil", None, configmap("evil", MINE)),
    ("an unlabelled one", "CREATE", "configmaps", "topolabel-ib-compute", None, configmap("topolabel-ib-compute")),
    ("one without its fabric", "CREATE", "configmaps", "topolabel-ib-compute", None,
     configmap("topolabel-ib-compute", MINE)),
    ("another fabric's manifest", "UPDATE", "configmaps", "topolabel-ib-storage", configmap("x", COMPUTE),
     configmap("topolabel-ib-storage", COMPUTE)),
    ("a manifest relabelled to its fabric", "UPDATE", "configmaps", "topolabel-ib-compute",
     configmap("x", {**MINE, "topolabel.dev/ib-fabric": "storage"}), configmap("topolabel-ib-compute", COMPUTE)),
    ("a shard without its manifest's label", "CREATE", "configmaps", "topolabel-ib-compute-0a1b2c3d4e5f-0", None,
     configmap("x", COMPUTE)),
    ("another Lease", "UPDATE", "leases", "kube-scheduler", {"metadata": {}}, {"metadata": {}}),
    ("deleting another", "DELETE", "configmaps", "kube-root-ca.crt", configmap("kube-root-ca.crt"), None),
])
def test_policy_denies(what: str, operation: str, resource: str, name: str, old: Any, new: Any) -> None:
    denied = POLICY.denials(cel_request(operation, resource, name), old, new)
    assert denied, f"{what} was allowed"
    assert POLICY.denials(cel_request(operation, resource, name, user="system:admin"), old, new) is None


@pytest.mark.parametrize("what, operation, old, new, pod", [
    ("a Lease for another pod", "UPDATE", lease(POD), lease(OTHER_POD), POD),
    ("a Lease taken for another pod", "CREATE", None, lease(OTHER_POD), POD),
    ("a Lease it does not hold released", "UPDATE", lease(OTHER_POD), lease(None), POD),
    ("a Lease written by a token bound to no pod", "UPDATE", lease(POD), lease(POD), None),
])
def test_the_lease_policy_denies(what: str, operation: str, old: Any, new: Any, pod: str | None) -> None:
    request = cel_request(operation, "leases", "topolabel-ib-compute", pod=pod)
    assert POLICY.denials(request, old, new) == []  # named and shaped as the collector's
    assert LEASE_WRITES.denials(request, old, new), f"{what} was allowed"
    assert LEASE_WRITES.denials(cel_request(operation, "leases", "x", user="system:admin", pod=pod), old, new) is None


@pytest.mark.parametrize("operation, old, new", [
    ("CREATE", None, configmap("topolabel-ib-compute", COMPUTE)),
    ("UPDATE", configmap("topolabel-ib-compute", COMPUTE), configmap("topolabel-ib-compute", COMPUTE)),
    ("DELETE", configmap("topolabel-ib-compute-0a1b2c3d4e5f-0", SHARD), None)])
def test_only_the_fabrics_lease_holder_writes_its_configmaps(operation: str, old: Any, new: Any) -> None:
    """Issue 32, S3: any collector could overwrite or delete every fabric's publication."""
    name = (new or old)["metadata"]["name"]
    request = cel_request(operation, "configmaps", name)
    assert LEASE_POLICY.denials(request, old, new, lease(POD)) == []
    assert LEASE_POLICY.denials(request, old, new, lease(POD, "topolabel-ib-storage")) == []  # another fabric's
    denied = LEASE_POLICY.denials(request, old, new, lease(OTHER_POD))
    assert denied == [f"the InfiniBand collector {POD} may write {name} only while it holds the Lease "
                      f"topolabel-ib-compute, which {OTHER_POD} holds"]
    assert LEASE_POLICY.denials(cel_request(operation, "configmaps", name, pod=None), old, new, lease(POD))


def test_the_agent_policy_allows_the_guid_annotation_up_to_its_bound() -> None:
    def guids(value: str):
        return lambda n: n["metadata"]["annotations"].update({IB_ANNOTATION: value})

    entry = "mlx5_10=0xe09d730300858d88,"
    assert AGENT_POLICY.denials(request(), *changed("gpu-001", guids(entry * 16))) == []
    too_long = entry * (4096 // len(entry) + 1)
    denied = AGENT_POLICY.denials(request(), *changed("gpu-001", guids(too_long)))
    assert denied is not None and len(denied) == 1  # the size rule alone (the helper shows `message` as "denied")
    bare = node("gpu-001")
    published = copy.deepcopy(bare)
    published["metadata"]["annotations"][IB_ANNOTATION] = entry
    assert AGENT_POLICY.denials(request(), bare, published) == []


@pytest.mark.slow
def test_on_the_server_the_collector_may_do_exactly_its_calls(kube_cluster: KubeCluster) -> None:  # noqa: F811
    cluster = kube_cluster
    apply_docs(cluster, manifest_docs(AGENT / "namespace.yaml", COLLECTOR / "rbac.yaml"))

    def can(*args: str, user: str = USER, groups: tuple[str, ...] = GROUPS) -> bool:
        result = cluster.kubectl("auth", "can-i", *args, f"--as={user}", *(f"--as-group={g}" for g in groups),
                                 check=False)
        return result.stdout.strip() == "yes"

    own = "topolabel-ib-fe80000000000000"  # the default fabric's Lease and manifest
    assert can("create", "leases.coordination.k8s.io", "-n", NAMESPACE)
    for verb in ("get", "update"):
        assert can(verb, f"leases.coordination.k8s.io/{own}", "-n", NAMESPACE)
        assert not can(verb, "leases.coordination.k8s.io/kube-leader", "-n", NAMESPACE)
    for verb in ("create", "delete"):
        assert can(verb, "configmaps", "-n", NAMESPACE)
    for verb in ("get", "update", "patch"):
        assert can(verb, f"configmaps/{own}", "-n", NAMESPACE)
        assert not can(verb, "configmaps/team-settings", "-n", NAMESPACE)
    for args in (("list", "configmaps", "-n", NAMESPACE), ("watch", "configmaps", "-n", NAMESPACE),
                 ("get", "configmaps", "-n", NAMESPACE), ("get", "leases.coordination.k8s.io", "-n", NAMESPACE),
                 ("delete", "leases.coordination.k8s.io", "-n", NAMESPACE), ("get", "configmaps", "-n", "default"),
                 ("create", "leases.coordination.k8s.io", "-n", "kube-system"), ("get", "secrets", "-n", NAMESPACE),
                 ("list", "nodes"), ("patch", "nodes"), ("list", "configmaps", "--all-namespaces")):
        assert not can(*args), args
    operator = f"system:serviceaccount:{OPERATOR_SA['metadata']['namespace']}:{OPERATOR_SA['metadata']['name']}"
    operator_groups = ("system:serviceaccounts", "system:authenticated")
    assert can("get", "configmaps", "-n", NAMESPACE, user=operator, groups=operator_groups)
    assert can("list", "configmaps", "-n", NAMESPACE, user=operator, groups=operator_groups)
    for verb in ("create", "update", "delete", "watch"):
        assert not can(verb, "configmaps", "-n", NAMESPACE, user=operator, groups=operator_groups)
    dry = cluster.kubectl("apply", "--dry-run=server", "-f", str(COLLECTOR / "deployment.yaml")).stdout
    assert "deployment.apps/topolabel-ib-collector created (server dry run)" in dry
