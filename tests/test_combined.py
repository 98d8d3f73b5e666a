"""Combined sources: network levels from one source, the NVLink domain from another, checked as one tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from labeler.errors import SourceError, TopologyError
from labeler.io.nodes import Node
from labeler.settings.config import parse_config
from topolabel.pipeline import discover, source_options

INVENTORY = """
levels: [block, leaf]
hosts:
  - {pattern: "gb-r1-*", block: b1, leaf: leaf-01}
  - {pattern: "gb-r2-*", block: b1, leaf: leaf-02}
  - {pattern: "h100-*", block: b2, leaf: leaf-03}
"""
CLIQUE = "nvidia.com/gpu.clique"


def nodes(split: bool = False) -> list[Node]:
    """Two GB200 racks (NVL72 domains c1 and c2, 4 trays each) and two H100 nodes without a clique."""
    out = []
    for rack, clique in (("r1", "c1"), ("r2", "c2")):
        for tray in range(4):
            out.append(Node(f"gb-{rack}-t{tray}", labels={CLIQUE: f"7f3c9a1e-uuid.{clique}"}))
    if split:  # the last tray of rack 2 reports rack 1's clique: one NVLink domain across two leaves
        out[-1] = Node(out[-1].name, labels={CLIQUE: "7f3c9a1e-uuid.c1"})
    out += [Node("h100-0"), Node("h100-1")]
    return out


def config(tmp_path: Path, **extra) -> dict:
    inv = tmp_path / "inv.yaml"
    inv.write_text(INVENTORY)
    return {"source": {"type": "combined", "sources": [
        {"type": "inventory", "inventory": str(inv)},
        {"type": "labels", "preset": "nvlink", "missing": "node"}], **extra}}


def run(cfg: dict, cluster: list[Node]):
    conf = parse_config(cfg, "topolabel.yaml")
    source, options = source_options(conf, {})
    return discover(conf, source, options, cluster, origin="topolabel.yaml")


def test_nvlink_domain_becomes_its_own_level(tmp_path: Path) -> None:
    snap = run(config(tmp_path), nodes())
    assert [lv.name for lv in snap.levels] == ["block", "leaf", "nvlink"]
    assert snap.levels[2].label == "topolabel.dev/nvlink"
    assert snap.nodes["gb-r1-t0"]["nvlink"] == snap.nodes["gb-r1-t3"]["nvlink"] == "7f3c9a1e-uuid.c1"
    assert snap.nodes["gb-r2-t0"]["nvlink"] == "7f3c9a1e-uuid.c2"
    # nodes that are not multi-node NVLink systems are their own NVLink domain, so TAS still sees them
    assert snap.nodes["h100-0"]["nvlink"] == "h100-0" and snap.nodes["h100-1"]["nvlink"] == "h100-1"


def test_a_node_claiming_another_racks_nvlink_domain_is_a_problem_for_itself_alone(tmp_path: Path) -> None:
    snap = run(config(tmp_path), nodes(split=True))  # gb-r2-t3 claims rack 1's clique; the fabric says rack 2
    assert "gb-r2-t3" not in snap.nodes and len(snap.nodes) == 9
    assert {snap.nodes[f"gb-r1-t{i}"]["nvlink"] for i in range(4)} == {"7f3c9a1e-uuid.c1"}
    assert {snap.nodes[f"gb-r2-t{i}"]["nvlink"] for i in range(3)} == {"7f3c9a1e-uuid.c2"}
    (claim,) = [p for p in snap.problems if p.node == "gb-r2-t3"]
    assert ("its nvlink '7f3c9a1e-uuid.c1' sits under leaf 'leaf-02', but the nvlink's other nodes under leaf-01; "
            "not corroborated") in claim.message
    # leaf-02 held trays of two domains, so no order of all three levels nests: said once, for the source
    assert any(p.node is None and "No order of all levels nests; without one level: block > nvlink; block > leaf"
               in p.message for p in snap.problems)


def test_a_domain_spanning_whole_leaves_is_left_out_with_the_order_that_nests(tmp_path: Path) -> None:
    # (without the H100 nodes: their one-node NVLink domains cannot sit above their shared leaf)
    cluster = [Node(n.name, labels={CLIQUE: "7f3c9a1e-uuid.c1"}) for n in nodes() if n.name.startswith("gb-")]
    snap = run(config(tmp_path), cluster)  # no leaf holds a majority of the domain: no node is corroborated
    assert snap.nodes == {} and {p.node for p in snap.problems if p.node} == {n.name for n in cluster}
    assert any("Orders that nest: block > nvlink > leaf" in p.message for p in snap.problems if p.node is None)
    snap = run(config(tmp_path, order=["block", "nvlink", "leaf"]), cluster)
    assert snap.nodes["gb-r1-t0"]["nvlink"] == snap.nodes["gb-r2-t0"]["nvlink"]


def test_fabric_levels_that_do_not_nest_still_fail_the_source(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text("levels: [block, leaf]\nhosts:\n  - {node: a, block: b1, leaf: l1}\n  - {node: b, block: b2, leaf: l1}\n")
    cfg = {"source": {"type": "combined", "sources": [{"type": "inventory", "inventory": str(inv)},
                                                        {"type": "labels", "preset": "nvlink", "missing": "node"}]}}
    with pytest.raises(TopologyError, match="leaf 'l1' sits under more than one block"):
        run(cfg, [Node("a", labels={CLIQUE: "c1"}), Node("b")])


def test_missing_problem_leaves_the_node_unplaced(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    cfg["source"]["sources"][1]["missing"] = "problem"
    snap = run(cfg, nodes())
    assert "h100-0" not in snap.nodes
    assert any(p.node == "h100-0" and "labels has no nvlink" in p.message for p in snap.problems)


def test_order_and_rename(tmp_path: Path) -> None:
    cfg = config(tmp_path, order=["block", "gpu-domain"])
    cfg["source"]["sources"][0]["levels"] = ["block"]
    cfg["source"]["sources"][1]["levels"] = {"nvlink": "gpu-domain"}
    snap = run(cfg, nodes())
    assert [lv.name for lv in snap.levels] == ["block", "gpu-domain"]


@pytest.mark.parametrize("change, fragment", [
    (lambda c: c["source"].update(order=["block", "nope"]), "order ['block', 'nope'] must name each of"),
    (lambda c: c["source"]["sources"][1].update(levels=["rack"]), "source labels has no level 'rack'"),
    (lambda c: c["source"]["sources"][1].update(preset="inventory-typo"), "unknown preset"),
    (lambda c: c["source"]["sources"].pop(), "sources: must have at least 2 item(s)"),
    (lambda c: c["source"]["sources"][1].update(levels={"nvlink": "block"}), "level name(s) block come from more"),
])
def test_config_errors(tmp_path: Path, change, fragment: str) -> None:
    cfg = config(tmp_path)
    change(cfg)
    with pytest.raises((SourceError, TopologyError), match=None) as err:
        run(cfg, nodes())
    assert fragment in str(err.value)


def test_nvlink_cluster_gets_crd_valid_kueue_objects(tmp_path: Path) -> None:
    from kueue_config.objects import generate
    from testkit.environment import kueue_crd
    from testkit.crdschema import validate

    snap = run(config(tmp_path), nodes())
    cluster = [Node(n.name, labels={**n.labels, "nvidia.com/gpu.product": "NVIDIA-GB200" if n.name.startswith("gb")
                                    else "NVIDIA-H100-80GB-HBM3"}, allocatable={"nvidia.com/gpu": "4"})
               for n in nodes()]
    objects = generate(snap, cluster, parse_config({}, "t")).objects
    topo = objects[0]
    assert [lv["nodeLabel"] for lv in topo["spec"]["levels"]] == [
        "topolabel.dev/block", "topolabel.dev/leaf", "topolabel.dev/nvlink", "kubernetes.io/hostname"]
    plural = {"Topology": "topologies", "ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues"}
    for obj in objects:
        assert validate(obj, kueue_crd(plural[obj["kind"]])) == []
