"""The GPU clouds' label presets (docs/labels.md): CoreWeave's superpods and NVLink racks, Crusoe's partitions
and pods, Nebius's tier chains, EKS's capacity blocks and OCI's GPU memory fabrics, each in the shape the cloud
writes its labels."""

from __future__ import annotations

import pytest

from labeler.errors import TopologyError
from labeler.io.nodes import Node
from labeler.topology.model import ACCELERATOR_LEVELS
from labeler.topology.placement import level_keys, to_snapshot
from providers.base import SourceContext
from providers.labels import discover
from providers.labels.presets import CHECKED, PRESETS, TIERED

CW_IB, CW = "ib.coreweave.cloud/", "backend.coreweave.cloud/"
NVL = "ds.coreweave.com/nvlink.domain"
NEBIUS, NEBIUS_OLD = "topology.nebius.com/tier-", "topologyconf.slurm.nebius.ai/tier-"
EKS = "topology.k8s.aws/network-node-layer-"
OCI = "oci.oraclecloud.com/"


def run(nodes: list[Node], preset: str):
    found = discover(SourceContext(nodes=nodes, options={"preset": preset}, origin="test"))
    return found, to_snapshot(found, level_keys(found.level_names))


def node(name: str, **labels: str) -> Node:
    return Node(name=name, labels=labels)


def groups(snap, level: str) -> set[frozenset[str]]:
    out: dict[str, set[str]] = {}
    for name, values in snap.nodes.items():
        out.setdefault(values[level], set()).add(name)
    return {frozenset(g) for g in out.values()}


def coreweave(name: str, fabric: str, superpod: str | None, leafgroup: str, rack: str | None = None) -> Node:
    labels = {CW + "fabric": fabric, CW + "leafgroup": leafgroup}
    if superpod is not None:  # InfiniBand nodes carry the ib.* keys too; RoCE nodes do not
        labels.update({CW_IB + "fabric": fabric, CW_IB + "superpod": superpod, CW_IB + "leafgroup": leafgroup})
    if rack:
        labels[NVL] = rack
    return Node(name=name, labels=labels)


def test_coreweave_superpods_are_numbers_within_their_fabric() -> None:
    # superpod "1" and leaf group "3" exist in both fabrics: they are four different domains, not two
    nodes = [coreweave("a", "us-east-02a", "1", "3"), coreweave("b", "us-east-02a", "1", "3"),
             coreweave("c", "us-east-02a", "2", "3"), coreweave("d", "us-west-04a", "1", "3")]
    found, snap = run(nodes, "coreweave")
    assert found.level_names == ("fabric", "superpod", "leafgroup")
    assert groups(snap, "superpod") == {frozenset("ab"), frozenset("c"), frozenset("d")}
    assert groups(snap, "leafgroup") == {frozenset("ab"), frozenset("c"), frozenset("d")}
    assert len({v["leafgroup"] for v in snap.nodes.values()}) == 3  # unique values per level
    assert not snap.problems


def test_coreweave_roce_nodes_take_their_fabric_as_superpod_and_say_so() -> None:
    nodes = [coreweave("ib-1", "f1", "1", "7"), coreweave("roce-1", "f2", None, "9"),
             coreweave("roce-2", "f2", None, "9")]
    found, snap = run(nodes, "coreweave")
    assert found.level_names == ("fabric", "superpod", "leafgroup")
    assert groups(snap, "superpod") == {frozenset({"ib-1"}), frozenset({"roce-1", "roce-2"})}
    assert [p.message for p in snap.problems] == [
        "2 node(s) carry no ib.coreweave.cloud/superpod; their coarser domain stands in for it (e.g. roce-1, roce-2)"]


def test_coreweave_nvl72_racks_are_the_finest_level() -> None:
    nodes = [coreweave(f"gb-{i}", "f1", "1", f"{i // 4}", rack=f"DH4-0{i // 2}-US-EAST-02A") for i in range(8)]
    nodes.append(coreweave("h100", "f1", "1", "1"))  # no NVLink domain: a domain of its own
    found, snap = run(nodes, "coreweave")
    assert found.level_names == ("fabric", "superpod", "leafgroup", "nvlink")
    assert "nvlink" in ACCELERATOR_LEVELS
    assert groups(snap, "nvlink") == {frozenset({f"gb-{2 * r}", f"gb-{2 * r + 1}"}) for r in range(4)} | {
        frozenset({"h100"})}


def test_coreweave_rack_spanning_leaf_groups_sits_above_them_with_a_notice() -> None:
    nodes = [coreweave(f"gb-{i}", "f1", "1", f"{i}", rack="rack-1") for i in range(4)]
    found, snap = run(nodes, "coreweave")
    assert found.level_names == ("fabric", "superpod", "nvlink", "leafgroup")
    assert any("nvlink domains (ds.coreweave.com/nvlink.domain) span several leafgroup domains" in p.message
               for p in snap.problems)


def test_crusoe_partition_then_pod() -> None:
    def vm(name: str, partition: str, pod: str) -> Node:
        return node(name, **{"crusoe.ai/ib.partition.id": partition, "crusoe.ai/pod.id": pod})

    nodes = [vm("a", "p-1", "pod-a"), vm("b", "p-1", "pod-a"), vm("c", "p-1", "pod-b"), node("cpu")]
    found, snap = run(nodes, "crusoe")
    assert found.level_names == ("partition", "pod")
    assert snap.nodes["c"] == {"partition": "p-1", "pod": "pod-b"}
    assert [p.node for p in snap.problems] == ["cpu"]


def nebius(name: str, *switches: str, nvl: str | None = None, prefix: str = NEBIUS) -> Node:
    """Nebius labels: tier-1 the leaf, tier-2 above it ..., tier-0 the rack's NVLink domain."""
    labels = {f"{prefix}{i}": s for i, s in enumerate(switches, start=1)}
    if nvl:
        labels[f"{prefix}0"] = nvl
    return Node(name=name, labels=labels)


def test_nebius_tier_chain_with_nvlink_racks() -> None:
    nodes = [nebius(f"gb-{i}", f"leaf-{i // 4}", "spine-0", "core", nvl=f"nvl-{i // 2}") for i in range(8)]
    nodes.append(nebius("h200", "leaf-9", "core"))  # a shorter chain, padded; no rack of its own
    found, snap = run(nodes, "nebius")
    assert found.level_names == ("tier-3", "tier-2", "tier-1", "nvlink")
    assert snap.nodes["gb-5"] == {"tier-3": "core", "tier-2": "spine-0", "tier-1": "leaf-1", "nvlink": "nvl-2"}
    assert snap.nodes["h200"]["tier-1"] == snap.nodes["h200"]["tier-2"] == "leaf-9"
    assert snap.nodes["h200"]["nvlink"] == "h200"
    assert any("1 node(s) report fewer than 3 levels" in p.message for p in snap.problems)


def test_nebius_earlier_prefix_and_a_gap() -> None:
    nodes = [nebius("a", "leaf-1", "spine", prefix=NEBIUS_OLD), nebius("b", "leaf-2", "spine", prefix=NEBIUS_OLD),
             node("gap", **{NEBIUS_OLD + "2": "spine"})]
    found, snap = run(nodes, "nebius")
    assert found.level_names == ("tier-2", "tier-1")
    assert {p.node: p.message for p in snap.problems} == {
        "gap": f"is missing {NEBIUS_OLD}1 between switches it has; left as it is"}


def test_nebius_tier_zero_alone_is_the_nvlink_level() -> None:
    found, snap = run([node("a", **{NEBIUS + "0": "nvl-1"}), node("b", **{NEBIUS + "0": "nvl-1"})], "nebius")
    assert found.level_names == ("nvlink",)
    assert groups(snap, "nvlink") == {frozenset("ab")}


def eks(name: str, *layers: str, block: str | None = None) -> Node:
    labels = {f"{EKS}{i}": nn for i, nn in enumerate(layers, start=1)}
    if block:
        labels["topology.k8s.aws/capacity-block-id"] = block
    return Node(name=name, labels=labels)


def test_eks_capacity_blocks_are_the_finest_level_as_the_aws_source_makes_them() -> None:
    nodes = [eks(f"u-{i}", "nn-1", "nn-2", "nn-3", block="cr-ultra") for i in range(4)]
    nodes += [eks("p5-0", "nn-1", "nn-2", "nn-3"), eks("p6-0", "nn-1", "nn-2", "nn-4", "nn-5")]
    found, snap = run(nodes, "eks")
    assert found.level_names == ("layer-1", "layer-2", "layer-3", "layer-4", "capacity-block")
    assert {snap.nodes[f"u-{i}"]["capacity-block"] for i in range(4)} == {"cr-ultra"}
    # outside a capacity block, a node shares its finest network node's domain (the aws source's padding)
    assert snap.nodes["p5-0"]["capacity-block"] == "nn-3" and snap.nodes["p6-0"]["capacity-block"] == "nn-5"


def test_oci_gpu_memory_fabric_is_the_nvlink_level() -> None:
    def gb(name: str, local: str, fabric: str | None) -> Node:
        labels = {OCI + "rdma.hpc_island_id": "isl", OCI + "rdma.network_block_id": "nb",
                  OCI + "rdma.local_block_id": local}
        if fabric:
            labels[OCI + "host.gpu_memory_fabric_id"] = fabric
        return Node(name=name, labels=labels)

    nodes = [gb(f"gb-{i}", f"lb{i // 4}", f"pvtkj3zct{i // 2}") for i in range(8)] + [gb("h100", "lb9", None)]
    found, snap = run(nodes, "oci")
    assert found.level_names == ("island", "block", "local-block", "nvlink")
    assert snap.nodes["gb-3"]["nvlink"] == "pvtkj3zct1"


def test_accelerator_domains_that_nest_nowhere_are_an_error() -> None:
    # one rack id across two fabrics cannot sit anywhere in the tree
    nodes = [coreweave("a", "f1", "1", "1", rack="r"), coreweave("b", "f2", "1", "1", rack="r")]
    with pytest.raises(TopologyError, match=r"labels \(ds.coreweave.com/nvlink.domain\): the nvlink domains do not "
                                            r"nest in the levels above"):
        run(nodes, "coreweave")


def test_every_preset_and_family_names_a_dated_source() -> None:
    assert CHECKED == "2026-12-01"
    assert all(p.source.startswith("https://") for p in PRESETS.values())
    assert all(f.source.startswith("https://") for f in TIERED.values())
