"""`topolabel fit` against Kueue v0.19's TAS semantics, on clusters small enough to work out by hand.

The main cluster (8 GPUs per node, one pod of 8 GPUs per node in most cases):

    b1: r1 {n1, n2}   r2 {n3, n4}
    b2: r3 {n5, n6, n7, n8}
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from kueue_config.tas.capacity import free_capacity, parse_pods
from kueue_config.tas.fit import fit
from kueue_config.tas.setup import Flavor, Queue
from kueue_config.tas.workloads import workload_of
from labeler.io.nodes import parse_nodes
from testkit.fake_kube_readonly import FakeKube
from testkit.tas_cluster import (BLOCK, GPU_TAINT, GPU_TOLERATION, HOST, RACK, batch_job, kueue_objects, node, node_list,
                               pod, pod_template)
from topolabel.cli import main

REQ = "kueue.x-k8s.io/podset-required-topology"
PREF = "kueue.x-k8s.io/podset-preferred-topology"
SLICE_LEVEL = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
GROUP = "kueue.x-k8s.io/podset-group-name"
UNC = "kueue.x-k8s.io/podset-unconstrained-topology"
LAYERS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
KEYS = (BLOCK, RACK, HOST)
PLACES = {"n1": ("b1", "r1"), "n2": ("b1", "r1"), "n3": ("b1", "r2"), "n4": ("b1", "r2"),
          "n5": ("b2", "r3"), "n6": ("b2", "r3"), "n7": ("b2", "r3"), "n8": ("b2", "r3")}
TOLERATING = Flavor("gpus", {}, (GPU_TOLERATION,), "topo")


def cluster(**overrides: dict[str, Any]) -> list[dict[str, Any]]:
    """The main cluster, every node tainted for GPUs; `overrides[name]` replaces node() arguments."""
    return [node(name, *PLACES[name], **{"taints": [GPU_TAINT], **overrides.get(name, {})}) for name in PLACES]


def run(job: dict, nodes: list[dict], pods: list[dict] = (), keys=KEYS, flavors=(TOLERATING,)) -> dict:
    parsed = parse_nodes(nodes, "test")
    free = free_capacity(parsed, parse_pods(list(pods), "test"))
    queue = Queue.of([replace(f, levels=tuple(keys)) for f in flavors])
    return fit(workload_of(job, "test"), parsed, free, queue).to_dict()


def placed(report: dict, podset: str | None = None) -> dict[str, int]:
    return {n["node"]: n["pods"] for p in report["podsets"] if podset in (None, p["podset"]) for n in p["nodes"]}


def test_required_block_takes_the_first_tightest_block() -> None:
    # b1 and b2 both hold 4: equal, so the first by name; inside b1, racks r1 and r2 take 2 each.
    report = run(batch_job(4, {REQ: BLOCK}), cluster())
    assert report["fits"] and report["level"] == BLOCK and report["pods"] == 4
    assert report["max_pods_in_one_domain"] == 4
    assert report["domains"] == [{"values": ["b1"], "pods": 4}]
    assert placed(report) == {"n1": 1, "n2": 1, "n3": 1, "n4": 1}


def test_required_fails_with_kueues_message_preferred_spreads() -> None:
    report = run(batch_job(5, {REQ: BLOCK}), cluster())
    assert not report["fits"] and report["max_pods_in_one_domain"] == 4
    assert report["message"] == 'topology "topo" allows to fit only 4 out of 5 pod(s)'
    # Preferred: no block holds 5 and block is the top level, so Kueue spreads over blocks. Above the slice
    # level (here the hostname) each step down pools the children of all chosen domains: racks r3 (4)
    # and r1 (1 of 2); then nodes of r3 and r1 together, all holding 1, in name order: n1, n2, n5, n6, n7.
    spread = run(batch_job(5, {PREF: BLOCK}), cluster())
    assert spread["fits"] and spread["placed_level"] == BLOCK
    assert placed(spread) == {"n1": 1, "n2": 1, "n5": 1, "n6": 1, "n7": 1}
    assert spread["domains"] == [{"values": ["b1"], "pods": 2}, {"values": ["b2"], "pods": 3}]


def test_preferred_climbs_a_level_when_not_ready_and_tainted_nodes_shrink_the_rack() -> None:
    # r3 holds 4, so 3 pods fit in one rack: r3, the only rack with room for 3.
    report = run(batch_job(3, {PREF: RACK}), cluster())
    assert report["placed_level"] == RACK and placed(report) == {"n5": 1, "n6": 1, "n7": 1}
    # n5 not Ready (left out entirely) and n6 tainted for maintenance (untolerated): r3 holds 2 like the
    # others, so the rack level fails and Kueue climbs to block: b1 holds 4, b2 2 -> b1; r1 gives 2, r2 1.
    drained = cluster(n5={"ready": False},
                      n6={"taints": [GPU_TAINT, {"key": "maintenance", "value": "drain", "effect": "NoSchedule"}]})
    report = run(batch_job(3, {PREF: RACK}), drained)
    assert report["fits"] and report["placed_level"] == BLOCK
    assert placed(report) == {"n1": 1, "n2": 1, "n3": 1}
    assert report["nodes_counted"] == 7 and report["nodes_excluded"]["not_ready"] == 1
    required = run(batch_job(3, {REQ: RACK}), drained)
    assert not required["fits"] and required["max_pods_in_one_domain"] == 2
    assert required["message"] == ('topology "topo" allows to fit only 2 out of 3 pod(s). Total nodes: 7; '
                                   'excluded: taint "maintenance=drain:NoSchedule": 1')


def test_taints_count_only_when_hostname_is_the_lowest_level() -> None:
    job = batch_job(1, {REQ: RACK})
    job["spec"]["template"]["spec"].pop("tolerations")
    untolerating = Flavor("plain", {}, (), "topo")
    report = run(job, cluster(), flavors=[untolerating])
    assert report["message"] == ('topology "topo" doesn\'t allow to fit any of 1 pod(s). Total nodes: 8; '
                                 'excluded: taint "nvidia.com/gpu=present:NoSchedule": 8')
    assert run(job, cluster(), flavors=[TOLERATING])["fits"]  # the flavor's toleration is added to the pod's
    # Without the hostname level Kueue checks no taints: the rack r1 (two nodes) is the leaf.
    racks = run(job, cluster(), keys=(BLOCK, RACK), flavors=[untolerating])
    assert racks["fits"] and racks["podsets"][0]["nodes"] == [{"domain": "b1/r1", "pods": 1}]


def test_running_non_tas_pods_use_capacity_finished_and_unbound_ones_do_not() -> None:
    pods = [pod("daemon", "n5", 8), pod("done", "n6", 8, phase="Succeeded"), pod("pending", None, 8),
            pod("half", "n7", 4)]
    report = run(batch_job(4, {REQ: RACK}), cluster(), pods)
    # r3: n5 full, n6 free (finished pod), n7 half (no room for 8), n8 free -> 2; r1 2; r2 2.
    assert not report["fits"] and report["max_pods_in_one_domain"] == 2
    assert report["message"].startswith('topology "topo" allows to fit only 2 out of 4 pod(s)')
    two = run(batch_job(2, {REQ: RACK}), cluster(), pods)
    # r1, r2, r3 all hold exactly 2: the first by name, r1.
    assert placed(two) == {"n1": 1, "n2": 1}


def test_slices_keep_each_slice_in_one_rack() -> None:
    # 4 GPUs per pod: 2 pods per node. Slices of 4 pods within a rack: r1 1, r2 1, r3 2; b1 2, b2 2.
    job = batch_job(8, {REQ: BLOCK, SLICE_LEVEL: RACK, SLICE_SIZE: "4"}, gpus=4)
    report = run(job, cluster())
    assert report["fits"] and placed(report) == {"n1": 2, "n2": 2, "n3": 2, "n4": 2}
    # n4 half used: r2 holds 3 pods, no slice; b1 now 1 slice, b2 2 -> b2.
    report = run(job, cluster(), [pod("other", "n4", 4)])
    assert placed(report) == {"n5": 2, "n6": 2, "n7": 2, "n8": 2}
    assert report["max_pods_in_one_domain"] == 8
    three = run(batch_job(12, {REQ: BLOCK, SLICE_LEVEL: RACK, SLICE_SIZE: "4"}, gpus=4), cluster(),
                [pod("other", "n4", 4)])
    assert three["message"] == 'topology "topo" allows to fit only 2 out of 3 slice(s)'


def lws(replicas: int, level: str) -> dict[str, Any]:
    ann = {REQ: level, GROUP: "leader-worker"}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "serve", "namespace": "team", "labels": {"kueue.x-k8s.io/queue-name": "gpu"}},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": {
                "size": 4, "leaderTemplate": pod_template(annotations=ann), "workerTemplate": pod_template(annotations=ann)}}}


def test_leader_and_workers_share_a_rack_and_replicas_queue_behind_each_other() -> None:
    # One group = leader + 3 workers = 4 nodes: only r3 has 4. The leader takes the first node.
    report = run(lws(1, RACK), cluster())
    assert report["fits"]
    assert placed(report, "leader") == {"n5": 1} and placed(report, "worker") == {"n6": 1, "n7": 1, "n8": 1}
    # The second replica is another Workload: r3 is full (its 4 nodes count as excluded by GPUs), r1 and
    # r2 have 2 nodes each.
    report = run(lws(2, RACK), cluster())
    assert not report["fits"]
    assert [(p["workload"], p["podset"], p["fits"]) for p in report["podsets"]] == [
        (0, "leader", True), (0, "worker", True), (1, "leader", False), (1, "worker", False)]
    assert report["message"] == ('topology "topo" allows to fit only 2 out of 3 pod(s). Total nodes: 8; '
                                 'excluded: resource "nvidia.com/gpu": 4')


def test_only_flavor_nodes_with_every_level_label_count() -> None:
    nodes = cluster(n1={"labels": {"pool": "a100"}}, n2={"unschedulable": True})
    nodes.append(node("n9", None, "r9"))  # no block label
    flavor = Flavor("h100", {"pool": "h100"}, (GPU_TOLERATION,), "topo")
    for n in nodes:
        n["metadata"]["labels"].setdefault("pool", "h100")
    report = run(batch_job(1, {REQ: BLOCK}), nodes, flavors=[flavor])
    assert report["nodes_excluded"] == {"not_ready": 0, "unschedulable": 1, "missing_level_labels": 1,
                                        "other_flavor": 1}
    assert report["nodes_counted"] == 6 and report["flavor"] == "h100"


def test_flavors_are_tried_in_order_until_one_fits() -> None:
    nodes = cluster()
    for n in nodes:
        n["metadata"]["labels"]["pool"] = "small" if n["metadata"]["name"] in ("n1", "n2") else "big"
    small = Flavor("small", {"pool": "small"}, (GPU_TOLERATION,), "topo")
    big = Flavor("big", {"pool": "big"}, (GPU_TOLERATION,), "topo")
    report = run(batch_job(4, {REQ: BLOCK}), nodes, flavors=[small, big])
    assert report["flavor"] == "big" and placed(report) == {"n5": 1, "n6": 1, "n7": 1, "n8": 1}


def _files(tmp_path: Path, job: dict, nodes: list, pods: list) -> dict[str, Path]:
    paths = {"job": tmp_path / "job.yaml", "nodes": tmp_path / "nodes.yaml", "pods": tmp_path / "pods.yaml",
             "kueue": tmp_path / "kueue.yaml"}
    paths["job"].write_text(yaml.safe_dump(job))
    paths["nodes"].write_text(yaml.safe_dump(node_list(nodes)))
    paths["pods"].write_text(yaml.safe_dump(node_list(pods) | {"items": pods}))
    paths["kueue"].write_text(yaml.safe_dump_all(kueue_objects(list(KEYS), tolerations=[GPU_TOLERATION])))
    return paths


def test_fit_command_json_and_exit_codes(tmp_path: Path, capsys) -> None:
    f = _files(tmp_path, batch_job(4, {REQ: RACK}), cluster(), [pod("d", "n5", 8)])
    args = ["fit", str(f["job"]), "--nodes", str(f["nodes"]), "--pods", str(f["pods"]), "--kueue-dir", str(f["kueue"])]
    assert main([*args, "-o", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert {k: report[k] for k in ("fits", "level", "pods", "max_pods_in_one_domain", "domains")} == {
        "fits": False, "level": RACK, "pods": 4, "max_pods_in_one_domain": 3, "domains": []}
    f["job"].write_text(yaml.safe_dump(batch_job(3, {REQ: RACK})))
    assert main([*args, "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["domains"] == [{"values": ["b2", "r3"], "pods": 3}] and report["flavor"] == "gpus"
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "fits" in out and "Topology topo" in out


def test_fit_and_show_read_a_live_cluster(tmp_path: Path, capsys) -> None:
    lists = {"/api/v1/nodes": cluster(), "/api/v1/pods": [pod("d", "n5", 8), pod("e", "n1", 8)],
             "/apis/kueue.x-k8s.io/v1beta2/workloads": [], "/apis/scheduling.k8s.io/v1/priorityclasses": [],
             "/api/v1/namespaces": [{"metadata": {"name": "team"}}]}
    for obj in kueue_objects(list(KEYS), tolerations=[GPU_TOLERATION]):
        plural = {"Topology": "topologies", "ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues",
                  "LocalQueue": "localqueues"}[obj["kind"]]
        lists.setdefault(f"/apis/kueue.x-k8s.io/v1beta2/{plural}", []).append(obj)
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(batch_job(4, {REQ: RACK})))  # r1 1, r2 2, r3 3 free nodes
    with FakeKube(lists) as kube:
        config = str(kube.kubeconfig(tmp_path / "kubeconfig"))
        assert main(["fit", str(job), "--kubeconfig", config, "-o", "json"]) == 1
        report = json.loads(capsys.readouterr().out)
        assert report["message"] == ('topology "topo" allows to fit only 3 out of 4 pod(s). Total nodes: 8; '
                                     'excluded: resource "nvidia.com/gpu": 2')
        assert main(["show", "--kubeconfig", config, "-o", "json", "--depth", "2"]) == 0
        shown = json.loads(capsys.readouterr().out)
        pod_queries = [q for path, q in kube.requests if path == "/api/v1/pods"]
    assert pod_queries and pod_queries[0]["fieldSelector"] == ["status.phase!=Succeeded,status.phase!=Failed"]
    [flavor] = shown["flavors"]
    assert [(d["name"], d["free"], d["total"]) for d in flavor["domains"]] == [("b1", 24, 32), ("b2", 24, 32)]
    assert [(r["name"], r["free"]) for r in flavor["domains"][1]["children"]] == [("r3", 24)]


def test_fit_without_a_kueue_setup_is_a_clear_error(tmp_path: Path, capsys) -> None:
    f = _files(tmp_path, batch_job(1, {REQ: RACK}), cluster(), [])
    assert main(["fit", str(f["job"]), "--nodes", str(f["nodes"])]) == 2
    assert "no Kueue set-up" in capsys.readouterr().err


@pytest.mark.parametrize("count", [0, 1])
def test_nothing_to_place_still_answers(count: int) -> None:
    job = batch_job(1, {REQ: RACK})
    job["spec"]["parallelism"] = count
    report = run(job, cluster())
    # Kueue skips TAS for a PodSet of 0 pods and admits the rest
    assert report["fits"] and report["podsets"][0]["placed_pods"] == count
    assert report["podsets"][0]["note"] == ("no pods to place" if count == 0 else "")


def _cli(tmp_path: Path, job: dict, nodes: list, pods: list = (), kueue: list | None = None) -> list[str]:
    f = _files(tmp_path, job, nodes, list(pods))
    if kueue is not None:
        f["kueue"].write_text(yaml.safe_dump_all(kueue))
    return ["fit", str(f["job"]), "--nodes", str(f["nodes"]), "--pods", str(f["pods"]), "--kueue-dir", str(f["kueue"])]


def test_every_running_pod_holds_a_pod_slot_tas_or_not(tmp_path: Path, capsys) -> None:
    # n1..n4 take 3 pods; two DaemonSet pods (no TAS annotation) and one pod carrying only slice
    # annotations (a TAS pod to Kueue) fill n1, n2 and n3: r2 holds 3 one-GPU pods, all on n4.
    nodes = cluster(**{n: {"max_pods": 3} for n in ("n1", "n2", "n3", "n4")})
    slice_only = {SLICE_LEVEL: RACK, SLICE_SIZE: "1"}
    pods = [pod(f"ds-{n}-{i}", n, 0) for n in ("n1", "n2", "n3") for i in range(2)]
    pods += [pod(f"tas-{n}", n, 0, annotations=slice_only) for n in ("n1", "n2", "n3")]
    job = batch_job(4, {REQ: RACK}, gpus=1)
    report = run(job, nodes[:4], pods)
    assert not report["fits"]
    assert report["message"] == ('topology "topo" allows to fit only 3 out of 4 pod(s). Total nodes: 4; '
                                 'excluded: resource "pods": 3')
    assert placed(run(job, nodes[:4], pods[:6])) == {"n3": 1, "n4": 3}  # without the TAS pods n3 keeps a slot


def test_a_job_kueue_rejects_is_an_error_not_an_answer(tmp_path: Path, capsys) -> None:
    args = _cli(tmp_path, batch_job(8, {REQ: BLOCK, SLICE_LEVEL: RACK}), cluster())  # no slice size
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Kueue rejects Job/train" in err and f"{SLICE_SIZE} must be set" in err
    args = _cli(tmp_path, batch_job(8, {REQ: BLOCK, SLICE_LEVEL: RACK, SLICE_SIZE: " 4"}), cluster())
    assert main(args) == 2 and "must be a numeric value" in capsys.readouterr().err


def test_multi_layer_slices_are_judged(tmp_path: Path, capsys) -> None:
    layers = json.dumps([{"topology": BLOCK, "size": 8}, {"topology": RACK, "size": 4}])
    # 4 GPUs per pod, 2 pods per node: b1 holds 2 racks of 4, so 8 pods in slices of 8 per block and 4 per rack
    args = _cli(tmp_path, batch_job(8, {REQ: BLOCK, LAYERS: layers}, gpus=4), cluster())
    assert main([*args, "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert placed(report) == {"n1": 2, "n2": 2, "n3": 2, "n4": 2}
    # n4 half used: r2 holds 3 pods, no rack slice of 4 there; b2's r3 holds 8
    args = _cli(tmp_path, batch_job(8, {REQ: BLOCK, LAYERS: layers}, gpus=4), cluster(), [pod("o", "n4", 4)])
    assert main([*args, "-o", "json"]) == 0
    assert placed(json.loads(capsys.readouterr().out)) == {"n5": 2, "n6": 2, "n7": 2, "n8": 2}


def test_gates_fit_does_not_model_mean_no_guess(tmp_path: Path, capsys) -> None:
    args = _cli(tmp_path, batch_job(2, {PREF: RACK}), cluster())
    assert main([*args, "--kueue-feature-gates", "TASBalancedPlacement=true"]) == 2
    assert "cannot judge: Kueue runs with TASBalancedPlacement on" in capsys.readouterr().err
    required = _cli(tmp_path, batch_job(2, {REQ: RACK}), cluster())
    assert main([*required, "--kueue-feature-gates", "TASBalancedPlacement=true"]) == 0  # not preferred: unaffected
    assert main([*args, "--kueue-feature-gates", "TASBalanced=true"]) == 2
    assert "not NAME=true|false" in capsys.readouterr().err
    elastic = batch_job(2, {UNC: "true"})
    elastic["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    assert main(_cli(tmp_path, elastic, cluster())) == 2
    assert "cannot judge: an elastic job" in capsys.readouterr().err


def test_flavors_are_tried_with_their_own_topologies(tmp_path: Path, capsys) -> None:
    from testkit.tas_scenarios import flavor, queues, topology
    nodes = cluster()
    for n in nodes:
        n["metadata"]["labels"]["pool"] = "small" if n["metadata"]["name"] in ("n1", "n2") else "big"
    kueue = [topology("blocks", [BLOCK, HOST]), topology("racks", [RACK, HOST]),
             flavor("small", "blocks", {"pool": "small"}, [GPU_TOLERATION]),
             flavor("big", "racks", {"pool": "big"}, [GPU_TOLERATION]), *queues(["small", "big"])]
    args = _cli(tmp_path, batch_job(3, {REQ: RACK}), nodes, kueue=kueue)
    assert main([*args, "-o", "json"]) == 0  # "small" has no rack level: Kueue skips it
    report = json.loads(capsys.readouterr().out)
    assert (report["flavor"], report["topology"]) == ("big", "racks") and placed(report) == {"n5": 1, "n6": 1, "n7": 1}
    assert main(args) == 0
    assert "flavor big, Topology racks" in capsys.readouterr().out


def test_a_job_without_tas_goes_to_a_non_tas_flavor(tmp_path: Path, capsys) -> None:
    from testkit.tas_scenarios import flavor, queues, topology
    kueue = [topology("topo", list(KEYS)), flavor("plain", None), flavor("gpus", "topo"), *queues(["plain", "gpus"])]
    args = _cli(tmp_path, batch_job(20), cluster(), kueue=kueue)
    assert main([*args, "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["fits"] and report["podsets"][0]["flavor"] == "plain"
    assert report["podsets"][0]["note"] == "no TAS: Kueue admits it on flavor plain and kube-scheduler places the pods"
    only_tas = [topology("topo", list(KEYS)), flavor("gpus", "topo"), *queues(["gpus"])]
    args = _cli(tmp_path, batch_job(20), cluster(), kueue=only_tas)  # implied TAS: 20 pods, 8 nodes of 1
    assert main([*args, "-o", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["kueue_message"] == (
        'couldn\'t assign flavors to pod set main: topology "topo" allows to fit only 8 out of 20 pod(s)')


def test_the_table_counts_the_pods_its_rows_count_in_80_columns(tmp_path: Path, capsys, monkeypatch) -> None:
    from testkit.tas_scenarios import pytorchjob
    monkeypatch.setenv("COLUMNS", "80")
    nodes = cluster()
    for n in nodes:
        n["metadata"]["labels"]["pool"] = "h100" if n["metadata"]["name"] != "n8" else "b200"
    kueue = kueue_objects(list(KEYS), {"pool": "h100"}, [GPU_TOLERATION])
    job = pytorchjob(1, 5, {REQ: BLOCK, GROUP: "g"}, {REQ: BLOCK, GROUP: "g"})
    assert main(_cli(tmp_path, job, nodes, kueue=kueue)) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(map(len, lines)) <= 80
    text = " ".join(out.split())
    assert text.startswith("PyTorchJob/pt: does not fit - 6 pod(s) in 2 PodSet(s); LocalQueue gpu -> ClusterQueue "
                           "cq, flavor gpus, Topology topo, 7 node(s) counted")
    # b1 has 4 nodes, b2 3 of this flavor; Kueue counts the block's 4 (without the leader) against the 5 workers
    # and names either PodSet of the failing group
    assert ("couldn't assign flavors to pod set master: topology \"topo\" allows to fit only 4 out of 5 pod(s)"
            in text)
    assert "nodes left out: 1 in other pools (not pool=h100, flavor gpus)" in text
    rows = [line.split() for line in lines if line.startswith(("master ", "worker "))]
    assert [int(r[1]) for r in rows] == [1, 5]  # 1 + 5 = the 6 of the first line
