"""`topolabel apply` against a real kube-apiserver 1.36 (testkit/kubecluster.py): 1,000 nodes labelled,
a second apply writes nothing, a partial source removes nothing; the merge patch as the server reads it.

Writes are counted from the API server's audit log, so they are what the server received, not what
topolabel believes it sent.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from hack.synth import gke_cluster
from labeler.cluster.kube import list_nodes, patch_node
from testkit.kubecluster import KubeCluster, kube, kube_cluster  # noqa: F401
from topolabel.cli import main

pytestmark = pytest.mark.slow
LEVELS = ("topolabel.dev/block", "topolabel.dev/subblock", "topolabel.dev/host")


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = main([*args, "-o", "json"])
    return code, json.loads(capsys.readouterr().out)


def write(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data))
    return path


def node_patches(cluster: KubeCluster, since: int) -> list:
    return cluster.requests(since=since, verb="patch", resource="nodes")


@pytest.fixture
def cluster_1000(kube: KubeCluster) -> tuple[KubeCluster, dict[str, tuple[str, str, str]]]:
    """1,000 GKE nodes (2 blocks x 5 subblocks x 100 hosts) on the server, none labelled by topolabel."""
    items, truth = gke_cluster(blocks=2, subblocks=5, hosts=100)
    assert kube.create_nodes(items) == 1000
    return kube, truth


def test_apply_labels_1000_nodes_then_writes_nothing(cluster_1000, capsys, tmp_path: Path) -> None:
    cluster, truth = cluster_1000
    source = ["--source", "labels", "--preset", "gke", "--kubeconfig", str(cluster.kubeconfig)]

    mark = cluster.audit_mark()
    code, report = run_cli(capsys, "apply", *source)
    assert code == 0
    assert report["result"] == {"written": 1000, "failed": {}, "retries": 0}
    patches = node_patches(cluster, mark)
    assert len(patches) == 1000 and {p.code for p in patches} == {200}
    assert sorted(p.name for p in patches) == sorted(truth)

    labels = cluster.node_labels()
    for level, key in enumerate(LEVELS):  # same value exactly where the ground truth shares a switch
        by_value: dict[str, set] = {}
        for name, path in truth.items():
            by_value.setdefault(labels[name][key], set()).add(path[: level + 1])
        assert all(len(paths) == 1 for paths in by_value.values()), key
        assert len(by_value) == len({p[: level + 1] for p in truth.values()}), key
    assert labels[next(iter(truth))]["cloud.google.com/gce-topology-block"]  # the source's labels stay

    mark = cluster.audit_mark()
    code, report = run_cli(capsys, "apply", *source)
    assert code == 0 and report["result"]["written"] == 0 and report["unchanged"] == 1000
    assert node_patches(cluster, mark) == []


def test_partial_source_removes_no_label(cluster_1000, capsys, tmp_path: Path) -> None:
    """A source that answers for only half the nodes: the other half keep every label, and nothing is sent."""
    cluster, truth = cluster_1000
    kubeconfig = ["--kubeconfig", str(cluster.kubeconfig)]
    code, snap = run_cli(capsys, "discover", "--source", "labels", "--preset", "gke", *kubeconfig)
    assert code == 0 and len(snap["nodes"]) == 1000
    assert run_cli(capsys, "apply", "--snapshot", str(write(tmp_path / "full.json", snap)), *kubeconfig)[0] == 0
    before = cluster.node_labels()

    kept = sorted(snap["nodes"])[::2]
    half = {**snap, "nodes": {name: snap["nodes"][name] for name in kept}}
    mark = cluster.audit_mark()
    code, report = run_cli(capsys, "apply", "--snapshot", str(write(tmp_path / "half.json", half)), *kubeconfig)
    assert code == 0
    assert report["result"]["written"] == 0
    assert len([p for p in report["problems"] if "labels are kept" in p["message"]]) == 500
    assert node_patches(cluster, mark) == []
    assert cluster.node_labels() == before
    assert all(all(key in before[name] for key in LEVELS) for name in truth)


def test_changed_topology_rewrites_and_removes_only_managed_keys(kube: KubeCluster, capsys,
                                                                 tmp_path: Path) -> None:
    """A host that moved gets its new values; a level the source stopped reporting is removed with a
    JSON merge patch null; labels topolabel never wrote stay."""
    items, _ = gke_cluster(blocks=1, subblocks=2, hosts=4)
    kube.create_nodes(items)
    kubeconfig = ["--kubeconfig", str(kube.kubeconfig)]
    code, snap = run_cli(capsys, "discover", "--source", "labels", "--preset", "gke", *kubeconfig)
    assert code == 0
    assert run_cli(capsys, "apply", "--snapshot", str(write(tmp_path / "a.json", snap)), *kubeconfig)[0] == 0

    two_levels = {"levels": snap["levels"][:2], "problems": [],
                  "nodes": {name: {k: v for k, v in path.items() if k != "host"}
                            for name, path in snap["nodes"].items()}}
    moved = sorted(two_levels["nodes"])[0]
    two_levels["nodes"][moved]["subblock"] = "moved-here"
    code, report = run_cli(capsys, "apply", "--force", "--snapshot", str(write(tmp_path / "b.json", two_levels)),
                           *kubeconfig)
    assert code == 0 and report["result"]["written"] == 8
    labels = kube.node_labels()
    assert labels[moved]["topolabel.dev/subblock"] == "moved-here"
    assert all("topolabel.dev/host" not in labels[n] for n in labels)
    assert all(labels[n]["cloud.google.com/gce-topology-host"] for n in labels)


def test_patch_node_is_a_json_merge_patch(kube: KubeCluster) -> None:
    """The server accepts topolabel's content type and reads it as RFC 7386: a list is replaced
    (a strategic merge patch would merge ownerReferences by uid), null deletes a key, dryRun stores nothing."""
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "00000000-0000-0000-0000-00000000000a"}
    other = {**owner, "uid": "00000000-0000-0000-0000-00000000000b"}
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "merge-test", "labels": {"keep": "1", "drop": "1"}, "ownerReferences": [owner]}}
    kube.create_nodes([node])
    api = kube.api()

    patch_node(api, "merge-test", {"metadata": {"labels": {"drop": None, "new": "1"}, "ownerReferences": [other]}})
    stored = json.loads(kube.kubectl("get", "node", "merge-test", "-o", "json").stdout)["metadata"]
    assert stored["labels"] == {"keep": "1", "new": "1"}
    assert [ref["uid"] for ref in stored["ownerReferences"]] == [other["uid"]]

    patch_node(api, "merge-test", {"metadata": {"labels": {"keep": None}}}, dry_run=True)
    assert kube.node_labels()["merge-test"] == {"keep": "1", "new": "1"}


def test_bind_operator_grants_a_cluster_role_to_the_plain_user(kube: KubeCluster, tmp_path: Path) -> None:
    """RBAC is on and user topolabel-operator has no groups: it may do only what a bound role allows."""
    name = "topolabel-test-secret-lister"
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}]}
    (tmp_path / "role.yaml").write_text(yaml.safe_dump(role))

    def operator_can(verb: str) -> str:
        return kube.kubectl("auth", "can-i", verb, "secrets", as_operator=True, check=False).stdout.strip()

    assert operator_can("list") == "no" and kube.kubectl("auth", "can-i", "list", "secrets").stdout.strip() == "yes"
    try:
        assert kube.bind_operator(tmp_path / "role.yaml") == name
        deadline = time.monotonic() + 10  # the authorizer reads bindings from its informer cache
        while operator_can("list") != "yes" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert operator_can("list") == "yes" and operator_can("get") == "no"
    finally:  # the cluster is shared with other modules' tests
        kube.kubectl("delete", f"clusterrolebinding/{name}-test-user", f"clusterrole/{name}")


def test_node_status_as_given_and_through_the_status_subresource(kube: KubeCluster) -> None:
    items, _ = gke_cluster(blocks=1, subblocks=1, hosts=2)
    kube.create_nodes(items)
    name = items[0]["metadata"]["name"]
    nodes = {n["metadata"]["name"]: n for n in json.loads(kube.kubectl("get", "nodes", "-o", "json").stdout)["items"]}
    assert nodes[name]["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    kube.set_node_status(name, {"conditions": [{"type": "Ready", "status": "False"}]})
    ready = {n.name: n.ready for n in list_nodes(kube.api())}
    assert ready == {name: False, items[1]["metadata"]["name"]: True}


def test_kueue_crds_install_and_serve_v1beta2(kube_cluster: KubeCluster) -> None:
    kube_cluster.install_kueue_crds()
    names = kube_cluster.kubectl("get", "crd", "-o", "name").stdout.split()
    assert {f"customresourcedefinition.apiextensions.k8s.io/{plural}.kueue.x-k8s.io" for plural in (
        "topologies", "resourceflavors", "clusterqueues", "localqueues", "workloads")} <= set(names)
    topology = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "crd-test"},
                "spec": {"levels": [{"nodeLabel": "topolabel.dev/block"}, {"nodeLabel": "kubernetes.io/hostname"}]}}
    kube_cluster.kubectl("apply", "-f", "-", input=json.dumps(topology))
    try:
        assert kube_cluster.kubectl("get", "topologies.kueue.x-k8s.io", "crd-test", "-o", "name").returncode == 0
    finally:  # the cluster is shared with other modules' tests (the operator's count Topologies)
        kube_cluster.kubectl("delete", "topologies.kueue.x-k8s.io", "crd-test")
