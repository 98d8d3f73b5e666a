"""`topolabel capacity` and the operator's capacity metrics, on clusters small enough to count by hand.

The main cluster (8 GPUs per node):

    b1: r1 {n1, n2}   r2 {n3, n4}
    b2: r3 {n5, n6, n7, n8}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from kueue_config.tas.capacity import parse_pods
from kueue_config.tas.judge import Inputs
from kueue_config.tas.setup import TASSetup
from kueue_config.tas.slots import Shape, capacity, free_room
from labeler.io.nodes import parse_nodes
from testkit.fake_kube_readonly import FakeKube
from testkit.tas_cluster import BLOCK, GPU, GPU_TOLERATION, HOST, RACK, kueue_objects, node_list, pod
from testkit.tas_scenarios import main_cluster
from topolabel.cli import main
from topolabel.operator.capacity import MAX_TOP, CapacityMetrics
from topolabel.operator.kubeapi import Kube
from topolabel.operator.metrics import Metrics

KEYS = [BLOCK, RACK, HOST]
SHAPE = Shape(2, {GPU: "8"}, RACK, queue="gpu", namespace="team")


def inputs(nodes: list[dict[str, Any]] | None = None, pods: list[dict[str, Any]] = (), quota: str = "1000",
           workloads: list[dict[str, Any]] | None = None) -> Inputs:
    kueue = kueue_objects(KEYS, tolerations=[GPU_TOLERATION])
    kueue[2]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = quota
    return Inputs(TASSetup.from_objects(kueue, "test"), parse_nodes(nodes or main_cluster(), "test"),
                  parse_pods(list(pods), "test"), workloads if workloads is not None else [], {"team": {}})


def test_counts_jobs_kueue_would_admit_one_after_another() -> None:
    # a 2-pod rack job: r1 and r2 hold one each, r3 two
    cap = capacity(SHAPE, inputs())
    assert cap.jobs == 4 and cap.cluster_queue == "cq"
    assert sorted(tuple(d["values"]) for p in cap.placements for d in p["domains"]) == [
        ("b1", "r1"), ("b1", "r2"), ("b2", "r3"), ("b2", "r3")]
    assert 'allows to fit only 0 out of 2' in cap.stopped_by or "doesn't allow to fit any of 2" in cap.stopped_by
    [room] = cap.flavors
    rack = next(lv for lv in room.levels if lv.level == RACK)
    assert (rack.domains, rack.largest, rack.largest_domain, rack.holding_job) == (3, 4, "r3", 3)


def test_quota_running_pods_and_drained_domains_count() -> None:
    assert capacity(SHAPE, inputs(quota="32")).jobs == 2  # 16 GPUs a job
    assert "insufficient" in capacity(SHAPE, inputs(quota="32")).stopped_by
    assert capacity(SHAPE, inputs(pods=[pod("a", "n5", 8), pod("b", "n1", 1)])).jobs == 2  # r1 and r3 lose one node
    assert capacity(SHAPE, inputs().drained(["r3"])).jobs == 2
    assert capacity(SHAPE, inputs().drained(["n1", f"{RACK}=r2"])).jobs == 2


def test_the_command_prints_and_emits_json(tmp_path: Path, capsys) -> None:
    (tmp_path / "nodes.yaml").write_text(yaml.safe_dump(node_list(main_cluster())))
    (tmp_path / "kueue.yaml").write_text(yaml.safe_dump_all(kueue_objects(KEYS, tolerations=[GPU_TOLERATION])))
    (tmp_path / "workloads.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": []}))
    args = ["capacity", "--size", "2", "--gpus", "8", "--within", "rack", "--queue", "gpu", "--namespace", "team",
            "--nodes", str(tmp_path / "nodes.yaml"), "--kueue-dir", str(tmp_path / "kueue.yaml"),
            "--workloads", str(tmp_path / "workloads.yaml")]
    assert main([*args, "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["jobs"] == 4 and out["shape"]["level"] == RACK
    assert [lv["largestSlot"] for lv in out["flavors"][0]["levels"]] == [4, 4, 1]
    assert main([*args, "--drain", "b2"]) == 0
    assert "2 would be admitted now" in " ".join(capsys.readouterr().out.split())
    assert main([*args, "--within", "aisle"]) == 2
    assert "level 'aisle' is not in the Topology" in capsys.readouterr().err


def test_free_room_counts_what_tas_counts() -> None:
    [room] = free_room(inputs().setup.flavors["gpus"], inputs(pods=[pod("a", "n5", 8)]), [GPU])
    assert [(lv.level, lv.largest, lv.whole) for lv in room.levels] == [(BLOCK, 32, 1), (RACK, 24, 2), (HOST, 8, 7)]
    assert room.top == {"b1": 32, "b2": 24}


def test_operator_exports_bounded_capacity_metrics(tmp_path: Path) -> None:
    """100 top-level domains: per flavor and level one series each, and at most MAX_TOP domains."""
    nodes = [main_cluster()[0] | {"metadata": {"name": f"m{i}", "labels": {BLOCK: f"blk{i:03d}", RACK: f"r{i}",
                                                                          HOST: f"m{i}"}}} for i in range(100)]
    kueue = kueue_objects(KEYS, tolerations=[GPU_TOLERATION])
    by_plural = {"Topology": "topologies", "ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues",
                 "LocalQueue": "localqueues"}
    lists: dict[str, list[dict[str, Any]]] = {"/api/v1/pods": [pod("p", "m7", 3)],
                                              "/apis/kueue.x-k8s.io/v1beta2/workloads": []}
    for obj in kueue:
        lists.setdefault(f"/apis/kueue.x-k8s.io/v1beta2/{by_plural[obj['kind']]}", []).append(obj)
    metrics = Metrics()
    with FakeKube(lists) as kube:
        from labeler.cluster.kube import connect
        api = connect(str(kube.kubeconfig(tmp_path / "kubeconfig")))
        CapacityMetrics(Kube(api, metrics), metrics).update(parse_nodes(nodes, "test"), [GPU])
        text = metrics.exposition().decode()
        assert 'topolabel_capacity_free{flavor="gpus",level="example.com/block",resource="nvidia.com/gpu"} 8.0' in text
        assert 'topolabel_capacity_free_domains{flavor="gpus",level="example.com/block",resource="nvidia.com/gpu"} 99.0' \
            in text
        assert text.count("topolabel_capacity_domain_free{") == MAX_TOP
        assert 'topolabel_capacity_domain_free{domain="blk007"' not in text  # 5 free: the least, left out
        assert "topolabel_capacity_up 1.0" in text
        del lists["/api/v1/pods"]  # as when the operator may not list pods
        CapacityMetrics(Kube(api, metrics, retries=0), metrics).update(parse_nodes(nodes, "test"), [GPU])
        assert "topolabel_capacity_up 0.0" in metrics.exposition().decode()
