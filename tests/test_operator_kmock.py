"""`topolabel run` against kmock (a stateful Kubernetes emulator): labelling, joins, source failures,
restarts, Topology changes and injected API faults. The same behaviours on a real API server are in
test_operator_apiserver.py; these run in seconds and can break the API on purpose."""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import kmock
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from hack.synth import B200, GKE_KEYS, H100, gke_cluster, node_object
from labeler.io.nodes import MANAGED_ANNOTATION
from testkit.environment import EXAMPLES
from testkit.kmockcluster import MockCluster
from testkit.operatorrun import InThread, kill, spawn, stop, wait_until
from topolabel import version
from topolabel.operator.settings import RunOptions

KEYS = ("topolabel.dev/block", "topolabel.dev/subblock", "topolabel.dev/host")
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
LABELER = "/apis/topolabel.dev/v1alpha1/topologylabelers"
GKE_FLAGS = {"source": "labels", "preset": "gke"}
VERBS = ("get", "list", "watch", "create", "patch", "apply", "delete")


def options(cluster: MockCluster, tmp_path: Path, **kw: Any) -> RunOptions:
    kw.setdefault("resync", 300.0)
    return RunOptions(kubeconfig=str(cluster.kubeconfig(tmp_path)), http_host="127.0.0.1", http_port=0,
                      debounce=0.2, **kw)


def placed(labels: dict[str, str], truth: tuple[str, str, str]) -> bool:
    return tuple(labels.get(k) for k in KEYS) == truth


def node_patches(cluster: MockCluster, since: int = 0) -> list[str]:
    return [s.path.rsplit("/", 1)[-1] for s in cluster.writes(since) if s.path.startswith("/api/v1/nodes/")]


def events(cluster: MockCluster, since: int = 0) -> list[tuple[str, str]]:
    return [(s.data["type"], s.data["reason"]) for s in cluster.writes(since) if s.path.endswith("/events")]


def cluster_queue_named(cluster: MockCluster, name: str) -> dict[str, Any]:
    return cluster.get(f"{KUEUE}/clusterqueues/{name}")


def cluster_queue(cluster: MockCluster) -> dict[str, Any]:
    return cluster_queue_named(cluster, "gpu")


def gpu_quota(cq: dict[str, Any]) -> dict[str, str]:
    return {f["name"]: next(r["nominalQuota"] for r in f["resources"] if r["name"] == "nvidia.com/gpu")
            for g in cq["spec"]["resourceGroups"] for f in g["flavors"]}


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def sample(port: int, name: str, **labels: str) -> float:
    """One sample of the operator's /metrics (0 when absent)."""
    for family in text_string_to_metric_families(http_get(port, "/metrics")[1]):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    return 0.0


def test_labels_nodes_and_applies_kueue_without_a_custom_resource(tmp_path: Path) -> None:
    items, truth = gke_cluster(2, 3, 4)
    with MockCluster(labeler_crd=False) as cluster:
        cluster.create_nodes(items)
        with InThread(options(cluster, tmp_path, flags=GKE_FLAGS, resync=1.0)) as op:
            op.wait_passes(1)
            labels = cluster.node_labels()
            assert all(placed(labels[n], truth[n]) for n in truth)
            objects = {o["metadata"]["name"]: o for p in ("topologies", "resourceflavors", "clusterqueues")
                       for o in cluster.items(f"{KUEUE}/{p}")}
            topo = next(o for o in objects.values() if o["kind"] == "Topology")
            assert [lv["nodeLabel"] for lv in topo["spec"]["levels"]] == [*KEYS, "kubernetes.io/hostname"]
            assert sorted(gpu_quota(objects["gpu"]).values()) == ["96", "96"]  # 12 nodes x 8 GPUs per pool

            # only labels and the managed-keys annotation were written, once per node; kopf left no marks
            patches = [s for s in cluster.writes() if s.path.startswith("/api/v1/nodes/")]
            assert Counter(p.path for p in patches) == {f"/api/v1/nodes/{n}": 1 for n in truth}
            assert all(set(p.data["metadata"]) == {"labels", "annotations"} for p in patches)
            assert all(set(p.data["metadata"]["annotations"]) == {MANAGED_ANNOTATION} for p in patches)
            for node in cluster.items("/api/v1/nodes"):
                meta = node["metadata"]
                assert not meta.get("finalizers")
                assert not [a for a in meta.get("annotations") or {} if "kopf" in a]

            # the steady state: a later resync writes nothing (no labels, Kueue objects, status or Events)
            mark = len(cluster.seen())
            op.wait_passes(op.passes() + 2)
            assert cluster.writes(mark) == []

            assert http_get(op.operator.port, "/healthz")[0] == 200
            assert http_get(op.operator.port, "/readyz")[0] == 200
            code, text = http_get(op.operator.port, "/metrics")
            assert code == 200
            assert 'topolabel_nodes{state="labelled"} 24.0' in text
            assert 'topolabel_node_writes_total 24.0' in text
            assert "topolabel_discovery_duration_seconds_count" in text
            assert f'topolabel_build_info{{version="{version.current()}"}} 1.0' in text
            verbs = {s.labels["verb"] for m in op.operator.metrics.registry.collect()
                     if m.name == "topolabel_api_calls" for s in m.samples}
            assert {"list", "apply", "patch"} <= verbs <= set(VERBS)  # Kubernetes verbs, not HTTP methods


def test_queues_for_two_teams_are_applied_and_a_cohort_dropped_from_the_config_is_deleted(tmp_path: Path) -> None:
    items, _ = gke_cluster(2, 2, 8)  # 16 nodes, 128 GPUs per pool
    spec = yaml.safe_load((EXAMPLES / "teams.yaml").read_text())
    with MockCluster() as cluster:
        cluster.create_nodes(items)
        cluster.call("POST", LABELER, labeler(spec))
        with InThread(options(cluster, tmp_path)) as op:
            op.wait_passes(1)
            assert op.conditions["KueueInSync"] == ("True", "Applied")
            assert [c["metadata"]["name"] for c in cluster.items(f"{KUEUE}/cohorts")] == ["research"]
            queues = {q["metadata"]["name"]: q["spec"] for q in cluster.items(f"{KUEUE}/clusterqueues")}
            assert sorted(queues) == ["team-a", "team-b"]
            assert {q["cohortName"] for q in queues.values()} == {"research"}
            assert sorted(gpu_quota({"spec": queues["team-b"]}).values()) == ["64", "64"]
            local = {(q["metadata"]["namespace"], q["spec"]["clusterQueue"])
                     for q in cluster.items(f"{KUEUE}/localqueues")}
            assert local == {("team-a", "team-a"), ("team-b", "team-b")}

            # the Cohort object leaves the config: it is deleted; the queues still share the (implicit) cohort
            cluster.call("PATCH", f"{LABELER}/default", {"spec": {"kueue": {"cohorts": []}}})
            wait_until(lambda: cluster.items(f"{KUEUE}/cohorts") == [], 10, "the Cohort to be deleted")
            assert cluster_queue_named(cluster, "team-a")["spec"]["cohortName"] == "research"
            assert op.conditions["KueueInSync"] == ("True", "Applied")


def test_a_kueue_without_cohorts_still_gets_its_queues(tmp_path: Path) -> None:
    items, _ = gke_cluster(1, 1, 2)
    with MockCluster(cohorts=False) as cluster:
        cluster.create_nodes(items)
        with InThread(options(cluster, tmp_path, flags=GKE_FLAGS)) as op:
            op.wait_passes(1)
            assert op.conditions["KueueInSync"] == ("True", "Applied")
            assert cluster_queue(cluster) is not None
            assert op.sample("topolabel_api_calls_total", verb="list", resource="cohorts", code="404") >= 1


def test_json_logs_carry_node_source_and_reason_and_the_start_calls_no_node_joining(tmp_path: Path) -> None:
    """A node that was there (unplaceable) before the operator started is not "joining" when kopf's first
    events show it; a node that joins later is, in a JSON record with its name, the source and the reason."""
    items, truth = gke_cluster(1, 1, 3)
    old, new = "gke-a3-old-n000", "gke-a3-b00-s00-n099"
    with MockCluster(labeler_crd=False) as cluster:
        cluster.create_nodes([*items, node_object(old, {}, H100, "us-central1-b")])
        log = tmp_path / "operator.log"
        proc = spawn(["--kubeconfig", str(cluster.kubeconfig(tmp_path)), "--source", "labels", "--preset", "gke",
                      "--http", "127.0.0.1:0", "--log-format", "json"], log)
        try:
            port = int(wait_until(lambda: re.search(r"on http://127.0.0.1:(\d+)", log.read_text()), 60,
                                  "the metrics port").group(1))
            # kopf's first events show every node, the unplaceable one too: wait for the pass they start
            wait_until(lambda: sample(port, "topolabel_syncs_total", scope="nodes") >= 1, 60, "the first node pass")
            assert all(placed(cluster.node_labels()[n], truth[n]) for n in truth)
            assert sample(port, "topolabel_discovery_duration_seconds_count", source="labels", scope="join") == 0
            cluster.create_nodes([node_object(new, dict(zip(GKE_KEYS, ("b0", "s0", "h99"))), H100, "us-central1-b")])
            wait_until(lambda: f"labelled node {new}" in log.read_text(), 30, "the joining node labelled in the log")
            assert sample(port, "topolabel_discovery_duration_seconds_count", source="labels", scope="join") == 1
        finally:
            stop(proc)
    records = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert records and all({"time", "level", "logger", "message"} <= set(r) for r in records)
    assert [(r.get("source"), r["reason"], r["message"].split(":")[0]) for r in records if r.get("node") == new] == [
        ("labels", "Joined", f"placed joining node {new}"), (None, "NodeLabelled", f"labelled node {new}")]
    # the node unplaceable from the start is said once, as unplaced, never as joining
    assert [(r["reason"], r["level"]) for r in records if r.get("node") == old] == [("Unplaced", "WARNING")]
    assert not [r for r in records if old in r["message"] and r.get("node") != old]
    labelled = {r["node"] for r in records if r.get("reason") == "NodeLabelled"}
    assert labelled == {*truth, new}  # every node written, one record each
    assert any(r.get("reason") == "Labelled" and r.get("source") == "labels" for r in records)  # an Event
    started = [r for r in records if r.get("reason") == "Started"]
    assert len(started) == 1 and re.match(r"topolabel \S+: config from flags, source labels", started[0]["message"])


def test_joining_nodes_are_labelled_within_seconds_and_leaving_ones_leave_the_quota(tmp_path: Path) -> None:
    items, truth = gke_cluster(2, 1, 3)
    with MockCluster() as cluster:
        cluster.create_nodes(items)
        with InThread(options(cluster, tmp_path, flags=GKE_FLAGS)) as op:  # resync 300 s: only events act
            op.wait_passes(1)
            before = gpu_quota(cluster_queue(cluster))

            # a node joins block 0 with GKE's labels: labelled from a per-node discovery
            mark = len(cluster.seen())
            joined = node_object("gke-a3-b00-s00-n099", dict(zip(GKE_KEYS, ("b0-new", "s0-new", "h-new"))), H100,
                                 "us-central1-b")
            started = time.monotonic()
            cluster.create_nodes([joined])
            wait_until(lambda: placed(cluster.node_labels()["gke-a3-b00-s00-n099"], ("b0-new", "s0-new", "h-new")),
                       10, "the joining node's labels")
            assert time.monotonic() - started < 10
            assert node_patches(cluster, mark) == ["gke-a3-b00-s00-n099"]
            assert op.passes("full") == 1
            after = wait_until(lambda: gpu_quota(cluster_queue(cluster)) != before and gpu_quota(cluster_queue(cluster)),
                               10, "the ClusterQueue to count the new node")
            assert sorted(int(v) for v in after.values()) == [24, 32]

            # a node leaves: nothing is written to nodes, the quota shrinks
            mark = len(cluster.seen())
            cluster.delete_node(items[0]["metadata"]["name"])
            wait_until(lambda: sorted(int(v) for v in gpu_quota(cluster_queue(cluster)).values()) == [24, 24], 10,
                       "the ClusterQueue to drop the node that left")
            assert node_patches(cluster, mark) == []

            # a node that joins before the cloud labelled it is left alone, then labelled once it is
            cluster.create_nodes([node_object("gke-a4-b01-s00-n042", {}, B200, "us-central1-b")])
            wait_until(lambda: "gke-a4-b01-s00-n042" in op.operator.controller.join_problems, 10,
                       "the unlabelled node reported as not placed")
            assert not any(k in cluster.node_labels()["gke-a4-b01-s00-n042"] for k in KEYS)
            cluster.patch_node("gke-a4-b01-s00-n042", {"metadata": {"labels": dict(zip(GKE_KEYS, ("b1", "s1", "h1")))}})
            wait_until(lambda: placed(cluster.node_labels()["gke-a4-b01-s00-n042"], ("b1", "s1", "h1")), 10,
                       "the late-labelled node's labels")
            assert op.passes("full") == 1


def inventory_nodes(count: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """`count` nodes and an inventory placing them in 2 rows x 2 racks."""
    items = [node_object(f"n{i:02d}", {"nvidia.com/gpu.product": "H100"}, H100, "dc1") for i in range(count)]
    hosts = [{"node": f"n{i:02d}", "row": f"row{i % 2}", "rack": f"rack{i % 4}"} for i in range(count)]
    return items, {"levels": ["row", "rack"], "hosts": hosts}


def labeler(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "topolabel.dev/v1alpha1", "kind": "TopologyLabeler", "metadata": {"name": "default"},
            "spec": spec}


def test_a_failing_or_partial_source_loses_no_label(tmp_path: Path) -> None:
    items, inventory = inventory_nodes(8)
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump(inventory))
    with MockCluster() as cluster:
        cluster.create_nodes(items)
        cluster.call("POST", LABELER, labeler({"source": {"type": "inventory", "inventory": str(inv)},
                                               "kueue": {"clusterQueue": "gpu"}}))
        with InThread(options(cluster, tmp_path, resync=1.0)) as op:
            op.wait_passes(1)
            labelled = cluster.node_labels()
            assert all(labelled[f"n{i:02d}"]["topolabel.dev/rack"] == f"rack{i % 4}" for i in range(8))
            quota = gpu_quota(cluster_queue(cluster))

            # the source fails: Event and condition, the last good topology stays, nothing is written to nodes
            mark = len(cluster.seen())
            inv.unlink()
            wait_until(lambda: op.conditions.get("SourceAvailable") == ("False", "SourceFailed"), 10, "SourceFailed")
            op.wait_passes(op.passes() + 1)
            assert ("Warning", "SourceFailed") in events(cluster, mark)
            status = cluster.get(f"{LABELER}/default")["status"]
            source = next(c for c in status["conditions"] if c["type"] == "SourceAvailable")
            assert source["status"] == "False" and "inventory.yaml: cannot read: No such file" in source["message"]
            assert node_patches(cluster, mark) == []
            assert cluster.node_labels() == labelled

            # the source answers for half the nodes: the others keep their labels and their quota
            inv.write_text(yaml.safe_dump({**inventory, "hosts": inventory["hosts"][:4]}))
            wait_until(lambda: op.conditions.get("SourceAvailable") == ("True", "Discovered"), 10, "recovery")
            op.wait_passes(op.passes() + 1)
            assert ("Normal", "Discovered") in events(cluster, mark)
            assert node_patches(cluster, mark) == []
            assert cluster.node_labels() == labelled
            assert gpu_quota(cluster_queue(cluster)) == quota


def test_a_plan_that_rewrites_too_many_nodes_is_refused(tmp_path: Path) -> None:
    items, truth = gke_cluster(1, 2, 4)
    with MockCluster() as cluster:
        cluster.create_nodes(items)
        cluster.call("POST", LABELER, labeler({"source": {"type": "labels", "preset": "gke"}}))
        with InThread(options(cluster, tmp_path)) as op:  # resync 300 s: the spec change below starts a pass
            op.wait_passes(1)
            mark = len(cluster.seen())
            for name in sorted(truth)[:4]:  # half the nodes report another subblock (limit: 25 %)
                cluster.patch_node(name, {"metadata": {"labels": {GKE_KEYS[1]: "renumbered"}}})
            wait_until(lambda: op.passes("nodes") >= 1, 10, "the node pass for the changed nodes")
            cluster.call("PATCH", f"{LABELER}/default", {"spec": {"plan": {"maxChangeFraction": 0.25}}})
            wait_until(lambda: op.conditions.get("LabelsInSync") == ("False", "PlanRefused"), 10, "PlanRefused")
            assert ("Warning", "PlanRefused") in events(cluster, mark)
            message = op.operator.controller.conditions.items["LabelsInSync"].message
            assert "raise spec.plan.maxChangeFraction of TopologyLabeler default" in message
            assert "`topolabel apply --force`" in message and "rerun with --force" not in message
            assert node_patches(cluster, mark) == []
            assert all(placed(labels, truth[n]) for n, labels in cluster.node_labels().items())


def test_an_invalid_spec_stays_reported_until_it_is_fixed(tmp_path: Path) -> None:
    """Passes after a refused spec go on with the last valid config and say so; they never make the refused
    spec look applied (ConfigValid stays false, Ready carries its reason) until a valid one comes."""
    items, truth = gke_cluster(1, 2, 2)
    with MockCluster() as cluster:
        cluster.create_nodes(items)
        cluster.call("POST", LABELER, labeler({"source": {"type": "labels", "preset": "gke"}}))
        with InThread(options(cluster, tmp_path, resync=1.0)) as op:
            op.wait_passes(1)
            mark = len(cluster.seen())
            cluster.call("PATCH", f"{LABELER}/default", {"spec": {"source": {"preset": "gpc"}}})
            wait_until(lambda: op.conditions.get("ConfigValid") == ("False", "ConfigInvalid"), 10, "ConfigInvalid")
            op.wait_passes(op.passes() + 2)  # two full passes with the old settings
            status = cluster.get(f"{LABELER}/default")["status"]
            conditions = {c["type"]: c for c in status["conditions"]}
            assert conditions["ConfigValid"]["status"] == "False"
            assert "gpc" in conditions["ConfigValid"]["message"]
            assert "still working with the last valid config" in conditions["ConfigValid"]["message"]
            assert conditions["SourceAvailable"]["status"] == "True"  # the old settings still discover
            ready = conditions["Ready"]
            assert (ready["status"], ready["reason"]) == ("False", "ConfigInvalid")
            assert ready["message"].startswith("ConfigValid: ") and "gpc" in ready["message"]
            assert events(cluster, mark).count(("Warning", "ConfigInvalid")) == 1
            assert all(placed(labels, truth[n]) for n, labels in cluster.node_labels().items())

            cluster.call("PATCH", f"{LABELER}/default", {"spec": {"source": {"preset": "gke"}}})
            wait_until(lambda: op.conditions.get("ConfigValid") == ("True", "Valid"), 10, "the config valid again")
            op.wait_passes(op.passes() + 1)
            ready = next(c for c in cluster.get(f"{LABELER}/default")["status"]["conditions"] if c["type"] == "Ready")
            assert (ready["status"], ready["reason"]) == ("True", "InSync")
            assert ("Normal", "Valid") in events(cluster, mark)


def test_a_topology_level_change_makes_new_objects_and_keeps_what_workloads_use(tmp_path: Path) -> None:
    items, truth = gke_cluster(2, 1, 2)
    spec = {"source": {"type": "labels", "preset": "gke"}, "pools": {"label": "cloud.google.com/gke-accelerator"},
            "kueue": {"topologyName": "gke", "clusterQueue": "gpu", "localQueues": [{"name": "gpu", "namespaces": ["ml"]}]}}
    with MockCluster() as cluster:
        cluster.create_nodes(items)
        cluster.call("POST", LABELER, labeler(spec))
        with InThread(options(cluster, tmp_path, resync=1.0)) as op:
            op.wait_passes(1)
            old_topology = cluster.items(f"{KUEUE}/topologies")[0]["metadata"]["name"]
            old_flavors = sorted(gpu_quota(cluster_queue(cluster)))
            busy = old_flavors[0]  # an admitted workload holds quota in this one
            cluster.call("POST", f"{KUEUE}/namespaces/ml/workloads", {
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "metadata": {"name": "train", "namespace": "ml"}, "spec": {"queueName": "gpu"},
                "status": {"admission": {"clusterQueue": "gpu", "podSetAssignments": [
                    {"name": "main", "flavors": {"nvidia.com/gpu": busy}}]}}})

            mark = len(cluster.seen())
            cluster.call("PATCH", f"{LABELER}/default", {"spec": {"kueue": {"hostnameLevel": False}}})
            new_topology = wait_until(lambda: [t["metadata"]["name"] for t in cluster.items(f"{KUEUE}/topologies")
                                               if t["metadata"]["name"] != old_topology], 10, "the new Topology")[0]
            op.wait_passes(op.passes() + 1)
            new_flavors = sorted(gpu_quota(cluster_queue(cluster)))
            assert not set(new_flavors) & set(old_flavors)
            flavors = {f["metadata"]["name"]: f for f in cluster.items(f"{KUEUE}/resourceflavors")}
            assert all(flavors[f]["spec"]["topologyName"] == new_topology for f in new_flavors)
            assert set(flavors) == {*new_flavors, busy}  # the unused old flavor is gone, the busy one kept
            topologies = {t["metadata"]["name"] for t in cluster.items(f"{KUEUE}/topologies")}
            assert topologies == {old_topology, new_topology}  # the busy flavor still refers to the old one
            kept = [p["message"] for p in cluster.get(f"{LABELER}/default")["status"]["problems"]]
            assert f"superseded ResourceFlavor {busy} is kept: admitted workloads hold quota in it" in kept
            # immutable objects were never edited: only created or deleted
            for s in cluster.writes(mark):
                if s.path.startswith(f"{KUEUE}/topologies/") or s.path.startswith(f"{KUEUE}/resourceflavors/"):
                    assert s.method == "DELETE" or s.path.rsplit("/", 1)[-1] not in {old_topology, *old_flavors}
            assert node_patches(cluster, mark) == []

            # the workload finishes: the next resync deletes what was kept
            cluster.call("DELETE", f"{KUEUE}/namespaces/ml/workloads/train")
            wait_until(lambda: {t["metadata"]["name"] for t in cluster.items(f"{KUEUE}/topologies")} == {new_topology},
                       10, "the old Topology to go")
            assert {f["metadata"]["name"] for f in cluster.items(f"{KUEUE}/resourceflavors")} == set(new_flavors)


def test_api_faults_are_retried_and_a_dropped_watch_resumes(tmp_path: Path) -> None:
    items, truth = gke_cluster(1, 2, 3)
    with MockCluster() as cluster:
        cluster.create_nodes(items)

        def inject(h: Any) -> None:
            nodes = kmock.resource("v1/nodes")
            h["patch", nodes][:2] << 429 << {"Retry-After": "1"} << {"kind": "Status", "code": 429}
            h["patch", nodes][2:4] << 500 << {"kind": "Status", "code": 500}
            h["patch", nodes][4:5] << 409 << {"kind": "Status", "code": 409}
            h["watch", nodes][:1] << b""  # the first watch ends at once
            # (a fault on a write would still change kmock's object, so the Kueue fault is on a read)
            h["list", kmock.resource("kueue.x-k8s.io/v1beta2/clusterqueues")][:1] << 503 << {"kind": "Status"}

        cluster.in_loop(inject)
        with InThread(options(cluster, tmp_path, flags=GKE_FLAGS)) as op:
            op.wait_passes(1)
            assert all(placed(labels, truth[n]) for n, labels in cluster.node_labels().items())
            assert cluster_queue(cluster) is not None
            for code, count in (("429", 2), ("500", 2), ("409", 1)):
                assert op.sample("topolabel_api_calls_total", verb="patch", resource="nodes", code=code) == count
            assert op.sample("topolabel_api_calls_total", verb="list", resource="clusterqueues", code="503") == 1
            assert op.sample("topolabel_errors_total", kind="labels") == 0
            assert op.sample("topolabel_nodes", state="labelled") == len(truth)
            # kopf watches again after the dropped watch, and a label removed by hand is put back
            wait_until(lambda: len([s for s in cluster.seen() if s.method == "GET" and s.path == "/api/v1/nodes"
                                    and s.agent.startswith("kopf")]) >= 2, 10, "kopf's second watch")
            name = sorted(truth)[0]
            cluster.patch_node(name, {"metadata": {"labels": {KEYS[2]: None}}})
            wait_until(lambda: placed(cluster.node_labels()[name], truth[name]), 10, "the label put back")


def test_failed_writes_are_retried_with_backoff_long_before_the_resync(tmp_path: Path) -> None:
    """The Kueue objects refused (403, which no call retries) four times and a node's patch three times: retry
    passes about 1, 2, 4 and 8 s apart heal both, where the resync (300 s) would have waited minutes."""
    items, truth = gke_cluster(1, 2, 2)
    config = tmp_path / "topolabel.yaml"
    config.write_text(yaml.safe_dump({"source": {"type": "labels", "preset": "gke"},
                                      "kueue": {"clusterQueue": "gpu"}}))
    name = sorted(truth)[0]
    forbidden = {"kind": "Status", "code": 403, "reason": "Forbidden"}
    with MockCluster() as cluster:
        cluster.create_nodes(items)

        def inject(h: Any) -> None:
            h["list", kmock.resource("kueue.x-k8s.io/v1beta2/clusterqueues")][:4] << 403 << forbidden
            h[f"patch /api/v1/nodes/{name}"][:3] << 403 << forbidden

        cluster.in_loop(inject)
        with InThread(options(cluster, tmp_path, config_path=str(config))) as op:
            wait_until(lambda: op.conditions.get("KueueInSync") == ("False", "ReadFailed"), 20, "ReadFailed")
            failed_at = time.monotonic()
            wait_until(lambda: op.conditions.get("KueueInSync") == ("True", "Applied"), 40, "the Kueue objects")
            healed = time.monotonic() - failed_at
            wait_until(lambda: placed(cluster.node_labels()[name], truth[name]), 10, "the refused node labelled")
            assert op.passes("full") == 1  # healed by retry passes, not by a resync
            assert op.passes("retry") == 4
            assert op.sample("topolabel_api_calls_total", verb="list", resource="clusterqueues", code="403") == 4
            assert 1 + 2 + 4 + 8 - 1 <= healed < 60, healed  # the delays doubled, and it healed long before 300 s
            assert cluster_queue(cluster) is not None
            op.wait_passes(1, "retry")
            time.sleep(3)
            assert op.passes("retry") == 4  # nothing failing: no more retries


def test_killed_and_restarted_mid_run_converges_without_writing_a_node_twice(tmp_path: Path) -> None:
    items, truth = gke_cluster(2, 2, 10)  # 40 nodes (kmock answers slower the more requests it has seen)
    config = tmp_path / "topolabel.yaml"
    config.write_text(yaml.safe_dump({"source": {"type": "labels", "preset": "gke"}, "apply": {"concurrency": 1}}))
    with MockCluster() as cluster:
        cluster.create_nodes(items)

        async def slow() -> None:  # each node patch waits 0.15 s, then kmock serves it as usual
            await asyncio.sleep(0.15)
            raise NotImplementedError

        cluster.in_loop(lambda h: h["patch", kmock.resource("v1/nodes")] << slow)
        args = ["--kubeconfig", str(cluster.kubeconfig(tmp_path)), "--config", str(config), "--http", "127.0.0.1:0"]
        first = spawn(args, tmp_path / "first.log")
        try:
            wait_until(lambda: len(node_patches(cluster)) >= 10, 60, "10 nodes written by the first run", every=0.05)
        finally:
            kill(first)
        done_before = {n for n, labels in cluster.node_labels().items() if placed(labels, truth[n])}
        assert 10 <= len(done_before) < len(truth)
        mark = len(cluster.seen())
        second = spawn(args, tmp_path / "second.log")
        try:
            wait_until(lambda: all(placed(labels, truth[n]) for n, labels in cluster.node_labels().items()), 60,
                       "every node labelled after the restart", every=0.5)
        finally:
            stop(second)
        assert set(node_patches(cluster, mark)) == set(truth) - done_before
        assert Counter(node_patches(cluster)) == {n: 1 for n in truth}


def test_stale_labels_are_reported_as_drift_then_corrected(tmp_path: Path) -> None:
    """What `topolabel verify` reports, the operator exposes as a metric and an Event (and then fixes)."""
    items, truth = gke_cluster(1, 2, 4)
    stale = sorted(truth)[:2]
    for item in items:
        if item["metadata"]["name"] in stale:
            item["metadata"]["labels"].update({k: v for k, v in zip(KEYS, truth[item["metadata"]["name"]])})
            item["metadata"]["labels"][KEYS[1]] = "moved-long-ago"
            item["metadata"].setdefault("annotations", {})["topolabel.dev/managed-labels"] = ",".join(sorted(KEYS))
    with MockCluster() as cluster:
        cluster.create_nodes(items)
        with InThread(options(cluster, tmp_path, flags=GKE_FLAGS)) as op:
            op.wait_passes(1)
            assert op.sample("topolabel_drift_nodes") == len(stale)
            assert ("Warning", "Drift") in events(cluster)
            drift = next(s.data["message"] for s in cluster.writes() if s.path.endswith("/events")
                         and s.data["reason"] == "Drift")
            assert f"{stale[0]} subblock: moved-long-ago -> {truth[stale[0]][1]}" in drift
            assert all(placed(labels, truth[n]) for n, labels in cluster.node_labels().items())
