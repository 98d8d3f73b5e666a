"""The aws source against moto's EC2 server (with DescribeInstanceTopology added) through a real boto client."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from labeler.errors import SourceError
from labeler.io.nodes import Node
from labeler.topology.model import Snapshot
from labeler.topology.placement import level_keys, to_snapshot
from providers.aws import discover
from providers.base import SourceContext
from providers.labels import discover as discover_labels
from testkit.moto_topology import MAX_IDS, TopologyServer, _module_topology_server, topology_server  # noqa: F401

EKS_LAYER = "topology.k8s.aws/network-node-layer-"


def nodes_for(ids: list[str], zone: str, prefix: str, instance_type: str = "p5.48xlarge") -> list[Node]:
    return [Node(name=f"{prefix}-{n}", provider_id=f"aws:///{zone}/{i}",
                 labels={"node.kubernetes.io/instance-type": instance_type}) for n, i in enumerate(ids)]


def run(server: TopologyServer, nodes: list[Node], **options: Any) -> Snapshot:
    found = discover(SourceContext(nodes=nodes, options={"endpoint_url": server.url, **options}, origin="test"))
    return to_snapshot(found, level_keys(found.level_names))


def test_cluster_over_three_regions_with_both_depths_and_every_unplaced_kind(topology_server: TopologyServer) -> None:
    s = topology_server
    s.fabric.stopped = "omit"
    east = s.launch("us-east-1", 250)  # more than 100 ids: three batches
    s.place_tree(east, "east")
    west = s.launch("us-west-2", 20, "p6-b200.48xlarge", zone="us-west-2b")
    s.place_tree(west, "west", layers=4)
    eu = s.launch("eu-west-1", 3, "m5.large")  # a type without topology: never placed
    stopped = east[:2]
    s.stop("us-east-1", stopped)
    nodes = nodes_for(east, "us-east-1a", "e") + nodes_for(west, "us-west-2b", "w", "p6-b200.48xlarge")
    nodes += nodes_for(eu, "eu-west-1a", "eu", "m5.large")

    snap = run(s, nodes)

    assert [lv.name for lv in snap.levels] == ["layer-1", "layer-2", "layer-3", "layer-4"]
    assert len(snap.nodes) == 250 - 2 + 20
    assert snap.nodes["e-10"] == {"layer-1": "nn-east", "layer-2": "nn-east-s0", "layer-3": "nn-east-l1",
                                  "layer-4": "nn-east-l1"}
    assert snap.nodes["w-3"]["layer-4"] == "nn-west-l0-e1"
    per_node = {p.node: p.message for p in snap.problems if p.node}
    assert set(per_node) == {"e-0", "e-1", "eu-0", "eu-1", "eu-2"}
    assert "m5.large" in per_node["eu-0"]
    assert any(p.node is None and "fewer than 4 levels" in p.message for p in snap.problems)
    assert s.calls == {"us-east-1": 3, "us-west-2": 1, "eu-west-1": 1}


def test_stopped_instances_listed_with_empty_network_nodes_are_problems(topology_server: TopologyServer) -> None:
    s = topology_server
    s.fabric.stopped = "empty"
    ids = s.launch("us-east-1", 4)
    s.place_tree(ids, "a")
    s.stop("us-east-1", ids[:1])
    snap = run(s, nodes_for(ids, "us-east-1a", "n"))
    assert set(snap.nodes) == {"n-1", "n-2", "n-3"}
    assert [p.node for p in snap.problems] == ["n-0"] and "no network nodes" in snap.problems[0].message


def test_calls_are_batches_plus_extra_pages_and_follow_the_api_rules(topology_server: TopologyServer) -> None:
    s = topology_server
    s.fabric.page_size = 30
    counts = {"us-east-1": 230, "us-east-2": 100, "ap-northeast-1": 1}
    nodes = []
    for region, count in counts.items():
        ids = s.launch(region, count)
        s.place_tree(ids, region)
        nodes += nodes_for(ids, f"{region}a", region)
    snap = run(s, nodes)
    assert len(snap.nodes) == sum(counts.values()) and not snap.problems
    for region, count in counts.items():
        batch_sizes = [min(MAX_IDS, count - start) for start in range(0, count, MAX_IDS)]
        assert s.calls[region] == sum(math.ceil(size / 30) for size in batch_sizes)
        assert len(batch_sizes) == math.ceil(count / MAX_IDS)
    assert all(0 < len(r.ids) <= MAX_IDS and r.max_results is None for r in s.fabric.requests)
    assert sum(1 for r in s.fabric.requests if r.next_token) == sum(s.calls.values()) - 3 - 1 - 1


def test_values_equal_what_eks_writes_so_the_sources_agree(topology_server: TopologyServer) -> None:
    s = topology_server
    ids = s.launch("us-east-1", 12) + s.launch("us-east-1", 4, "p6-b200.48xlarge")
    s.place_tree(ids[:12], "x")
    s.place_tree(ids[12:], "x", per_leaf=2, layers=4)
    nodes = nodes_for(ids, "us-east-1a", "n")
    snap = run(s, nodes)
    labelled = []  # the same nodes as EKS labels them: one label per NetworkNodes element
    for n in nodes:
        network_nodes = s.fabric.topology[n.provider_id.rsplit("/", 1)[1]][0]
        labels = {f"{EKS_LAYER}{i}": nn for i, nn in enumerate(network_nodes, start=1)}
        labelled.append(Node(name=n.name, labels=labels))
    found = discover_labels(SourceContext(nodes=labelled, options={"preset": "eks"}))
    from_labels = to_snapshot(found, level_keys(found.level_names))
    assert snap.levels == from_labels.levels
    assert snap.nodes == from_labels.nodes


def test_capacity_blocks_equal_what_the_eks_preset_reads(topology_server: TopologyServer) -> None:
    """EKS's capacity-block-id label beside the layers: the eks preset and --capacity-block-level agree."""
    s = topology_server
    ids = s.launch("us-east-1", 6, "p6e-gb200.36xlarge") + s.launch("us-east-1", 2)
    for n, instance in enumerate(ids):
        s.place(instance, ["nn-1", "nn-2", f"nn-3{n // 4}"], "cr-ultra" if n < 4 else None)
    nodes = nodes_for(ids, "us-east-1a", "u")
    snap = run(s, nodes, capacity_block_level=True)
    labelled = []
    for n in nodes:
        network_nodes, block = s.fabric.topology[n.provider_id.rsplit("/", 1)[1]]
        labels = {f"{EKS_LAYER}{i}": nn for i, nn in enumerate(network_nodes, start=1)}
        labelled.append(Node(name=n.name, labels=labels | ({"topology.k8s.aws/capacity-block-id": block} if block else {})))
    found = discover_labels(SourceContext(nodes=labelled, options={"preset": "eks"}))
    from_labels = to_snapshot(found, level_keys(found.level_names))
    assert snap.levels == from_labels.levels and snap.levels[-1].name == "capacity-block"
    assert snap.nodes == from_labels.nodes


def test_capacity_block_level(topology_server: TopologyServer) -> None:
    s = topology_server
    ids = s.launch("us-east-1", 6, "p6e-gb200.36xlarge")
    for n, instance in enumerate(ids):
        s.place(instance, ["nn-1", "nn-2", "nn-3"], "cr-ultra" if n < 4 else None)
    snap = run(s, nodes_for(ids, "us-east-1a", "u"), capacity_block_level=True)
    assert snap.levels[-1].name == "capacity-block" and snap.levels[-1].label == "topolabel.dev/capacity-block"
    assert [snap.nodes[f"u-{n}"]["capacity-block"] for n in range(6)] == ["cr-ultra"] * 4 + ["nn-3"] * 2
    assert any("2 node(s) have no CapacityBlockId" in p.message for p in snap.problems)


def test_a_region_without_the_api_is_a_problem_per_node(topology_server: TopologyServer) -> None:
    s = topology_server
    ok = s.launch("us-east-1", 3)
    s.place_tree(ok, "ok")
    far = s.launch("sa-east-1", 150)
    s.fail("sa-east-1", "UnsupportedOperation", "The functionality you requested is not available in this region.")
    snap = run(s, nodes_for(ok, "us-east-1a", "ok") + nodes_for(far, "sa-east-1a", "far"))
    assert set(snap.nodes) == {"ok-0", "ok-1", "ok-2"}
    assert len(snap.problems) == 150 and all("not available in sa-east-1" in p.message for p in snap.problems)
    assert s.calls["sa-east-1"] == 1  # no further batches once the region said it cannot answer


def test_unauthorized_is_one_error_naming_the_iam_action(topology_server: TopologyServer) -> None:
    s = topology_server
    nodes = []
    for region in ("us-east-1", "eu-central-1"):
        ids = s.launch(region, 2)
        s.place_tree(ids, region)
        nodes += nodes_for(ids, f"{region}a", region)
        s.fail(region, "UnauthorizedOperation", "You are not authorized to perform this operation.", 403)
    with pytest.raises(SourceError) as err:
        run(s, nodes)
    text = str(err.value)
    assert "ec2:DescribeInstanceTopology" in text and "eu-central-1, us-east-1" in text
    assert "\n" not in text


def test_throttling_is_retried(topology_server: TopologyServer) -> None:
    s = topology_server
    ids = s.launch("us-east-1", 5)
    s.place_tree(ids, "t")
    s.throttle("us-east-1", 1)
    snap = run(s, nodes_for(ids, "us-east-1a", "t"))
    assert len(snap.nodes) == 5
    assert s.calls["us-east-1"] == 2


def test_throttling_past_the_attempts_is_a_clear_error(topology_server: TopologyServer,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    s = topology_server
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    ids = s.launch("us-east-1", 1)
    s.throttle("us-east-1", 5)
    with pytest.raises(SourceError, match="still throttled .*AWS_MAX_ATTEMPTS"):
        run(s, nodes_for(ids, "us-east-1a", "t"))
    assert s.calls["us-east-1"] == 2


def test_unknown_instances_are_set_aside_and_the_batch_asked_again(topology_server: TopologyServer) -> None:
    s = topology_server
    ids = s.launch("us-east-1", 3)
    s.place_tree(ids, "k")
    ghost = "i-0123456789abcdef0"  # terminated long ago, or in another region
    snap = run(s, nodes_for(ids + [ghost], "us-east-1a", "k"))
    assert set(snap.nodes) == {"k-0", "k-1", "k-2"}
    assert snap.problems[0].node == "k-3" and "does not exist in us-east-1" in snap.problems[0].message
    assert s.calls["us-east-1"] == 2


def test_default_region_and_region_label(topology_server: TopologyServer) -> None:
    s = topology_server
    a = s.launch("us-east-2", 1)
    b = s.launch("eu-north-1", 1)
    s.place_tree(a + b, "r")
    nodes = [Node(name="defaulted", provider_id=f"aws:////{a[0]}"),
             Node(name="labelled", provider_id=f"aws:////{b[0]}",
                  labels={"topology.kubernetes.io/region": "eu-north-1"})]
    snap = run(s, nodes, region="us-east-2")
    assert set(snap.nodes) == {"defaulted", "labelled"}
    assert dict(s.calls) == {"us-east-2": 1, "eu-north-1": 1}


def test_no_credentials_is_a_clear_error(topology_server: TopologyServer, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(SourceError, match="no AWS credentials"):
        run(topology_server, [Node(name="n", provider_id="aws:///us-east-1a/i-0abc")])
    assert not topology_server.calls


def test_unreachable_endpoint_is_a_clear_error(topology_server: TopologyServer,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    nodes = [Node(name="n", provider_id="aws:///us-east-1a/i-0abc")]
    with pytest.raises(SourceError, match="cannot reach EC2"):
        discover(SourceContext(nodes=nodes, options={"endpoint_url": "http://127.0.0.1:9"}))


def test_configuration_mistakes_are_one_line_errors(topology_server: TopologyServer,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = [Node(name="n", provider_id="aws:///us-east-1a/i-0abc")]
    with pytest.raises(SourceError, match="cannot make an EC2 client for us-east-1: Invalid endpoint: nonsense"):
        discover(SourceContext(nodes=nodes, options={"endpoint_url": "nonsense"}))
    monkeypatch.setenv("AWS_PROFILE", "nowhere")
    with pytest.raises(SourceError, match="cannot read the AWS configuration: .*nowhere"):
        run(topology_server, nodes)
    assert not topology_server.calls


def node_object(name: str, provider_id: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}},
            "spec": {"providerID": provider_id}}


def test_cli_discover_prints_the_snapshot(topology_server: TopologyServer, tmp_path: Path) -> None:
    s = topology_server
    items = []
    for region, count, kind in (("us-east-1", 120, "p5.48xlarge"), ("us-west-2", 10, "p6-b200.48xlarge"),
                                ("eu-west-1", 2, "m5.large")):
        ids = s.launch(region, count, kind)
        if kind != "m5.large":
            s.place_tree(ids, region, layers=4 if kind.startswith("p6") else 3)
        items += [node_object(f"{region}-{n}", f"aws:///{region}a/{i}") for n, i in enumerate(ids)]
    items.append(node_object("kind-worker", "kind://docker/kind/kind-worker"))
    nodes_file = tmp_path / "nodes.json"
    nodes_file.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    done = subprocess.run([sys.executable, "-m", "topolabel.cli", "discover", "--source", "aws", "--nodes",
                           str(nodes_file), "--endpoint-url", s.url, "-o", "json"],
                          capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    snap = json.loads(done.stdout)
    assert [lv["label"] for lv in snap["levels"]] == [f"topolabel.dev/layer-{i}" for i in range(1, 5)]
    assert len(snap["nodes"]) == 130
    assert snap["nodes"]["us-west-2-0"]["layer-1"] == "nn-us-west-2"
    unplaced = sorted(p["node"] for p in snap["problems"] if "node" in p)
    assert unplaced == ["eu-west-1-0", "eu-west-1-1", "kind-worker"]
    assert dict(s.calls) == {"us-east-1": 2, "us-west-2": 1, "eu-west-1": 1}
