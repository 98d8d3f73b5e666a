"""The InfiniBand source on fabrics simulated by ibsim and read by the real `ibnetdiscover`.

Each fabric comes from hack/ibfabric.py with its ground truth; the inferred leaf groups and blocks must
partition the hosts exactly as the truth does, and every HCA or cable that is wrong must be reported.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Mapping, Sequence

import pytest
import yaml

from hack.ibfabric import Fabric, Spec, build, random_spec
from labeler.io.nodes import Node
from labeler.settings.config import Config
from labeler.topology.model import Snapshot
from providers.registry import get_source
from testkit.ibsim import ibsim, needs_ibsim  # noqa: F401 (ibsim is a fixture)
from topolabel.cli import main
from topolabel.pipeline import discover

pytestmark = [needs_ibsim, pytest.mark.slow]


def snapshot(text: str, tmp_path: Path, nodes: Sequence[Node] = (), **options: str) -> Snapshot:
    path = tmp_path / "fabric.ibnetdiscover"
    path.write_text(text)
    return discover(Config(), get_source("infiniband"), {"ibnetdiscover": str(path), **options}, nodes, origin="test")


def partition(snap: Snapshot, level: str) -> set[frozenset[str]]:
    groups: dict[str, set[str]] = {}
    for node, values in snap.nodes.items():
        groups.setdefault(values[level], set()).add(node)
    return {frozenset(g) for g in groups.values()}


def truth_partition(truth: Mapping[str, str], hosts: set[str]) -> set[frozenset[str]]:
    groups: dict[str, set[str]] = {}
    for host in hosts:
        groups.setdefault(truth[host], set()).add(host)
    return {frozenset(g) for g in groups.values()}


def assert_matches_truth(snap: Snapshot, fabric: Fabric, hosts: set[str]) -> None:
    assert set(snap.nodes) == hosts
    assert partition(snap, "leafgroup") == truth_partition(fabric.truth.leafgroup, hosts)
    three_level = fabric.spec.pods > 1
    assert [lv.name for lv in snap.levels] == (["block", "leafgroup"] if three_level else ["leafgroup"])
    if three_level:
        assert partition(snap, "block") == truth_partition(fabric.truth.block, hosts)


def messages(snap: Snapshot) -> list[str]:
    return [p.message for p in snap.problems]


SHAPES = {
    "2-level": Spec(sus=6, hosts=4, spines=3, uplinks=2),
    "3-level-pods": Spec(pods=3, sus=4, hosts=3, spines=4, cores=4),
    "rail-optimised-8": Spec(sus=3, rails=8, hosts=4, spines=8),
    "rail-optimised-3-level-rail-spines": Spec(pods=2, sus=2, rails=8, hosts=3, spines=8, cores=4, rail_spines=True),
    "dual-port-hcas": Spec(sus=4, rails=2, hosts=4, spines=2, ports_per_hca=2, device="HCA-{}"),
    "vendor-default-switch-names": Spec(pods=2, sus=3, hosts=3, spines=2, cores=2, naming="default"),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_shape_matches_ground_truth(shape: str, ibsim, tmp_path: Path) -> None:
    fabric = build(SHAPES[shape])
    snap = snapshot(ibsim(fabric).discover(), tmp_path)
    assert_matches_truth(snap, fabric, set(fabric.truth.guids))
    shape_notice = next(m for m in messages(snap) if m.startswith("fabric shape:"))
    assert ("3-level" in shape_notice) == (fabric.spec.pods > 1)
    assert ("rail-optimised" in shape_notice) == (fabric.spec.rails > 1)
    values = {v["leafgroup"] for v in snap.nodes.values()}
    leaves = {n.name for n in fabric.nodes.values() if n.id.startswith("sw-p") and "-su" in n.id}
    if fabric.spec.naming == "default":
        assert all(v.startswith("sw-") for v in values), values  # GUIDs only when names say nothing
    elif fabric.spec.rails == 1:
        assert values <= leaves  # a classic leaf group is its leaf, by the name on the rack
    else:
        assert all(re.fullmatch(r"p\d-ibleaf-\d\d-01\.\.\d\d", v) for v in values), values


def test_rack_names_read_from_switch_descriptions(ibsim, tmp_path: Path) -> None:
    fabric = build(Spec(pods=2, sus=2, rails=4, hosts=2, spines=4, cores=2))
    snap = snapshot(ibsim(fabric).discover(), tmp_path)
    assert snap.nodes["p2-gpu-01-c02"] == {"block": "p2-ibspine-01..04", "leafgroup": "p2-ibleaf-01-01..04"}


DAMAGED = Spec(pods=2, sus=3, rails=4, hosts=4, spines=4, cores=2, default_hosts=1, default_hcas=2,
               cut_hca_links=2, cut_uplinks=2, slow_uplinks=2, seed=5)


def test_damage_moves_no_host_and_is_reported(ibsim, tmp_path: Path) -> None:
    fabric = build(DAMAGED)
    truth = fabric.truth
    snap = snapshot(ibsim(fabric).discover(), tmp_path)
    assert_matches_truth(snap, fabric, truth.named_hosts())
    text = "\n".join(messages(snap))
    for guid in truth.default_hcas:  # each default-description HCA, with its GUID and leaf
        assert re.search(rf"HCA 0x{guid:016x} .* on leaf p\d-ibleaf-\d\d-\d\d port \d+: host unknown", text)
    for leaf, port in truth.cut_uplinks:
        assert f"leaf {leaf} port {port}: no link" in text
    for leaf, port, rate in truth.slow_links:
        assert re.search(rf"leaf {leaf} port {port}: runs {rate}, expected 4xHDR", text)
    for host, lost in truth.cut_hosts.items():
        problems = [p.message for p in snap.problems if p.node == host]
        assert any(f"no link to leaf {next(iter(lost))}" in m for m in problems), problems


def test_guid_map_and_node_name_maps_place_default_hosts(ibsim, tmp_path: Path) -> None:
    fabric = build(DAMAGED)
    sim = ibsim(fabric)
    everyone = set(fabric.truth.guids)
    guid_map = tmp_path / "guids.yaml"
    guid_map.write_text(yaml.safe_dump(fabric.guid_map()))
    snap = snapshot(sim.discover(), tmp_path, guid_map=str(guid_map))
    assert_matches_truth(snap, fabric, everyone)
    assert not [m for m in messages(snap) if "host unknown" in m]
    name_map = tmp_path / "node-name-map"
    name_map.write_text(fabric.node_name_map())
    renamed = sim.discover("--node-name-map", str(name_map))  # ibnetdiscover's own renaming
    assert_matches_truth(snapshot(renamed, tmp_path), fabric, everyone)
    assert_matches_truth(snapshot(sim.discover(), tmp_path, node_name_map=str(name_map)), fabric, everyone)


def test_output_variants_give_one_snapshot(ibsim, tmp_path: Path) -> None:
    fabric = build(Spec(pods=2, sus=2, rails=2, hosts=3, spines=2, cores=2, slow_uplinks=1, default_hcas=1))
    sim = ibsim(fabric)
    plain = snapshot(sim.discover(), tmp_path).to_dict()
    for args in (["-g"], ["--full"], ["-g", "--full"]):
        assert snapshot(sim.discover(*args), tmp_path).to_dict() == plain, args


def test_storage_hcas_are_left_out_by_pattern(ibsim, tmp_path: Path) -> None:
    fabric = build(Spec(pods=2, sus=3, rails=2, hosts=3, spines=2, cores=2, storage_leaves=2))
    text = ibsim(fabric).discover()
    mixed = snapshot(text, tmp_path)
    assert any("select the compute HCAs with --hca-pattern" in m for m in messages(mixed))
    compute = snapshot(text, tmp_path, hca_pattern=r"^mlx5_\d+$")
    assert_matches_truth(compute, fabric, set(fabric.truth.guids))


def test_cables_pulled_live_are_reported(ibsim, tmp_path: Path) -> None:
    fabric = build(Spec(sus=3, rails=4, hosts=4, spines=4))
    sim = ibsim(fabric, console=True)
    leaf = fabric.nodes["sw-p1-su2-r3"]
    uplink = max(leaf.ports)
    sim.unlink(leaf.id, uplink)
    host_port = min(leaf.ports)
    host = fabric.nodes[leaf.ports[host_port][0]].desc.split()[0]
    sim.unlink(leaf.id, host_port)
    snap = snapshot(sim.discover(), tmp_path)
    assert_matches_truth(snap, fabric, set(fabric.truth.guids))
    assert f"leaf {leaf.name} port {uplink}: no link" in "\n".join(messages(snap))
    assert any(p.node == host and f"no link to leaf {leaf.name}" in p.message for p in snap.problems)


def sysfs(guid: int) -> str:
    """A GUID as /sys/class/infiniband/*/node_guid shows it: e09d:7303:0085:8d88."""
    return ":".join(re.findall("....", f"{guid:016x}"))


def test_kubernetes_nodes_with_annotations(ibsim, tmp_path: Path) -> None:
    fabric = build(Spec(pods=2, sus=2, rails=2, hosts=3, spines=2, cores=2, default_hosts=2, seed=3))
    truth = fabric.truth
    unnamed = set(truth.guids) - truth.named_hosts()
    nodes = []
    for host in sorted(truth.guids):
        value = ",".join(f"{d}={sysfs(g)}" for d, g in truth.guids[host])
        annotations = {"topolabel.dev/ib-node-guids": value} if host in unnamed else {}
        nodes.append(Node(f"{host}.cluster.local" if host.endswith("c01") else host, annotations=annotations))
    nodes.append(Node("cpu-only-01"))
    snap = snapshot(ibsim(fabric).discover(), tmp_path, nodes)
    placed = {n.name for n in nodes} - {"cpu-only-01"}
    assert set(snap.nodes) == placed
    short = {name: name.split(".")[0] for name in placed}
    assert {frozenset(short[n] for n in g) for g in partition(snap, "leafgroup")} == \
        truth_partition(truth.leafgroup, set(truth.guids))
    assert [p.message for p in snap.problems if p.node == "cpu-only-01"] == [
        f"no HCA in the InfiniBand fabric {tmp_path / 'fabric.ibnetdiscover'}: no HCA description names it and no "
        "GUID is mapped to it; map its "
        "GUID with --guid-map, --node-name-map or the topolabel.dev/ib-node-guids node annotation"]


@pytest.mark.parametrize("seed", [1009, 2003, 3001, 4007, 5003, 6007])
def test_random_fabrics_not_seen_before(seed: int, ibsim, tmp_path: Path) -> None:
    fabric = build(random_spec(seed))
    snap = snapshot(ibsim(fabric).discover(), tmp_path)
    assert_matches_truth(snap, fabric, fabric.truth.named_hosts())
    text = "\n".join(messages(snap))
    assert all(f"HCA 0x{guid:016x}" in text for guid in fabric.truth.default_hcas)


def test_run_calls_ibnetdiscover_here(ibsim, tmp_path: Path, capsys, monkeypatch) -> None:
    fabric = build(Spec(pods=2, sus=2, rails=2, hosts=2, spines=2, cores=2))
    sim = ibsim(fabric)
    expected = snapshot(sim.discover(), tmp_path).to_dict()
    for key in ("LD_PRELOAD", "IBSIM_SOCKNAME", "SIM_HOST"):  # what ibnetdiscover, run by topolabel, inherits
        monkeypatch.setenv(key, sim.env()[key])
    capsys.readouterr()
    assert main(["discover", "--source", "infiniband", "--run", "--ib-timeout", "60", "-o", "json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found == expected and set(found["nodes"]) == set(fabric.truth.guids)


@pytest.mark.parametrize("spec", [
    Spec(pods=2, sus=3, hosts=3, spines=2, cores=2, empty_leaves=1),           # 3 levels: the leaf's pod is clear
    Spec(pods=1, sus=3, rails=2, hosts=3, spines=2, cores=2, empty_leaves=2),  # one pod under cores
], ids=["pods", "one-pod"])
def test_a_leaf_with_no_hca_is_a_leaf_not_a_core(spec: Spec, ibsim, tmp_path: Path) -> None:
    fabric = build(spec)
    snap = snapshot(ibsim(fabric).discover(), tmp_path)
    assert_matches_truth(snap, fabric, set(fabric.truth.guids))
    shape = messages(snap)[0]
    leaves = spec.pods * spec.sus * spec.rails + spec.empty_leaves
    assert f"({leaves} leaves ({spec.empty_leaves} without hosts), {spec.pods * spec.spines} spines" in shape, shape
    assert (f"{spec.cores} cores" if spec.pods > 1 else f"{spec.cores} more") in shape, shape
    assert not [m for m in messages(snap) if ": no link, but" in m]  # its uplinks are leaf uplinks, nobody's missing


def test_one_cable_between_two_pods_does_not_join_them(ibsim, tmp_path: Path) -> None:
    fabric = build(Spec(pods=2, sus=3, rails=2, hosts=3, spines=2, cores=2, cross_pod_cables=1, seed=4))
    snap = snapshot(ibsim(fabric).discover(), tmp_path)
    assert_matches_truth(snap, fabric, set(fabric.truth.guids))  # two blocks, as cabled by design
    (leaf, spine), = fabric.truth.cross_cables
    assert any(re.fullmatch(rf"leaf {leaf} port \d+ - spine {spine} port \d+ is the only cable between two pods; "
                            r"it does not join them into one block \(miscabled\?\)", m) for m in messages(snap))


def test_two_cables_between_pods_are_a_join_not_a_stray(ibsim, tmp_path: Path) -> None:
    fabric = build(Spec(pods=2, sus=3, hosts=3, spines=2, cores=2, cross_pod_cables=2, seed=4))
    snap = snapshot(ibsim(fabric).discover(), tmp_path)
    assert not any("the only cable between two pods" in m for m in messages(snap))


def test_fabric_hosts_that_are_not_nodes_are_one_notice(ibsim, tmp_path: Path) -> None:
    fabric = build(Spec(sus=3, rails=4, hosts=3, spines=4, service_hosts=3))
    text = ibsim(fabric).discover()
    nodes = [Node(host) for host in sorted(fabric.truth.guids)]
    snap = snapshot(text, tmp_path, nodes)
    assert_matches_truth(snap, fabric, set(fabric.truth.guids))
    service = set(fabric.truth.service)
    assert not [p for p in snap.problems if p.node in service]
    notices = [m for m in messages(snap) if "not Kubernetes nodes" in m]
    assert notices == ["3 fabric host(s) are not Kubernetes nodes (UFM, storage, management, or not yet joined), "
                       "so they are not placed: stor-01, ufm-01, ufm-02"]
    everyone = snapshot(text, tmp_path)  # without a node list every fabric host is placed, oddities and all
    assert service <= set(everyone.nodes)
    assert any(p.node == "ufm-01" and "no link to leaf" in p.message for p in everyone.problems)
