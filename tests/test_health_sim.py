"""Fabric health on fabrics simulated by ibsim, read by the real `ibnetdiscover` and `ibqueryerrors`, changed
live through ibsim's console (cables unlinked and relinked, PMA counters set), judged by `topolabel health`
with a state file between runs, as the operator judges each pass."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from hack.ibfabric import SIZED, Fabric, Spec, build
from testkit.ibsim import Simulator, ibsim, needs_ibsim, needs_opensm  # noqa: F401 (ibsim is a fixture)
from topolabel.cli import main

pytestmark = [needs_ibsim, pytest.mark.slow]
RECOVER = 3.0  # seconds clean before an isolated node is healthy again


class Health:
    """`topolabel health` on one fabric: captures written to files, the nodes (the fabric's hosts, labelled
    with their leaf group and block) and the state file kept between runs."""

    def __init__(self, fabric: Fabric, tmp_path: Path, capsys: Any, **health: Any) -> None:
        self.fabric, self.dir, self.capsys = fabric, tmp_path, capsys
        self.config = tmp_path / "topolabel.yaml"
        self.config.write_text(json.dumps({"health": {"degradeAfter": 2, "recoverAfter": RECOVER, **health}}))
        self.nodes = tmp_path / "nodes.json"
        self.nodes.write_text(json.dumps({"kind": "List", "items": [
            {"kind": "Node", "metadata": {"name": host, "labels": {"topolabel.dev/leafgroup": fabric.truth.leafgroup[host],
                                                                    "topolabel.dev/block": fabric.truth.block[host]}}}
            for host in sorted(fabric.truth.guids)]}))
        self.runs = 0

    def judge(self, sim: Simulator, errors: bool = False, state: bool = True) -> tuple[int, dict[str, Any]]:
        self.runs += 1
        capture = self.dir / f"fabric-{self.runs}.txt"
        capture.write_text(sim.discover())
        args = ["health", "--config", str(self.config), "--nodes", str(self.nodes), "--ibnetdiscover", str(capture),
                "-o", "json"]
        if errors:
            queried = self.dir / f"errors-{self.runs}.txt"
            queried.write_text(sim.query_errors())
            args += ["--ibqueryerrors", str(queried)]
        if state:
            args += ["--state", str(self.dir / "state.json")]
        code = main(args)
        out = self.capsys.readouterr()
        assert code in (0, 1), out.err
        return code, json.loads(out.out)


def behind(fabric: Fabric, leaf: str) -> list[str]:
    """The hosts cabled to a leaf (by its ibsim node id)."""
    return sorted(host for host, hcas in fabric.truth.guids.items()
                  if any(fabric.nodes[f"hca-{host}-{device}"].ports[p][0] == leaf
                         for device, _ in hcas for p in fabric.nodes[f"hca-{host}-{device}"].ports))


def uplinks(fabric: Fabric, leaf: str) -> list[int]:
    return sorted(p for p, (remote, _, _) in fabric.nodes[leaf].ports.items() if "spine" in remote)


def reason(out: dict[str, Any], node: str) -> str:
    return "; ".join(next(v for v in out["nodes"] if v["node"] == node)["reasons"])


def test_a_leaf_that_loses_its_uplinks_takes_exactly_its_nodes_and_they_come_back_after_the_clean_period(
        ibsim, tmp_path: Path, capsys) -> None:
    fabric = build(Spec(sus=12, hosts=4, spines=4))  # 48 hosts, 4 per leaf, 4 uplinks per leaf
    health = Health(fabric, tmp_path, capsys)
    sim = ibsim(fabric, console=True)
    leaf = "sw-p1-su5-r1"
    hosts, ports = behind(fabric, leaf), uplinks(fabric, leaf)
    assert len(hosts) == 4 and len(ports) == 4
    code, out = health.judge(sim)
    assert code == 0 and out["isolated"] == out["suspect"] == []
    for port in ports[:3]:  # 3 of 4 uplinks gone: the leaf is still there, with one
        sim.unlink(leaf, port)
    code, out = health.judge(sim)
    assert code == 0 and out["suspect"] == hosts and out["isolated"] == []
    code, out = health.judge(sim)
    assert code == 1 and out["isolated"] == hosts and out["suspect"] == [] and out["brake"] is None
    name = fabric.nodes[leaf].name
    assert reason(out, hosts[0]) == f"behind leaf {name}, which lost 3 of the 4 uplinks its peers have"
    assert {v["scope"] for v in out["nodes"] if v["state"] == "isolated"} == {f"leaf {name}"}
    sim.unlink(leaf, ports[3])  # the last one: the leaf and its hosts are gone from the fabric
    code, out = health.judge(sim)
    assert code == 1 and out["isolated"] == hosts
    assert reason(out, hosts[0]).startswith(f"not in the fabric any more (was behind {name})")
    for port in ports:
        sim.relink(leaf, port)
    code, out = health.judge(sim)
    assert code == 1 and out["isolated"] == hosts and reason(out, hosts[0]).startswith("recovering: last bad")
    time.sleep(RECOVER)
    code, out = health.judge(sim)
    assert code == 0 and out["isolated"] == out["suspect"] == []
    assert {v["state"] for v in out["nodes"]} == {"healthy"}


@needs_opensm
def test_packet_drops_on_one_hca_port_take_that_node_only(ibsim, tmp_path: Path, capsys) -> None:
    fabric = build(Spec(sus=4, hosts=5, spines=2))  # 20 hosts
    health = Health(fabric, tmp_path, capsys, maxIsolatedFraction=0.1)  # at most 2
    sim = ibsim(fabric, console=True)
    sim.subnet_manager(tmp_path)
    code, out = health.judge(sim, errors=True)
    assert code == 0 and out["suspect"] == []  # the first reading is the baseline
    dropping, facing = "p1-gpu-02-c03", "p1-gpu-03-c01"
    sim.set_counter(f"hca-{dropping}-mlx5_0", 1, "PortXmitDiscards", 500)
    leaf = "sw-p1-su3-r1"  # the leaf port facing another host: its cable has symbol errors
    port = next(p for p, (remote, _, _) in fabric.nodes[leaf].ports.items() if remote == f"hca-{facing}-mlx5_0")
    sim.set_counter(leaf, port, "SymbolErrorCounter", 50)
    spine_port = uplinks(fabric, leaf)[0]  # and a leaf-spine link: no host's, reported only
    sim.set_counter(leaf, spine_port, "PortRcvErrors", 20)
    code, out = health.judge(sim, errors=True)
    assert code == 0 and out["suspect"] == sorted([dropping, facing])
    assert reason(out, dropping).startswith("mlx5_0 port 1: port_xmit_discards +500")
    assert reason(out, facing).startswith(f"leaf {fabric.nodes[leaf].name} port {port}, facing its HCA: symbol_error +50")
    assert any(f"port {spine_port}: port_rcv_errors +20" in n for n in out["notices"])
    sim.set_counter(f"hca-{dropping}-mlx5_0", 1, "PortXmitDiscards", 1200)  # still dropping: the second window
    code, out = health.judge(sim, errors=True)
    assert code == 1 and out["isolated"] == [dropping] and out["suspect"] == [facing]


def test_a_clean_8192_hca_fabric_isolates_nothing(ibsim, tmp_path: Path, capsys) -> None:
    fabric = build(SIZED[8192])
    health = Health(fabric, tmp_path, capsys)
    sim = ibsim(fabric)
    for _ in range(2):
        code, out = health.judge(sim, state=False)  # without a state file every finding counts as persisted
        assert code == 0 and len(out["nodes"]) == 1024
        assert out["isolated"] == out["suspect"] == out["held"] == [] and out["notices"] == []


def test_a_spine_lost_with_a_third_of_the_fabric_is_refused_by_the_brake(ibsim, tmp_path: Path, capsys) -> None:
    fabric = build(Spec(pods=3, sus=3, hosts=4, spines=1, cores=2))  # a spine per pod; 12 hosts per pod
    health = Health(fabric, tmp_path, capsys)
    sim = ibsim(fabric, console=True)
    code, out = health.judge(sim)
    assert code == 0 and out["isolated"] == []
    sim.command('Unlink "sw-p3-spine1"')  # pod 3 is cut off from the cores: its 12 hosts leave the fabric
    pod3 = sorted(h for h, block in fabric.truth.block.items() if block == "p3")
    code, out = health.judge(sim)
    assert code == 0 and out["suspect"] == pod3
    code, out = health.judge(sim)
    assert code == 1 and out["isolated"] == [] and out["held"] == pod3
    assert out["brake"].startswith("brake: isolating 12 more node(s) would isolate 12 of 36 (more than 10%, at most 3)")
