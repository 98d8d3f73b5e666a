"""GB200 NVL72-style racks on an InfiniBand fabric read by the real ibnetdiscover: blocks and leaf groups
from the fabric, the NVLink domain from the GPU Operator's clique label, one Topology, CRD-valid objects."""

from __future__ import annotations

from pathlib import Path

import pytest

from hack.ibfabric import Spec, build
from kueue_config.objects import generate
from labeler.io.nodes import Node
from labeler.settings.config import parse_config
from testkit.environment import kueue_crd
from testkit.crdschema import validate
from testkit.ibsim import ibsim, needs_ibsim  # noqa: F401 (ibsim is a fixture)
from topolabel.pipeline import discover, source_options

pytestmark = [needs_ibsim, pytest.mark.slow]
CRD = {"Topology": "topologies", "ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues"}


def cluster(fabric, split: bool = False) -> list[Node]:
    """Each leaf group's hosts form one NVLink domain; one host more is a non-NVLink node (no clique)."""
    hosts = sorted(fabric.truth.leafgroup)
    nodes = []
    for host in hosts[:-1]:
        clique = f"5e1f0c2a-7d4b-4e8a-b3c6-1a2b3c4d5e6f.{fabric.truth.leafgroup[host]}"
        nodes.append(Node(host, labels={"nvidia.com/gpu.clique": clique, "nvidia.com/gpu.product": "NVIDIA-GB200"},
                          allocatable={"nvidia.com/gpu": "4"}))
    nodes.append(Node(hosts[-1], labels={"nvidia.com/gpu.product": "NVIDIA-H200"}, allocatable={"nvidia.com/gpu": "8"}))
    if split:  # the first host reports the NVLink domain of a host under another leaf group
        other = next(n for n in nodes[:-1] if fabric.truth.leafgroup[n.name] != fabric.truth.leafgroup[nodes[0].name])
        nodes[0] = Node(nodes[0].name, labels=dict(other.labels), allocatable={"nvidia.com/gpu": "4"})
    return nodes


def run(text: str, tmp_path: Path, nodes: list[Node]):
    path = tmp_path / "fabric.ibnetdiscover"
    path.write_text(text)
    cfg = parse_config({"source": {"type": "combined", "sources": [
        {"type": "infiniband", "ibnetdiscover": str(path)},
        {"type": "labels", "preset": "nvlink", "missing": "node"}]}}, "topolabel.yaml")
    source, options = source_options(cfg, {})
    return cfg, discover(cfg, source, options, nodes, origin="topolabel.yaml")


def test_nvlink_domain_is_its_own_level_and_objects_are_valid(ibsim, tmp_path: Path) -> None:
    fabric = build(Spec(pods=2, sus=2, hosts=4, spines=2, cores=2))
    text = ibsim(fabric).discover()
    nodes = cluster(fabric)
    cfg, snap = run(text, tmp_path, nodes)
    assert [lv.name for lv in snap.levels] == ["block", "leafgroup", "nvlink"]
    assert set(snap.nodes) == {n.name for n in nodes}
    for node in nodes:  # the NVLink domain sits inside the node's leaf group
        same = {n.name for n in nodes if snap.nodes[n.name]["nvlink"] == snap.nodes[node.name]["nvlink"]}
        assert {snap.nodes[n]["leafgroup"] for n in same} == {snap.nodes[node.name]["leafgroup"]}
    assert snap.nodes[nodes[-1].name]["nvlink"] == nodes[-1].name  # the H200 node is its own domain
    objects = generate(snap, nodes, cfg).objects
    assert [lv["nodeLabel"] for lv in objects[0]["spec"]["levels"]][-2:] == ["topolabel.dev/nvlink",
                                                                              "kubernetes.io/hostname"]
    for obj in objects:
        assert validate(obj, kueue_crd(CRD[obj["kind"]])) == []


def test_a_node_claiming_another_leaf_groups_nvlink_domain_is_a_problem_for_itself_alone(ibsim, tmp_path: Path) -> None:
    fabric = build(Spec(pods=2, sus=2, hosts=4, spines=2, cores=2))
    nodes = cluster(fabric, split=True)
    _, snap = run(ibsim(fabric).discover(), tmp_path, nodes)
    liar = nodes[0].name
    assert liar not in snap.nodes and set(snap.nodes) == {n.name for n in nodes[1:]}
    assert any(p.node == liar and "not corroborated, so left as it is" in p.message for p in snap.problems)
    for node in nodes[1:]:  # every NVLink domain left sits inside one leaf group, as the fabric says
        same = {n for n in snap.nodes if snap.nodes[n]["nvlink"] == snap.nodes[node.name]["nvlink"]}
        assert {snap.nodes[n]["leafgroup"] for n in same} == {snap.nodes[node.name]["leafgroup"]}
