"""LLDP facts: `lldpcli -f json0` output in the shape real lldpd 1.0 prints, and the compact facts JSON."""

from __future__ import annotations

import json

import pytest

from labeler.errors import TopologyError
from providers.lldp.facts import Neighbor, from_facts, parse_json0, read_facts, to_json


def entry(interface: str, name: str | None, chassis_id: str, port: str, descr: str | None = None) -> dict:
    """One `lldp[].interface[]` entry as lldpd 1.0.16 prints it with -f json0 (checked against real output)."""
    chassis: dict = {"id": [{"type": "mac", "value": chassis_id}],
                     "capability": [{"type": "Bridge", "enabled": False}, {"type": "Station", "enabled": True}]}
    if name is not None:
        chassis["name"] = [{"value": name}]
    port_: dict = {"id": [{"type": "ifname", "value": port}], "ttl": [{"value": "4"}]}
    if descr is not None:
        port_["descr"] = [{"value": descr}]
    return {"name": interface, "via": "LLDP", "rid": "1", "age": "0 day, 00:00:02",
            "chassis": [chassis], "port": [port_]}


def json0(*entries: dict) -> dict:
    return {"lldp": [{"interface": list(entries)}]} if entries else {"lldp": [{}]}


def test_json0_neighbours_sorted_with_chassis_id_when_no_name() -> None:
    data = json0(entry("eth1", None, "56:6c:21:32:03:8b", "Ethernet7"), entry("eth0", "leaf-r01", "aa:bb", "swp1", "to gpu-a"))
    assert parse_json0(data, "x") == (
        Neighbor("eth0", "leaf-r01", "aa:bb", "swp1", "to gpu-a"),
        Neighbor("eth1", "", "56:6c:21:32:03:8b", "Ethernet7", ""))
    assert [n.switch for n in parse_json0(data, "x")] == ["leaf-r01", "56:6c:21:32:03:8b"]


def test_nothing_heard_is_an_empty_answer() -> None:
    assert parse_json0(json0(), "x") == ()


def test_an_interface_hearing_two_neighbours_gives_two() -> None:
    data = json0(entry("eth0", "leaf-a", "01", "swp1"), entry("eth0", "leaf-b", "02", "swp9"))
    assert [n.switch for n in parse_json0(data, "x")] == ["leaf-a", "leaf-b"]


@pytest.mark.parametrize("data, words", [
    ({"lldp": {"interface": [{"eth0": {}}]}}, "no 'lldp' list"),     # plain -f json
    ({"lldp": {}}, "no 'lldp' list"),                                 # plain -f json, nothing heard
    ({"lldp": [{"interface": {"eth0": {}}}]}, "json0"),
    ({"lldp": [{"interface": [{"via": "LLDP"}]}]}, "no 'name'"),
    ([], "no 'lldp' list"),
])
def test_other_shapes_are_one_line_errors(data, words) -> None:
    with pytest.raises(TopologyError, match=words) as err:
        parse_json0(data, "host-a.json")
    assert str(err.value).startswith("host-a.json: ")


def test_facts_json_is_compact_stable_and_round_trips() -> None:
    neighbors = parse_json0(json0(entry("eth1", "leaf-b", "02", "swp2"), entry("eth0", "leaf-a", "01", "swp1")), "x")
    text = to_json(neighbors)
    assert " " not in text and json.loads(text)["version"] == 1
    assert to_json(reversed(neighbors)) == text
    assert read_facts(text, "annotation") == neighbors == from_facts(json.loads(text), "annotation")
    assert read_facts(json.dumps(json0(entry("eth1", "leaf-b", "02", "swp2"), entry("eth0", "leaf-a", "01", "swp1"))),
                      "raw") == neighbors


@pytest.mark.parametrize("text, words", [
    ("{not json", "not valid JSON"),
    ('{"version": 2, "neighbors": []}', "expected"),
    ('{"version": 1, "neighbors": [{"chassisName": "x"}]}', "no 'interface'"),
    ('{"version": 1, "neighbors": [{"interface": "eth0"}]}', "neither chassisName nor chassisId"),
])
def test_bad_facts_name_the_input(text, words) -> None:
    with pytest.raises(TopologyError, match=words) as err:
        read_facts(text, "annotation topolabel.dev/lldp-neighbors")
    assert str(err.value).startswith("annotation topolabel.dev/lldp-neighbors: ")
