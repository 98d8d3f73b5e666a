"""The labels source reads each cloud's and tool's topology labels into one hierarchy."""

from __future__ import annotations

import pytest

from labeler.errors import SourceError
from labeler.io.nodes import Node
from labeler.topology.placement import level_keys, to_snapshot
from providers.base import SourceContext
from providers.labels import discover


def run(nodes: list[Node], **options):
    found = discover(SourceContext(nodes=nodes, options=options, origin="test"))
    return found, to_snapshot(found, level_keys(found.level_names))


def node(name: str, **labels: str) -> Node:
    return Node(name=name, labels=labels)


def test_gke_preset() -> None:
    k = "cloud.google.com/gce-topology-"
    nodes = [node("a", **{k + "block": "b1", k + "subblock": "s1", k + "host": "h1"}),
             node("b", **{k + "block": "b1", k + "subblock": "s2", k + "host": "h2"})]
    found, snap = run(nodes, preset="gke")
    assert found.level_names == ("block", "subblock", "host")
    assert snap.nodes["a"] == {"block": "b1", "subblock": "s1", "host": "h1"}
    assert snap.levels[0].label == "topolabel.dev/block"


def test_eks_preset_mixed_depth_pads_and_says_so() -> None:
    k = "topology.k8s.aws/network-node-layer-"
    nodes = [node("p5", **{k + "1": "nn-a", k + "2": "nn-b", k + "3": "nn-c"}),
             node("p6", **{k + "1": "nn-a", k + "2": "nn-b", k + "3": "nn-d", k + "4": "nn-e"}),
             node("cpu")]
    found, snap = run(nodes, preset="eks")
    assert found.level_names == ("layer-1", "layer-2", "layer-3", "layer-4")
    assert snap.nodes["p5"]["layer-4"] == "nn-c"
    assert snap.nodes["p6"]["layer-4"] == "nn-e"
    messages = {(p.node, p.message.split(";")[0]) for p in snap.problems}
    assert any(n is None and "fewer than 4 levels" in m for n, m in messages)
    assert any(n == "cpu" for n, _ in messages)


def test_eks_cluster_of_three_layer_types_has_three_levels() -> None:
    k = "topology.k8s.aws/network-node-layer-"
    found, _ = run([node("x", **{k + "1": "nn-a", k + "2": "nn-b", k + "3": "nn-c"})], preset="eks")
    assert found.level_names == ("layer-1", "layer-2", "layer-3")


def test_gap_in_the_middle_is_a_problem() -> None:
    k = "topology.k8s.aws/network-node-layer-"
    found, snap = run([node("ok", **{k + "1": "a", k + "2": "b", k + "3": "c"}),
                       node("gap", **{k + "1": "a", k + "3": "c"})], preset="eks")
    assert "gap" not in snap.nodes
    assert any(p.node == "gap" and "missing topology.k8s.aws/network-node-layer-2" in p.message
               for p in snap.problems)


@pytest.mark.parametrize("preset, labels, expected", [
    ("oci", {"oci.oraclecloud.com/host.network_block_id": "ocid1.block", "oci.oraclecloud.com/host.rack_id": "r9"},
     {"block": "ocid1.block", "rack": "r9"}),
    ("coreweave", {"backend.coreweave.cloud/fabric": "f1", "backend.coreweave.cloud/leafgroup": "lg3"},
     {"fabric": "f1", "leafgroup": "lg3"}),
    ("topograph", {"fabric.topograph.run/tier-0": "leaf1", "fabric.topograph.run/tier-1": "spine1"},
     {"tier-1": "spine1", "tier-0": "leaf1"}),
    ("topograph", {"network.topology.nvidia.com/spine": "s2", "network.topology.nvidia.com/block": "s1"},
     {"spine": "s2", "block": "s1"}),
])
def test_other_presets(preset: str, labels: dict, expected: dict) -> None:
    found, snap = run([node("n", **labels)], preset=preset)
    assert found.level_names == tuple(expected)  # coarsest first
    assert snap.nodes["n"] == expected


def test_custom_keys_and_names() -> None:
    found, snap = run([node("n", **{"dc.example/row": "row3", "dc.example/rack": "r3-12"})],
                      keys=["dc.example/row", "dc.example/rack"])
    assert found.level_names == ("row", "rack")
    assert snap.nodes["n"] == {"row": "row3", "rack": "r3-12"}


def test_nothing_to_read_is_an_error() -> None:
    with pytest.raises(SourceError, match="no node carries any of the keys cloud.google.com/gce-topology-block"):
        run([node("n")], preset="gke")


@pytest.mark.parametrize("options, fragment", [
    ({}, r"give a preset \(coreweave, crusoe, eks, gke, nebius, nvlink, oci, topograph\) or keys"),
    ({"preset": "azure"}, "unknown preset 'azure'"),
    ({"preset": "gke", "typo": 1}, "typo: unknown key; known: keys, names, preset"),
])
def test_bad_options_name_the_problem(options: dict, fragment: str) -> None:
    with pytest.raises(SourceError, match=fragment):
        run([node("n")], **options)


def test_the_agents_clique_annotation_counts_only_when_it_is_a_label_value() -> None:
    clique = "topolabel.dev/gpu-clique"
    nodes = [Node("a", annotations={clique: "uuid.1"}), Node("b", annotations={clique: "uuid.1"}),
             Node("huge", annotations={clique: "uuid.1" + "x" * 100_000}), Node("odd", annotations={clique: "a b"})]
    found, snap = run(nodes, preset="nvlink")
    assert snap.nodes == {"a": {"nvlink": "uuid.1"}, "b": {"nvlink": "uuid.1"}}
    assert {p.node for p in found.problems} == {"huge", "odd"}
def test_a_node_missing_only_a_coarser_key_is_not_said_to_have_none() -> None:
    k = "topology.k8s.aws/network-node-layer-"
    _, snap = run([node("ok", **{k + "1": "a", k + "2": "b", k + "3": "c"}),
                   node("top-missing", **{k + "2": "b", k + "3": "c"}), node("bare")], preset="eks")
    why = {p.node: p.message for p in snap.problems if p.node}
    assert why["top-missing"] == f"is missing {k}1 above labels it has; left as it is"
    assert why["bare"].startswith("has none of the labels")


OCI = "oci.oraclecloud.com/"


def test_oci_reads_island_block_local_block_and_rack_coarsest_first() -> None:
    def oke(name: str, island: str, block: str, local: str, rack: str) -> Node:
        return node(name, **{OCI + "rdma.hpc_island_id": island, OCI + "rdma.network_block_id": block,
                             OCI + "rdma.local_block_id": local, OCI + "host.rack_id": rack,
                             OCI + "host.network_block_id": "older-" + block})

    nodes = [oke("a", "isl1", "nb1", "lb1", "r1"), oke("b", "isl1", "nb1", "lb2", "r2"),
             node("c", **{OCI + "rdma.hpc_island_id": "no-imds-data", OCI + "rdma.network_block_id": "no-imds-data",
                          OCI + "rdma.local_block_id": "no-imds-data", OCI + "host.rack_id": "r9"})]
    found, snap = run(nodes, preset="oci")
    assert found.level_names == ("island", "block", "local-block", "rack")
    assert snap.nodes["a"] == {"island": "isl1", "block": "nb1", "local-block": "lb1", "rack": "r1"}
    why = {p.node: p.message for p in snap.problems if p.node}
    assert "is missing" in why["c"] and "placeholder values" in why["c"] and "no-imds-data" not in snap.nodes.get("c", {})


def test_oci_clusters_with_only_the_older_host_keys_keep_their_levels() -> None:
    found, snap = run([node("a", **{OCI + "host.network_block_id": "nb1", OCI + "host.rack_id": "r1"})], preset="oci")
    assert found.level_names == ("block", "rack")
    assert snap.nodes["a"] == {"block": "nb1", "rack": "r1"}


def test_every_preset_names_its_source_page() -> None:
    from providers.labels.presets import PRESETS

    assert all(p.source.startswith("https://") for p in PRESETS.values())


@pytest.mark.parametrize("odd, expected", [
    ({"block": " b9 ", "subblock": "s99", "host": "h-odd"}, ("b9", "s99", "h-odd")),  # blanks dropped
    ({"block": "b9", "subblock": "s99"}, ("b9", "s99", "s99")),  # no host: padded, and said
    ({"subblock": "s99", "host": "h-odd"}, None),  # no block above the labels it has: a problem, left as it is
])
def test_one_unusual_node_among_many_plain_ones_is_read_as_alone(odd: dict[str, str], expected: tuple | None) -> None:
    """Nodes carrying every key with a clean value are read a key's column at a time; one that does not sends
    them all the node-by-node way, with the same paths for the plain ones."""
    k = "cloud.google.com/gce-topology-"
    plain = [node(f"n{i:03d}", **{k + "block": f"b{i // 50}", k + "subblock": f"s{i // 10}", k + "host": f"h{i}"})
             for i in range(200)]
    found, _ = run([*plain, node("odd", **{k + key: value for key, value in odd.items()})], preset="gke")
    assert {n: p for n, p in found.paths.items() if n != "odd"} == {
        f"n{i:03d}": (f"b{i // 50}", f"s{i // 10}", f"h{i}") for i in range(200)}
    assert found.paths.get("odd") == expected
    assert [p.node for p in found.problems] == ([] if expected == ("b9", "s99", "h-odd") else
                                               [None] if expected else ["odd"])
