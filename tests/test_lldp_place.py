"""LLDP placement rules: racks, MLAG pairs, management ports, conflicts, and the levels above the rack."""

from __future__ import annotations

import re

import pytest

from labeler.errors import SourceError
from labeler.topology.placement import level_keys, to_snapshot
from providers.lldp.facts import Neighbor
from providers.lldp.place import DEFAULT_MGMT, Fabric, aliases, fabric_from_map, fabric_from_switches, place

MGMT = re.compile(DEFAULT_MGMT)


def n(interface: str, switch: str, port: str = "swp1", chassis_id: str | None = None) -> Neighbor:
    return Neighbor(interface, switch, chassis_id if chassis_id is not None else f"id-{switch}", port)


def problems(discovery) -> dict:
    return {p.node: p.message for p in discovery.problems}


def test_a_host_sits_under_the_switch_its_ports_hear() -> None:
    found = place({"gpu-a": (n("eth0", "leaf-r01"), n("eth1", "leaf-r01", "swp2"))}, Fabric(), MGMT)
    assert found.level_names == ("rack",) and found.paths == {"gpu-a": ("leaf-r01",)} and not found.problems


def test_management_ports_are_left_out() -> None:
    hosts = {"gpu-a": (n("eno1", "oob-sw"), n("enp65s0f0np0", "leaf-r01")),   # ConnectX data port stays
             "gpu-b": (n("eno1", "oob-sw"), n("ipmi0", "bmc-sw")),
             "gpu-c": ()}
    found = place(hosts, Fabric(), MGMT)
    assert found.paths == {"gpu-a": ("leaf-r01",)}
    why = problems(found)
    assert "no LLDP neighbour on a data-plane port; management port(s) excluded: eno1 -> oob-sw" in why["gpu-b"]
    assert why["gpu-c"] == "no LLDP neighbour on a data-plane port"
    custom = place(hosts, Fabric(), re.compile(r"^eno"))
    assert custom.paths["gpu-b"] == ("bmc-sw",)


def test_ports_to_two_unpaired_switches_are_a_problem() -> None:
    found = place({"gpu-a": (n("eth0", "leaf-r01"), n("eth1", "leaf-r02", "swp7"))}, Fabric(), MGMT)
    assert found.paths == {}
    assert problems(found)["gpu-a"].startswith(
        "data-plane ports disagree (eth0 -> leaf-r01 port swp1, eth1 -> leaf-r02 port swp7)")


def test_a_pair_is_one_rack_and_a_host_hearing_half_of_it_is_placed_with_a_notice() -> None:
    fabric = Fabric(pairs=[frozenset({"leaf-r02", "leaf-r01"})])
    hosts = {"gpu-a": (n("eth0", "leaf-r01"), n("eth1", "leaf-r02")), "gpu-b": (n("eth0", "leaf-r02"),),
             "gpu-c": (n("eth0", "leaf-r01"), n("eth1", "leaf-r03"))}
    found = place(hosts, fabric, MGMT)
    assert found.paths == {"gpu-a": ("leaf-r01_leaf-r02",), "gpu-b": ("leaf-r01_leaf-r02",)}
    why = problems(found)
    assert why["gpu-b"].startswith("hears only leaf-r02 of the pair leaf-r01_leaf-r02 (no LLDP from leaf-r01")
    assert "disagree" in why["gpu-c"] and "gpu-a" not in why
    snap = to_snapshot(found, level_keys(found.level_names))
    assert snap.nodes["gpu-a"] == {"rack": "leaf-r01_leaf-r02"}


def test_a_switch_without_a_name_is_known_by_its_chassis_id() -> None:
    found = place({"gpu-a": (n("eth0", "", chassis_id="56:6c:21:32:03:8b"),)}, Fabric(), MGMT)
    snap = to_snapshot(found, level_keys(found.level_names))
    assert found.paths == {"gpu-a": ("56:6c:21:32:03:8b",)} and snap.nodes["gpu-a"] == {"rack": "56-6c-21-32-03-8b"}


def test_one_name_from_two_chassis_goes_to_the_chassis_most_hosts_hear() -> None:
    """A host may claim a switch it is not cabled to (issue 32, S1): the name is the chassis most hosts hear,
    the others are refused as claims; on a tie nobody gets it."""
    found = place({"gpu-a": (n("eth0", "leaf", chassis_id="01"),), "gpu-b": (n("eth0", "leaf", chassis_id="02"),)},
                  Fabric(), MGMT)
    assert found.paths == {}
    assert any(p.node is None and "'leaf' is sent by 2 chassis (01, 02)" in p.message for p in found.problems)
    assert {p.node for p in found.problems if p.claim} == {"gpu-a", "gpu-b"}
    found = place({"gpu-a": (n("eth0", "leaf", chassis_id="01"),), "gpu-b": (n("eth0", "leaf", chassis_id="01"),),
                   "evil": (n("eth0", "leaf", chassis_id="66"),)}, Fabric(), MGMT)
    assert found.paths == {"gpu-a": ("leaf",), "gpu-b": ("leaf",)}
    assert [(p.node, p.claim) for p in found.problems if p.node] == [("evil", True)]
    assert "hears switch 'leaf' from chassis 66, while 2 host(s) hear it from 01" in problems(found)["evil"]


SWITCH_MAP = {"levels": ["block", "spinegroup"],
              "switches": {"leaf-r01": {"block": "b1", "spinegroup": "sg1"},
                           "leaf-r02": {"block": "b1", "spinegroup": "sg1"},
                           "id-leaf-r03": {"block": "b2", "spinegroup": "sg2"},   # named by chassis id
                           "leaf-r04": {"block": "b2", "spinegroup": "sg3"}},
              "pairs": [["leaf-r01", "leaf-r02"], ["leaf-r03", "leaf-r04"]]}


def test_switch_map_gives_the_levels_above_the_rack() -> None:
    hosts = {"gpu-a": (n("eth0", "leaf-r01"), n("eth1", "leaf-r02")), "gpu-b": (n("eth0", "leaf-r03"),),
             "gpu-c": (n("eth0", "leaf-r09"),)}
    fabric = fabric_from_map(SWITCH_MAP, "map.yaml", aliases(hosts))
    found = place(hosts, fabric, MGMT)
    assert found.level_names == ("block", "spinegroup", "rack")
    assert found.paths == {"gpu-a": ("b1", "sg1", "leaf-r01_leaf-r02")}
    why = problems(found)
    assert why["gpu-b"].startswith("the members of leaf-r03_leaf-r04 sit in different places: "
                                   "leaf-r03 in b2/sg2; leaf-r04 in b2/sg3 (switch map map.yaml)")
    assert why["gpu-c"] == "switch leaf-r09 is not listed (switch map map.yaml); left as it is"


@pytest.mark.parametrize("data, words", [
    ([], "expected a mapping"),
    ({"switches": {"a": {"block": "b"}}}, "'levels' must be"),
    ({"levels": ["block", "rack"], "switches": {"a": {"block": "b"}}}, "must not name 'rack'"),
    ({"levels": ["block"], "switches": {}}, "'switches' must map"),
    ({"levels": ["block"], "switches": {"a": {"blok": "b"}}}, "switches.a needs a value for each of block"),
    ({"levels": ["block"], "switches": {"a": {"block": "b"}}, "pairs": [["a"]]}, "'pairs' must be"),
    ({"levels": ["block"], "switches": {"a": {"block": "b"}}, "pairs": [["a", "b"], ["a", "c"]]},
     "switch a is in two pairs"),
])
def test_bad_switch_maps_are_one_line_errors(data, words) -> None:
    with pytest.raises(SourceError, match=words) as err:
        fabric_from_map(data, "map.yaml", {})
    assert str(err.value).startswith("map.yaml: ")


def leaf_facts(*spines: str, peers: tuple[str, ...] = (), hosts: tuple[str, ...] = (), mgmt: bool = True) -> tuple:
    """A leaf's own neighbours: uplinks, MLAG peer links, host downlinks, its management port."""
    out = [n(f"swp{i}", s) for i, s in enumerate(spines, 1)]
    out += [n(f"swp{40 + i}", p) for i, p in enumerate(peers)]
    out += [n(f"swp{10 + i}", h) for i, h in enumerate(hosts)]
    return tuple(out + ([n("mgmt0", "oob-sw")] if mgmt else []))


def test_switch_facts_give_pairs_and_blocks() -> None:
    hosts = {"gpu-a": (n("eth0", "leaf-1"), n("eth1", "leaf-2"), n("eno1", "oob-sw")),
             "gpu-b": (n("eth0", "leaf-3"),), "gpu-c": (n("eth0", "leaf-4"),), "gpu-d": (n("eth0", "leaf-5"),)}
    switches = {
        "leaf-1": leaf_facts("spine-a1", "spine-a2", peers=("leaf-2",), hosts=("gpu-a",)),
        "leaf-2": leaf_facts("spine-a1", "spine-a2", peers=("leaf-1", "leaf-1"), hosts=("gpu-a",)),
        "leaf-3": leaf_facts("spine-a2", hosts=("gpu-b",)),            # one uplink is enough to join block a
        "leaf-4": leaf_facts("spine-b1", "storage-7", hosts=("gpu-c",)),  # storage-7 has no facts: not a spine
        "leaf-5": leaf_facts("spine-x", hosts=("gpu-d",)),              # spine-x has no facts: no block
        "spine-a1": leaf_facts(mgmt=False), "spine-a2": (), "spine-b1": (n("swp1", "leaf-4"),),
        "oob-sw": (n("swp1", "leaf-1"), n("swp2", "gpu-a")),           # hosts hear it: not a spine
        "gpu-c": (n("eth0", "leaf-4"), n("eth1", "leaf-1")),           # a host's file by mistake: not a spine
    }
    fabric = fabric_from_switches(switches, hosts, MGMT, "sw/")
    assert fabric.pairs == [frozenset({"leaf-1", "leaf-2"})] and not fabric.problems
    found = place(hosts, fabric, MGMT)
    assert found.paths == {"gpu-a": ("spine-a1_spine-a2", "leaf-1_leaf-2"), "gpu-b": ("spine-a1_spine-a2", "leaf-3"),
                           "gpu-c": ("spine-b1", "leaf-4")}
    assert problems(found)["gpu-d"] == ("switch leaf-5 has no uplink to a spine (switch LLDP facts sw/); "
                                        "left as it is")


def test_leaves_cabled_in_a_chain_are_not_a_pair() -> None:
    hosts = {f"gpu-{i}": (n("eth0", f"leaf-{i}"),) for i in range(3)}
    switches = {"leaf-0": leaf_facts("spine", peers=("leaf-1",)), "leaf-1": leaf_facts("spine", peers=("leaf-2",)),
                "leaf-2": leaf_facts("spine"), "spine": ()}
    fabric = fabric_from_switches(switches, hosts, MGMT, "sw/")
    assert fabric.pairs == []
    found = place(hosts, fabric, MGMT)
    assert found.paths == {f"gpu-{i}": ("spine", f"leaf-{i}") for i in range(3)}
    assert [p.message for p in found.problems if p.node is None] == [
        "leaves leaf-0, leaf-1, leaf-2 are cabled to each other; an MLAG pair has two members, so none of them "
        "is paired (switch LLDP facts sw/)"]


def test_switch_facts_may_be_filed_under_the_chassis_id() -> None:
    hosts = {"gpu-a": (n("eth0", "leaf-1", chassis_id="AA:BB"),)}
    fabric = fabric_from_switches({"aa:bb": leaf_facts("spine"), "spine": ()}, hosts, MGMT, "sw/")
    assert place(hosts, fabric, MGMT).paths == {"gpu-a": ("spine", "leaf-1")}


def dual(*switches: str) -> tuple[Neighbor, ...]:
    return tuple(n(f"eth{i}", s, f"swp{i + 3}") for i, s in enumerate(switches))


def test_without_map_or_facts_a_pair_is_inferred_from_hosts_that_hear_the_same_switches() -> None:
    hosts = {"gpu-1": dual("tor-a1", "tor-a2"), "gpu-2": dual("tor-a2", "tor-a1"), "gpu-3": dual("tor-a1", "tor-a2"),
             "gpu-4": dual("tor-a1"),                       # one link down: under the pair, with a notice
             "gpu-5": dual("tor-b", "tor-b"), "gpu-6": dual("tor-b")}
    found = place(hosts, Fabric(infer_pairs=True), MGMT)
    pair = ("tor-a1_tor-a2",)
    assert {h: found.paths[h] for h in ("gpu-1", "gpu-2", "gpu-3", "gpu-4")} == dict.fromkeys(
        ("gpu-1", "gpu-2", "gpu-3", "gpu-4"), pair)
    assert found.paths["gpu-5"] == found.paths["gpu-6"] == ("tor-b",)
    why = problems(found)
    assert why[None] == ("pair tor-a1_tor-a2 inferred from 3 hosts that hear exactly these switches on their "
                         "data-plane ports (no switch map or switch facts)")
    assert "hears only tor-a1 of the pair tor-a1_tor-a2" in why["gpu-4"]
    assert set(why) == {None, "gpu-4"}


def test_one_host_alone_on_two_switches_infers_nothing() -> None:
    found = place({"gpu-1": dual("tor-a", "tor-b"), "gpu-2": dual("tor-a")}, Fabric(infer_pairs=True), MGMT)
    assert "the switches are not an MLAG pair" in problems(found)["gpu-1"]


def test_hosts_pairing_a_member_with_another_switch_block_the_inference_and_say_why() -> None:
    hosts = {"gpu-1": dual("tor-a1", "tor-a2"), "gpu-2": dual("tor-a1", "tor-a2"), "gpu-9": dual("tor-a1", "tor-b"),
             "gpu-8": dual("tor-a1", "tor-b"), "gpu-5": dual("tor-b")}
    found = place(hosts, Fabric(infer_pairs=True), MGMT)
    assert set(found.paths) == {"gpu-5"}
    why = problems(found)
    assert ("2 hosts hear exactly tor-a1, tor-a2, but gpu-8 hears tor-a1 with tor-b (and 1 more host(s)), so they "
            "are not taken as a pair (list the pair in a switch map)") in why["gpu-1"]
    assert "2 hosts hear exactly tor-a1, tor-b, but" in why["gpu-9"]
    assert not any(p.claim for p in found.problems)


def test_one_hosts_claim_never_stops_the_others_pair() -> None:
    """Issue 32, S1: without a switch map, one host's LLDP claim (hearing a pair member with another switch)
    once unplaced the seven hosts of the pair; uncorroborated by any peer, it is refused and blocks nothing."""
    hosts = {**{f"gpu-{i}": dual("tor-a1", "tor-a2") for i in range(7)}, "evil": dual("tor-a1", "tor-b"),
             "gpu-b": dual("tor-b")}
    found = place(hosts, Fabric(infer_pairs=True), MGMT)
    assert {h: p for h, p in found.paths.items() if h.startswith("gpu-")} == {
        **{f"gpu-{i}": ("tor-a1_tor-a2",) for i in range(7)}, "gpu-b": ("tor-b",)}
    assert "evil" not in found.paths
    assert [p.node for p in found.problems if p.claim] == ["evil"]
    assert ("no other host hears tor-a1, tor-b and no switch map pairs them, while 7 hosts hear exactly tor-a1, "
            "tor-a2; this host's claim is refused") in problems(found)["evil"]


def test_separate_racks_with_a_few_hosts_cabled_across_are_not_merged() -> None:
    hosts = {**{f"a{i}": dual("tor-a") for i in range(4)}, **{f"b{i}": dual("tor-b") for i in range(4)},
             "x1": dual("tor-a", "tor-b"), "x2": dual("tor-a", "tor-b")}
    found = place(hosts, Fabric(infer_pairs=True), MGMT)
    assert found.paths["a0"] == ("tor-a",) and found.paths["b0"] == ("tor-b",)
    assert "8 hosts hear only part of it" in problems(found)["x1"]


def test_a_map_or_facts_still_decide_pairs() -> None:
    hosts = {"gpu-1": dual("tor-a1", "tor-a2"), "gpu-2": dual("tor-a1", "tor-a2")}
    found = place(hosts, Fabric(), MGMT)  # a fabric that says nothing of pairs, as a map without `pairs` does
    assert not found.paths and "not an MLAG pair" in problems(found)["gpu-1"]
