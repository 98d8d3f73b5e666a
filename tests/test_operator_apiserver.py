"""`topolabel run` on a real Kubernetes 1.36 control plane (testkit/kubecluster.py) with Kueue's CRDs, as user
`topolabel-operator` bound only to the manifests' ClusterRole. Writes are counted from the server's audit log;
Kueue objects are server-side applied with field manager `topolabel`."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from hack.synth import gke_cluster
from testkit.environment import ROOT
from testkit.kubecluster import KubeCluster, kube, kube_cluster  # noqa: F401
from testkit.operatorrun import InThread, kill, spawn, stop, wait_until
from topolabel.operator.settings import RunOptions

MANIFESTS = ROOT / "manifests"
OPERATOR = "topolabel-operator"
WRITES = ("create", "update", "patch", "delete", "deletecollection")
NAMESPACES = ("ml-research", "ml-prod")
KUEUE_KINDS = ("topologies", "resourceflavors", "clusterqueues")


@pytest.fixture(scope="session")
def prepared(kube_cluster: KubeCluster) -> KubeCluster:
    """Kueue's CRDs, the TopologyLabeler CRD, the operator user bound to the manifests' ClusterRole."""
    kube_cluster.install_kueue_crds()
    kube_cluster.kubectl("apply", "-f", str(MANIFESTS / "crd.yaml"))
    kube_cluster.wait_established("topologylabelers.topolabel.dev")
    kube_cluster.bind_operator(MANIFESTS)
    for namespace in NAMESPACES:
        kube_cluster.kubectl("create", "namespace", namespace, check=False)
    return kube_cluster


@pytest.fixture
def cluster(kube: KubeCluster, prepared: KubeCluster) -> Iterator[KubeCluster]:  # noqa: F811
    """No nodes, no Kueue objects topolabel made, no workloads, no TopologyLabeler."""
    kinds = ",".join(f"{k}.kueue.x-k8s.io" for k in KUEUE_KINDS)
    kube.kubectl("delete", kinds, "-l", "app.kubernetes.io/managed-by=topolabel")
    kube.kubectl("delete", "localqueues.kueue.x-k8s.io,workloads.kueue.x-k8s.io", "--all", "--all-namespaces")
    kube.kubectl("delete", "topologylabelers.topolabel.dev", "--all")
    yield kube


def options(cluster: KubeCluster, **kw: Any) -> RunOptions:  # noqa: F811
    return RunOptions(kubeconfig=str(cluster.operator_kubeconfig), http_host="127.0.0.1", http_port=0,
                      debounce=0.2, **kw)


def inventory(names: list[str]) -> dict[str, Any]:
    """4 rows x 5 racks, by position."""
    return {"levels": ["row", "rack"],
            "hosts": [{"node": n, "row": f"row{i % 4}", "rack": f"rack{i % 20}"} for i, n in enumerate(names)]}


def racks(cluster: KubeCluster) -> dict[str, str | None]:  # noqa: F811
    return {n: labels.get("topolabel.dev/rack") for n, labels in cluster.node_labels().items()}


def operator_writes(cluster: KubeCluster, since: int, resource: str | None = None) -> list[Any]:  # noqa: F811
    return [e for e in cluster.requests(since, user=OPERATOR, resource=resource) if e.verb in WRITES]


def quiet(cluster: KubeCluster, seconds: float = 0.5) -> bool:  # noqa: F811
    """True when the audit log did not grow for `seconds`: no request is still being served."""
    before = cluster.audit_mark()
    time.sleep(seconds)
    return cluster.audit_mark() == before


def kueue_objects(cluster: KubeCluster, plural: str) -> list[dict[str, Any]]:  # noqa: F811
    return json.loads(cluster.kubectl("get", f"{plural}.kueue.x-k8s.io", "-A", "-o", "json",
                                      "--show-managed-fields").stdout)["items"]


def kueue_names(cluster: KubeCluster, plural: str) -> set[str]:  # noqa: F811
    return {o["metadata"]["name"] for o in kueue_objects(cluster, plural)}


def admit_workload(cluster: KubeCluster, name: str, namespace: str, flavor: str) -> None:  # noqa: F811
    """A Workload holding quota in `flavor`, as Kueue would leave it (no Kueue manager runs here: its
    status is written through the status subresource)."""
    cluster.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": name, "namespace": namespace},
        "spec": {"queueName": "gpu", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}}}]}}))
    cluster.kubectl("patch", "workloads.kueue.x-k8s.io", name, "-n", namespace, "--subresource=status",
                    "--type=merge", "-p", json.dumps({"status": {"admission": {"clusterQueue": "gpu", "podSetAssignments": [
                        {"name": "main", "count": 1, "flavors": {"nvidia.com/gpu": flavor},
                         "resourceUsage": {"nvidia.com/gpu": "1"}}]}}}))


def test_the_manifests_pass_a_server_side_dry_run(prepared: KubeCluster) -> None:
    # the namespace must exist for a dry run of the objects in it (a dry run creates nothing)
    prepared.kubectl("apply", "-f", str(MANIFESTS / "namespace.yaml"))
    out = prepared.kubectl("apply", "--dry-run=server", "-k", str(MANIFESTS)).stdout
    for obj in ("customresourcedefinition.apiextensions.k8s.io/topologylabelers.topolabel.dev",
                "clusterrole.rbac.authorization.k8s.io/topolabel-operator",
                "clusterrolebinding.rbac.authorization.k8s.io/topolabel-operator", "serviceaccount/topolabel",
                "deployment.apps/topolabel", "service/topolabel-metrics"):
        assert f"{obj} " in out, out


def test_the_crd_stores_a_teams_spec_as_written_and_refuses_what_the_config_refuses(prepared: KubeCluster) -> None:
    spec = yaml.safe_load((ROOT / "examples" / "teams.yaml").read_text())
    manifest = {"apiVersion": "topolabel.dev/v1alpha1", "kind": "TopologyLabeler", "metadata": {"name": "teams"},
                "spec": spec}
    out = prepared.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(manifest))
    assert json.loads(out.stdout)["spec"] == spec  # nothing pruned, nothing defaulted
    bad = json.loads(json.dumps(manifest))
    bad["spec"]["kueue"]["clusterQueues"][0]["name"] = "Team-A"
    bad["spec"]["kueue"]["localQueues"][0]["namespaces"] = ["../x"]
    out = prepared.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(bad), check=False)
    assert out.returncode != 0
    assert "spec.kueue.clusterQueues.name" in out.stderr or "spec.kueue.clusterQueues[0].name" in out.stderr, out.stderr
    assert "namespaces" in out.stderr


@pytest.mark.parametrize("source, refused", [
    ({"type": "labels", "preset": "gpc"}, 'spec.source.preset: Unsupported value: "gpc"'),
    ({"type": "labels", "preset": "gke", "inventory": "x"}, "inventory is an option of the inventory source, not of labels"),
    ({"type": "infiniband", "ibTimeout": 0}, "spec.source.ibTimeout"),
    ({"type": "labels", "preset": "gke", "prest": "x"}, None),  # unknown to every source: the operator reports it
    ({"type": "combined", "sources": [{"type": "labels", "preset": "gke"}, {"type": "inventory", "inventory": "x"}]},
     None)])
def test_the_crd_refuses_a_bad_source_option_at_apply(prepared: KubeCluster, source: dict[str, Any],
                                                      refused: str | None) -> None:
    manifest = {"apiVersion": "topolabel.dev/v1alpha1", "kind": "TopologyLabeler", "metadata": {"name": "src"},
                "spec": {"source": source}}
    out = prepared.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(manifest),
                           check=False)
    if refused is None:
        assert out.returncode == 0 and json.loads(out.stdout)["spec"]["source"] == source, out.stderr
    else:
        assert out.returncode != 0 and refused in out.stderr, out.stderr


def test_a_thousand_nodes_one_start_then_zero_writes_and_a_dead_source_loses_nothing(
        cluster: KubeCluster, tmp_path: Path) -> None:  # noqa: F811
    items, _ = gke_cluster(4, 10, 25)
    names = [i["metadata"]["name"] for i in items]
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump(inventory(names)))
    config = tmp_path / "topolabel.yaml"
    config.write_text(yaml.safe_dump({
        "source": {"type": "inventory", "inventory": str(inv)},
        "pools": {"label": "cloud.google.com/gke-accelerator"},
        "kueue": {"topologyName": "dc", "clusterQueue": "gpu",
                  "localQueues": [{"name": "gpu", "namespaces": list(NAMESPACES)}]}}))
    cluster.create_nodes(items)
    start = cluster.audit_mark()
    with InThread(options(cluster, config_path=str(config), resync=3.0)) as op:
        op.wait_passes(1, timeout=180)
        want = {n: f"rack{i % 20}" for i, n in enumerate(names)}
        assert racks(cluster) == want
        assert len(kueue_names(cluster, "topologies")) == 1
        assert len(kueue_names(cluster, "resourceflavors")) == 2
        assert kueue_names(cluster, "clusterqueues") == {"gpu"}
        assert Counter(e.name for e in operator_writes(cluster, start, "nodes")) == {n: 1 for n in names}
        denied = [e for e in cluster.requests(start, user=OPERATOR) if e.code == 403]
        assert denied == []  # the manifests' ClusterRole is enough
        # Kueue objects are server-side applied, by field manager `topolabel` alone
        written = [e for e in operator_writes(cluster, start) if e.resource in (*KUEUE_KINDS, "localqueues")]
        assert {e.verb for e in written} == {"patch"} and {e.resource for e in written} == {*KUEUE_KINDS, "localqueues"}
        for plural in (*KUEUE_KINDS, "localqueues"):
            for obj in kueue_objects(cluster, plural):
                managers = [(m["manager"], m["operation"]) for m in obj["metadata"]["managedFields"]]
                assert managers == [("topolabel", "Apply")], (obj["metadata"]["name"], managers)

        # steady state: full resyncs write nothing at all
        mark = cluster.audit_mark()
        op.wait_passes(op.passes() + 2, timeout=120)
        assert operator_writes(cluster, mark) == []

        # a joining node is labelled within seconds from a per-node discovery
        joined = json.loads(json.dumps(items[0]))
        joined["metadata"]["name"] = joined["metadata"]["labels"]["kubernetes.io/hostname"] = "late-node"
        inv.write_text(yaml.safe_dump({**inventory(names), "hosts": inventory(names)["hosts"] + [
            {"node": "late-node", "row": "row9", "rack": "rack99"}]}))
        cluster.create_nodes([joined])
        wait_until(lambda: racks(cluster).get("late-node") == "rack99", 15, "the joining node's rack label")

        # the source dies: an Event and a condition, no label lost, no node written
        mark = cluster.audit_mark()
        inv.unlink()
        wait_until(lambda: op.conditions.get("SourceAvailable") == ("False", "SourceFailed"), 30, "SourceFailed")
        op.wait_passes(op.passes() + 1, timeout=60)
        assert racks(cluster) == {**want, "late-node": "rack99"}
        assert {e.resource for e in operator_writes(cluster, mark)} <= {"events"}
        assert len(kueue_names(cluster, "resourceflavors")) == 2


def test_killed_and_restarted_on_the_server_each_node_is_written_once(
        cluster: KubeCluster, tmp_path: Path) -> None:  # noqa: F811
    items, truth = gke_cluster(2, 4, 100)  # 800 nodes written one at a time: seconds to kill it mid-way
    config = tmp_path / "topolabel.yaml"
    config.write_text(yaml.safe_dump({"source": {"type": "labels", "preset": "gke"}, "apply": {"concurrency": 1}}))
    cluster.create_nodes(items)
    start = cluster.audit_mark()
    args = ["--kubeconfig", str(cluster.operator_kubeconfig), "--config", str(config), "--http", "127.0.0.1:0"]
    first = spawn(args, tmp_path / "first.log")
    try:
        wait_until(lambda: len(operator_writes(cluster, start, "nodes")) >= 40, 120, "40 node patches", every=0.05)
    finally:
        kill(first)
    wait_until(lambda: quiet(cluster), 30, "the server to finish the patch the kill cut off")
    done = {n for n, labels in cluster.node_labels().items() if labels.get("topolabel.dev/host") == truth[n][2]}
    assert 40 <= len(done) < len(truth), "kill the first run mid-way"
    mark = cluster.audit_mark()
    second = spawn(args, tmp_path / "second.log")
    try:
        wait_until(lambda: all(labels.get("topolabel.dev/host") == truth[n][2]
                               for n, labels in cluster.node_labels().items()), 120, "all nodes labelled", every=0.5)
    finally:
        stop(second)
    # A patch cut off by the kill reaches the audit log with an error code; the server may still have
    # committed it (1.36 does, at times): then its node counts as written by the first run.
    patches = operator_writes(cluster, start, "nodes")
    cut = [e.name for e in patches if e.code >= 300]
    assert len(cut) <= 1  # one patch in flight at a time
    assert {e.name for e in operator_writes(cluster, mark, "nodes") if e.code < 300} == set(truth) - done
    written = Counter(e.name for e in patches if e.code < 300) + Counter(n for n in cut if n in done)
    assert written == {n: 1 for n in truth}


def test_a_topology_level_change_on_the_server(cluster: KubeCluster, tmp_path: Path) -> None:  # noqa: F811
    items, _ = gke_cluster(2, 2, 2)
    cluster.create_nodes(items)
    spec = {"source": {"type": "labels", "preset": "gke"}, "pools": {"label": "cloud.google.com/gke-accelerator"},
            "kueue": {"topologyName": "gke", "clusterQueue": "gpu",
                      "localQueues": [{"name": "gpu", "namespaces": ["ml-research"]}]}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "topolabel.dev/v1alpha1", "kind": "TopologyLabeler", "metadata": {"name": "default"},
        "spec": spec}))
    start = cluster.audit_mark()
    with InThread(options(cluster, resync=2.0)) as op:
        op.wait_passes(1, timeout=120)
        (old_topology,) = kueue_names(cluster, "topologies")
        old_flavors = kueue_names(cluster, "resourceflavors")
        busy = sorted(old_flavors)[0]
        admit_workload(cluster, "train", "ml-research", busy)
        mark = cluster.audit_mark()
        cluster.kubectl("patch", "topologylabeler", "default", "--type=merge", "-p",
                        json.dumps({"spec": {"kueue": {"hostnameLevel": False}}}))
        wait_until(lambda: len(kueue_names(cluster, "topologies")) == 2, 30, "the new Topology")
        op.wait_passes(op.passes() + 1, timeout=60)
        new_topology = (kueue_names(cluster, "topologies") - {old_topology}).pop()
        cq = json.loads(cluster.kubectl("get", "clusterqueues.kueue.x-k8s.io", "gpu", "-o", "json").stdout)
        referenced = {f["name"] for g in cq["spec"]["resourceGroups"] for f in g["flavors"]}
        assert referenced and not referenced & old_flavors
        assert kueue_names(cluster, "resourceflavors") == referenced | {busy}
        status = json.loads(cluster.kubectl("get", "topologylabeler", "default", "-o", "json").stdout)["status"]
        assert f"superseded ResourceFlavor {busy} is kept: admitted workloads hold quota in it" in \
            [p["message"] for p in status["problems"]]
        edited = [e for e in operator_writes(cluster, mark) if e.name in {old_topology, *old_flavors}]
        assert {e.verb for e in edited} <= {"delete"}  # immutable objects are never edited
        # the new levels are a new Topology and new ResourceFlavors (levels and topologyName are immutable):
        # each created by server-side apply (201), never an edit the server's CEL rules would refuse
        created = {(e.resource, e.name) for e in operator_writes(cluster, mark) if e.verb == "patch" and e.code == 201}
        assert created >= {("topologies", new_topology), *(("resourceflavors", f) for f in referenced)}
        assert operator_writes(cluster, mark, "nodes") == []
        events = json.loads(cluster.kubectl("get", "events", "-n", "default", "-o", "json").stdout)["items"]
        assert any(e["reason"] == "KueueUpdated" and e["involvedObject"]["kind"] == "TopologyLabeler" for e in events)

        cluster.kubectl("delete", "workloads.kueue.x-k8s.io", "train", "-n", "ml-research")
        wait_until(lambda: kueue_names(cluster, "topologies") == {new_topology}, 30, "the old Topology to go")
        assert kueue_names(cluster, "resourceflavors") == referenced
    # the whole change, from the first pass to the old objects' removal: the server refused nothing
    assert [e for e in cluster.requests(start, user=OPERATOR) if e.code >= 400] == []


def test_capacity_metrics_with_the_capacity_role_and_without(cluster: KubeCluster, tmp_path: Path) -> None:  # noqa: F811
    """`--capacity-metrics` as shipped (manifests/capacity): the operator, bound to the manifests' ClusterRole and
    manifests/capacity's, exports what TAS counts as free per flavor and level, and the server refuses none of
    its requests; without the capacity role it says `topolabel_capacity_up 0` and labels all the same."""
    items, _ = gke_cluster(2, 2, 2)  # 2 pools (H100 block 0, B200 block 1), 4 nodes each, 8 GPUs a node
    cluster.create_nodes(items)
    node = items[0]["metadata"]["name"]
    cluster.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "busy", "namespace": "ml-research"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x", "resources": {
            "requests": {"nvidia.com/gpu": "3"}, "limits": {"nvidia.com/gpu": "3"}}}]}}))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"source": {"type": "labels", "preset": "gke"},
                                      "pools": {"label": "cloud.google.com/gke-accelerator",
                                                "resources": ["nvidia.com/gpu"]},
                                      "kueue": {"topologyName": "gke", "clusterQueue": "gpu"}}))
    role = cluster.bind_operator(MANIFESTS / "capacity" / "rbac.yaml")
    try:
        start = cluster.audit_mark()
        with InThread(options(cluster, config_path=str(config), capacity_metrics=True, resync=2.0)) as op:
            op.wait_passes(2, timeout=120)
            assert op.sample("topolabel_capacity_up") == 1.0
            flavors = kueue_names(cluster, "resourceflavors")
            free = {(f, lv): op.sample("topolabel_capacity_free", flavor=f, level=lv, resource="nvidia.com/gpu")
                    for f in flavors for lv in ("topolabel.dev/block", "kubernetes.io/hostname")}
            assert sorted(free.values()) == [8.0, 8.0, 29.0, 32.0]  # one block lost 3 GPUs to the pod
            whole = sorted(op.sample("topolabel_capacity_free_domains", flavor=f, level="kubernetes.io/hostname",
                                     resource="nvidia.com/gpu") for f in flavors)
            assert whole == [3.0, 4.0]
        # (the one 404 is the read of a TopologyLabeler that does not exist: the config file is the config)
        assert [e for e in cluster.requests(start, user=OPERATOR) if e.code >= 400
                and (e.resource, e.code) != ("topologylabelers", 404)] == []
    finally:
        cluster.kubectl("delete", "clusterrole", role, "--ignore-not-found")
        cluster.kubectl("delete", "clusterrolebinding", f"{role}-test-user", "--ignore-not-found")
    with InThread(options(cluster, config_path=str(config), capacity_metrics=True, resync=2.0)) as op:
        op.wait_passes(1, timeout=120)
        assert op.sample("topolabel_capacity_up") == 0.0
        assert op.sample("topolabel_errors_total", kind="capacity") >= 1
        assert op.sample("topolabel_nodes", state="labelled") == len(items)
    cluster.kubectl("delete", "pod", "busy", "-n", "ml-research", "--grace-period=0", "--force")
