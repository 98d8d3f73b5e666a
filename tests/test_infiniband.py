"""The InfiniBand source's pure parts, and the real captures in ../shared/fabrics."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from labeler.errors import SourceError
from labeler.io.nodes import Node
from labeler.settings.config import Config
from labeler.topology.model import Snapshot
from providers.base import SourceContext
from providers.infiniband import ANNOTATION, discover as ib_discover
from providers.infiniband.hosts import GuidMap, Owner, add_annotations, describe, guid_map_from
from providers.infiniband.names import group_name, switch_label, switch_names, unique_names
from providers.infiniband.parse import parse_guid, parse_ibnetdiscover, parse_node_name_map, parse_rate
from providers.infiniband.tiers import leaf_groups
from providers.registry import get_source
from testkit.environment import SHARED
from testkit.ibcaptures import SMALL
from topolabel.pipeline import discover

NDR = SHARED / "fabrics" / "ndr-582ca.ibnetdiscover"
GB200 = SHARED / "fabrics" / "gb200-self-only.ibnetdiscover"


def test_guids_are_compared_as_integers() -> None:
    fabric = parse_ibnetdiscover(SMALL, "small")
    assert set(fabric.guids) == {0x2C90300001234, 0x2C90300009999, 0x2C90300005670, 0x2C90300005680}
    assert len(fabric.cables) == 3  # each cable once, though both ends list it
    node = fabric.index
    assert fabric.port_guids[(node[0x2C90300005670], 1)] == 0x2C90300005671
    (peer, peer_port, cable), = fabric.ports[node[0x2C90300009999]].values()
    assert (fabric.guids[peer], peer_port) == (0x2C90300001234, 35)
    assert fabric.cables[cable][:4] == (node[0x2C90300001234], 35, node[0x2C90300009999], 1)
    assert fabric.rate(cable) == (1, "HDR")
    assert parse_guid("0x0002c90300001234") == parse_guid("2c90300001234") == parse_guid("0002:c903:0000:1234")


def test_node_name_map_renames_like_ibnetdiscover_does() -> None:
    names = parse_node_name_map('# comment\n0x2c90300005680 "node-b mlx5_0"  # fixed\n\n0x2c90300009999 spine-1\n',
                                "map")
    assert names == {0x2C90300005680: "node-b mlx5_0", 0x2C90300009999: "spine-1"}
    fabric = parse_ibnetdiscover(SMALL, "small", names)
    assert fabric.descs[fabric.index[0x2C90300005680]] == "node-b mlx5_0"
    assert fabric.descs[fabric.index[0x2C90300009999]] == "spine-1"


@pytest.mark.parametrize("text, fragment", [
    ("Switch\t36 \"S-0002c90300001234\"\t\t# \"x\" base port 0 lid 1 lmc 0\n[1]\tgarbage\n",
     "t:2: cannot read port line '[1]\\tgarbage'"),
    ("[1]\t\"S-0002c90300001234\"[1]\t\t# \"x\" lid 1 4xHDR\n", "t:1: port line before any Switch or Ca line"),
    ("CA    : 0x0002c90300005670 ports 1 devid 0x0 vendid 0x0 \"node-a mlx5_0\"\n", "t: no Switch or Ca records"),
    ("Switch\tmany \"S-1\"\n", "t:1: cannot read node line"),
])
def test_bad_input_is_one_clear_error(text: str, fragment: str) -> None:
    with pytest.raises(SourceError) as err:
        parse_ibnetdiscover(text, "t")
    assert fragment in str(err.value)


def test_rates() -> None:
    assert parse_rate("4xNDR") == (4, "NDR")
    assert parse_rate("1xFDR10") == (1, "FDR10")
    assert parse_rate("?????") == (None, None) and parse_rate("4x???") == (None, None)


def test_switch_names_are_readable_and_unique() -> None:
    assert switch_label("MF0;A09-P1-IBLEAF-04-04:MQM9701/U1") == "a09-p1-ibleaf-04-04"
    assert switch_label("R1-SPINE-01") == "r1-spine-01"
    assert switch_label("Quantum Mellanox Technologies") is None
    assert switch_label("quantum-leaf-01") == "quantum-leaf-01"
    names = switch_names({1: "MF0;LEAF-1:MQM8790/U1", 2: "Quantum Mellanox Technologies", 3: "dup", 0x2C: "dup"})
    assert names == {1: "leaf-1", 2: "sw-0000000000000002", 3: "sw-0000000000000003", 0x2C: "sw-000000000000002c"}


def test_group_names_range_only_over_members_present() -> None:
    leaves = [f"a09-p1-ibleaf-0{i}-01" for i in (1, 2, 3, 4)]
    assert group_name(leaves) == "a09-p1-ibleaf-01..04-01"
    assert group_name([leaves[0], leaves[1], leaves[3]]) == "a09-p1-ibleaf-01..02_04-01"  # 03-01 not in the fabric
    assert group_name(["leaf-2", "leaf-10"]) == "leaf-2_10"
    assert group_name(["leaf-9", "leaf-10", "leaf-11"]) == "leaf-9..11"
    assert group_name(["leaf-a", "leaf-b"]) == "leaf-a_b"
    assert group_name(["l-01-01", "l-02-02"]) == "l-01-01-and-1-more"  # 01..02-01..02 would claim four
    assert group_name(["l-01-01", "l-02-01", "l-01-02", "l-02-02"]) == "l-01..02-01..02"
    assert group_name(["leaf1", "spine-3"]) == "leaf1-and-1-more"
    names = unique_names({"x": ["l-1", "l-2", "l-4"], "y": ["l-1", "l-3", "l-4"], "z": ["q"]})
    assert names == {"x": "l-1..2_4", "y": "l-1_3..4", "z": "q"}


@pytest.mark.parametrize("desc, expected", [
    ("a08-p1-dgx-04-c01 mlx5_5", ("a08-p1-dgx-04-c01", "mlx5_5", "")),
    ("gpu-001", ("gpu-001", None, "")),
    ("MT4129 ConnectX7   Mellanox Technologies", (None, None, "default description, no host name")),
    ("localhost HCA-1", (None, "HCA-1", "description names the generic host 'localhost'")),
    ("mt1-gpu01 mlx5_0", ("mt1-gpu01", "mlx5_0", "")),  # a host name, not an adapter model
])
def test_host_from_description(desc: str, expected: tuple) -> None:
    assert describe(desc) == expected


def test_guid_map_entries() -> None:
    found = guid_map_from({"gpu-1": ["mlx5_0=0x2c90300005680", "e09d:7303:0085:8d88"], "gpu-2": "mlx5_1=zz, 0x1f",
                           "gpu-3": 0x2C90300005690}, "m.yaml")
    assert found.claims[0x2C90300005680] == {"gpu-1": Owner("gpu-1", "mlx5_0")}
    assert found.claims[0xE09D730300858D88] == {"gpu-1": Owner("gpu-1", None)}
    assert list(found.claims[0x1F]) == ["gpu-2"] and list(found.claims[0x2C90300005690]) == ["gpu-3"]
    assert found.errors == [("gpu-2", "m.yaml: 'zz' is not a GUID")]
    with pytest.raises(ValueError, match="m.yaml: expected a mapping of node name to GUIDs"):
        guid_map_from(["gpu-1"], "m.yaml")


def test_annotation_maps_a_default_description_hca(tmp_path: Path) -> None:
    path = tmp_path / "small"
    path.write_text(SMALL)
    nodes = [Node("node-a"), Node("node-b", annotations={"topolabel.dev/ib-node-guids": "mlx5_0=0002:c903:0000:5681"})]
    snap = discover(Config(), get_source("infiniband"), {"ibnetdiscover": str(path)}, nodes)
    assert snap.nodes == {"node-a": {"leafgroup": "r1-leaf-01"}, "node-b": {"leafgroup": "r1-leaf-01"}}
    assert not [p for p in snap.problems if "host unknown" in p.message or p.node]


def ndr_snapshot() -> Snapshot:
    return discover(Config(), get_source("infiniband"), {"ibnetdiscover": str(NDR)}, [])


def ndr_hcas() -> list[tuple[str, str, str, int]]:
    """(GUID, description, leaf name, leaf port) of every HCA, read from the capture's Ca records."""
    found, record = [], None
    for line in NDR.read_text().splitlines():
        head = re.match(r'^Ca\s+\d+\s+"H-([0-9a-f]+)"\s+# "(.*)"', line)
        if head:
            record = head.groups()
        port = re.match(r'^\[\d+\]\([0-9a-f]+\)\s+"S-[0-9a-f]+"\[(\d+)\].*"MF0;([^:]+):', line)
        if record and port:
            found.append((record[0], record[1], port.group(2).lower(), int(port.group(1))))
            record = None
    return found


def test_ndr_capture_places_every_host_its_hcas_name() -> None:
    snap = ndr_snapshot()
    hcas = ndr_hcas()
    assert len(hcas) == 582
    hosts = {desc.split()[0].lower() for _, desc, _, _ in hcas
             if not desc.startswith("MT4129") and "Aggregation Node" not in desc}
    assert {"localhost", "ubuntu", "b11-p1-cufm-02"} <= hosts  # boot-time host names name no host
    assert set(snap.nodes) == hosts - {"localhost", "ubuntu"}
    assert [lv.name for lv in snap.levels] == ["leafgroup"]
    shape = snap.problems[0].message
    assert shape.startswith("fabric shape: 2-level fat tree (31 leaves, 9 spines)") and "rail-optimised" in shape


def test_ndr_capture_groups_each_scalable_unit() -> None:
    """Each DGX row is cabled to one set of rail leaves; HCA-5/HCA-6 swapped on one host changes nothing."""
    snap = ndr_snapshot()
    rows: dict[str, set[str]] = defaultdict(set)
    for host in snap.nodes:
        if "-dgx-" in host:
            rows[host.rsplit("-", 1)[0]].add(host)
    groups: dict[str, set[str]] = defaultdict(set)
    for host, values in snap.nodes.items():
        if "-dgx-" in host:
            groups[values["leafgroup"]].add(host)
    assert sorted(map(sorted, groups.values())) == sorted(map(sorted, rows.values()))
    assert snap.nodes["a07-p1-dgx-03-c05"]["leafgroup"] == "a09-p1-ibleaf-01..04-03"
    # leaf a09-p1-ibleaf-03-01 is not in the capture: its rail group's name must not claim it
    assert {v["leafgroup"] for v in snap.nodes.values()} == {
        "a09-p1-ibleaf-01..02_04-01", *(f"a09-p1-ibleaf-01..04-0{u}" for u in (2, 3, 4)),
        *(f"b09-p1-ibleaf-01..04-0{u}" for u in (5, 6, 7, 8))}
    assert snap.nodes["b08-p1-dgx-08-c01"] == snap.nodes["b08-p1-dgx-08-c04"]


def test_ndr_capture_with_the_node_list_reports_the_ufm_host_once() -> None:
    """The capture holds a UFM server (b11-p1-cufm-02) cabled to two of its unit's four rail leaves."""
    everyone = ndr_snapshot()
    assert any(p.node == "b11-p1-cufm-02" for p in everyone.problems)  # a placed host missing two rails
    nodes = [Node(name) for name in everyone.nodes if "-dgx-" in name]
    snap = discover(Config(), get_source("infiniband"), {"ibnetdiscover": str(NDR)}, nodes)
    assert set(snap.nodes) == {n.name for n in nodes}
    assert not [p for p in snap.problems if p.node and p.node not in snap.nodes]
    assert [p.message for p in snap.problems if "not Kubernetes nodes" in p.message] == [
        "1 fabric host(s) are not Kubernetes nodes (UFM, storage, management, or not yet joined), so they are "
        "not placed: B11-P1-CUFM-02"]  # as the fabric names it


def test_ndr_capture_reports_each_unnamed_hca_with_guid_and_leaf() -> None:
    text = "\n".join(p.message for p in ndr_snapshot().problems if p.node is None)
    unnamed = [(g, d, leaf, port) for g, d, leaf, port in ndr_hcas()
               if d.startswith(("MT4129", "localhost ", "ubuntu "))]
    assert len(unnamed) == 69 + 5
    for guid, desc, leaf, port in unnamed:
        assert f"HCA 0x{guid} ({desc!r}) on leaf {leaf} port {port}: host unknown" in text


def test_gb200_capture_yields_no_topology_and_says_why() -> None:
    with pytest.raises(SourceError) as err:
        ib_discover(SourceContext(options={"ibnetdiscover": str(GB200)}))
    message = str(err.value)
    assert message.startswith(f"{GB200}: no switch in the fabric; the discovery saw only 'dgx-gb200-n01-c1 HCA-1' "
                              "(0xb8e92403009ca838), so it yields no topology")


def test_options_are_checked() -> None:
    for options, fragment in [({}, "give one of --ib-fabric NAME"),
                              ({"ibnetdiscover": "f", "run_ibnetdiscover": True}, "give one of"),
                              ({"ibnetdiscover": "f", "ib_fabric": "compute"}, "give one of"),
                              ({"ib_fabric": "compute", "ib_max_age": 0}, "ib_max_age: must be more than 0"),
                              ({"ibnetdiscover": "f", "hca_pattern": "mlx5_["}, "hca_pattern: not a regular expression"),
                              ({"ibnetdiscover": "f", "ib_timeout": 0}, "ib_timeout: must be more than 0")]:
        with pytest.raises(SourceError, match=re.escape(fragment)):
            ib_discover(SourceContext(options=options, origin="cfg"))


def test_guid_map_problems_name_the_node(tmp_path: Path) -> None:
    (tmp_path / "small").write_text(SMALL)
    (tmp_path / "map.yaml").write_text("node-b: [mlx5_0=0x2c90300005680, nonsense]\n")
    found = ib_discover(SourceContext(options={"ibnetdiscover": str(tmp_path / "small"),
                                               "guid_map": str(tmp_path / "map.yaml")}))
    assert set(found.paths) == {"node-a", "node-b"}
    assert [(p.node, p.message) for p in found.problems if p.node] == [
        ("node-b", f"{tmp_path / 'map.yaml'}: 'nonsense' is not a GUID")]


def test_leaf_groups_by_majority() -> None:
    """Units {1,2,3,4} and {5,6,7,8}; one host short of a rail, one cabled into the other unit, and a unit
    seen only partly (every host there lacks rail 8) stay where they belong."""
    links = {f"a{i}": Counter({1: 1, 2: 1, 3: 1, 4: 1}) for i in range(4)}
    links |= {f"b{i}": Counter({5: 1, 6: 1, 7: 1}) for i in range(3)}
    links |= {"short": Counter({1: 1, 2: 1, 4: 1}), "miscabled": Counter({1: 1, 2: 1, 3: 1, 7: 1}),
              "partial": Counter({5: 1, 6: 1})}
    groups = leaf_groups(links)
    assert {g: sorted(h for h in links if groups.host_group[h] == g) for g in set(groups.host_group.values())} == {
        1: ["a0", "a1", "a2", "a3", "miscabled", "short"], 5: ["b0", "b1", "b2", "partial"]}
    assert groups.missing == {"short": frozenset({3}), "partial": frozenset({7}), "miscabled": frozenset({4})}
    assert groups.split == {"miscabled": Counter({1: 3, 5: 1})} and groups.merged == {}
    storage = {h: c + Counter({9: 1}) for h, c in links.items()}  # every host also on one storage leaf
    assert leaf_groups(storage).merged == {1: 2}


def test_a_guid_annotation_beyond_its_size_limit_is_an_error_for_that_node() -> None:
    guids = GuidMap()
    add_annotations(guids, [Node("ok", annotations={ANNOTATION: "mlx5_0=0x2c90300005670"}),
                            Node("huge", annotations={ANNOTATION: "mlx5_0=0x1," * 1000})])
    assert set(guids.claims) == {0x2C90300005670} and guids.annotated == {"ok"}
    assert [(node, "4096" in why) for node, why in guids.errors] == [("huge", True)]
