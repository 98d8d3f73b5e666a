"""The LLDP source against real lldpd in network namespaces: inferred placement versus the wiring."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.lldplab import (Lab, build_lab, dual_homed_wiring, fixed_wiring,  # noqa: F401 (build_lab is a fixture)
                           lab_available, mismatches, random_wiring)
from topolabel.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]


def discover(capsys: pytest.CaptureFixture, *args: str) -> dict:
    capsys.readouterr()
    assert main(["discover", "--source", "lldp", "-o", "json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def dumps(lab: Lab, tmp_path: Path) -> tuple[str, str]:
    hosts = lab.dump(lab.wiring.hosts, tmp_path / "hosts")
    switches = lab.dump(lab.wiring.switches, tmp_path / "switches")
    return str(hosts), str(switches)


def test_fixed_lab_places_racks_and_pairs_and_reports_the_rest(build_lab, tmp_path, capsys) -> None:
    wiring = fixed_wiring()
    hosts, switches = dumps(build_lab(wiring), tmp_path)

    snap = discover(capsys, "--lldp-dir", hosts, "--switch-lldp", switches)
    assert mismatches(snap, wiring) == []
    assert snap["nodes"] == {"gpu-a": {"block": "spine-1", "rack": "leaf-r01"},
                             "gpu-b": {"block": "spine-1", "rack": "leaf-r02_leaf-r03"}}
    why = {p["node"]: p["message"] for p in snap["problems"]}
    assert "no LLDP neighbour on a data-plane port" in why["gpu-c"] and "eno1 -> oob-sw" in why["gpu-c"]
    assert "disagree" in why["gpu-d"] and "leaf-r01" in why["gpu-d"] and "leaf-r02" in why["gpu-d"]

    # without the switches' facts nothing says leaf-r02 and leaf-r03 are a pair: gpu-b's ports disagree
    alone = discover(capsys, "--lldp-dir", hosts)
    assert set(alone["nodes"]) == {"gpu-a"} and alone["nodes"]["gpu-a"] == {"rack": "leaf-r01"}
    assert any(p.get("node") == "gpu-b" and "disagree" in p["message"] for p in alone["problems"])


@pytest.mark.parametrize("seed, blocks", [(20261130, 2), (7, 3)])
def test_unseen_random_wiring_lands_every_host_right(build_lab, tmp_path, capsys, seed, blocks) -> None:
    wiring = random_wiring(seed, blocks=blocks)
    hosts, switches = dumps(build_lab(wiring), tmp_path)

    from_lldp = discover(capsys, "--lldp-dir", hosts, "--switch-lldp", switches)
    assert mismatches(from_lldp, wiring) == []
    for host, block in wiring.block.items():  # a block is named after its spines
        assert all(spine in from_lldp["nodes"][host]["block"] for spine in wiring.spines[block])

    switch_map = tmp_path / "switches.yaml"
    switch_map.write_text(yaml.safe_dump(wiring.switch_map()))
    from_map = discover(capsys, "--lldp-dir", hosts, "--switch-map", str(switch_map))
    assert mismatches(from_map, wiring) == []
    assert all(from_map["nodes"][h]["block"] == b for h, b in wiring.block.items())
    assert {h: v["rack"] for h, v in from_map["nodes"].items()} == {h: v["rack"] for h, v in from_lldp["nodes"].items()}


def test_unmapped_dual_homed_rack_is_one_rack_inferred_from_its_hosts(build_lab, tmp_path, capsys) -> None:
    wiring = dual_homed_wiring()
    hosts, _ = dumps(build_lab(wiring), tmp_path)

    snap = discover(capsys, "--lldp-dir", hosts)  # no switch map, no switch facts
    assert {h: v["rack"] for h, v in snap["nodes"].items()} == {
        "gpu-a1": "tor-a1_tor-a2", "gpu-a2": "tor-a1_tor-a2", "gpu-a3": "tor-a1_tor-a2", "gpu-a4": "tor-a1_tor-a2",
        "gpu-b1": "tor-b", "gpu-b2": "tor-b"}
    notices = [p["message"] for p in snap["problems"] if "node" not in p]
    assert "pair tor-a1_tor-a2 inferred from 3 hosts" in " ".join(notices)
    assert not any("tor-c1_tor-c2" in m for m in notices)
    why = {p["node"]: p["message"] for p in snap["problems"] if "node" in p}
    assert set(why) == wiring.degraded | wiring.miswired
    assert "hears only tor-a1 of the pair tor-a1_tor-a2" in why["gpu-a4"]
    assert "gpu-x hears tor-c1 with tor-b" in why["gpu-c1"] and "not taken as a pair" in why["gpu-c1"]
    assert "disagree" in why["gpu-x"]
