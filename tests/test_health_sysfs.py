"""Fabric health from a node's own ports: sysfs trees shaped like the kernel's, read by the agent's `PortWatch`
(what it publishes as topolabel.dev/ib-port-health) or by `topolabel health --sysfs`, judged like the operator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from labeler.errors import SourceError
from labeler.io.nodes import Node
from labeler.settings.config import parse_config
from labeler.topology.isolation import COUNTERS, HEALTHY, ISOLATED, SUSPECT, History
from providers.infiniband.portrecord import ANNOTATION, MAX_CHARS, decode, encode, make_record
from providers.infiniband.sysfs import read_port_health
from testkit.ibsysfs import FakeDevice, FakePort, write_sysfs
from topolabel.agent import PortWatch
from topolabel.cli import main
from topolabel.fabrichealth import Evidence, assess

# two nodes: the brake lets one of them (50 %) be isolated
CFG = parse_config({"health": {"degradeAfter": 2, "window": 3600, "recoverAfter": 600, "maxIsolatedFraction": 0.5}},
                   "test")


def hcas(counters: dict[int, dict[str, int]] | None = None, rates: dict[int, str] | None = None,
         down: tuple[int, ...] = ()) -> list[FakeDevice]:
    """Eight single-port NDR HCAs; `counters`, `rates` and `down` change some of them (by HCA number)."""
    counters, rates = counters or {}, rates or {}
    return [FakeDevice(f"mlx5_{i}", 0xE09D730300858D00 + 16 * i,
                       [FakePort(state=1 if i in down else 4, counters={**{k: 0 for k in COUNTERS}, **counters.get(i, {})},
                                 **({"rate": rates[i]} if i in rates else {}))]) for i in range(8)]


class Clock:
    def __init__(self, now: float = 1_764_590_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def judge(rounds: list[list[FakeDevice]], tmp_path: Path, step: float = 300.0) -> list[str]:
    """The agent's PortWatch on gpu-001's sysfs, one round per entry (`step` seconds apart); after each round the
    operator's path reads the published annotation beside a clean gpu-002 and judges. gpu-001's state per round."""
    clock = Clock()
    watch = PortWatch(str(tmp_path / "gpu-001"), list(COUNTERS), clock)
    clean = PortWatch(str(write_sysfs(tmp_path / "gpu-002", hcas())), list(COUNTERS), clock)
    history, states = History(), []
    for devices in rounds:
        write_sysfs(tmp_path / "gpu-001", devices)
        nodes = [Node("gpu-001", annotations={ANNOTATION: watch()}), Node("gpu-002", annotations={ANNOTATION: clean()})]
        found = assess(CFG, Evidence(nodes), history, clock.now)
        history = found.history
        states.append(found.decision.verdicts["gpu-001"].state)
        assert found.decision.verdicts["gpu-002"].state == HEALTHY
        clock.now += step
    return states


def test_a_flapping_link_is_isolated_after_two_windows_in_which_link_downed_rose(tmp_path: Path) -> None:
    rounds = [hcas({3: {"link_downed": n}}) for n in (0, 1, 2, 2, 3)]
    assert judge(rounds, tmp_path) == [HEALTHY, SUSPECT, ISOLATED, ISOLATED, ISOLATED]


def test_an_error_burst_that_stops_is_let_back_after_the_clean_period(tmp_path: Path) -> None:
    burst = [hcas({5: {"symbol_error": n, "port_rcv_errors": n // 10}}) for n in (0, 400, 900)]
    quiet = [hcas({5: {"symbol_error": 900, "port_rcv_errors": 90}})] * 4  # 300 s apart: 600 s clean at the 2nd
    assert judge(burst + quiet, tmp_path) == [HEALTHY, SUSPECT, ISOLATED, ISOLATED, HEALTHY, HEALTHY, HEALTHY]


def test_the_record_is_the_same_text_while_nothing_rises_so_the_agent_writes_nothing(tmp_path: Path) -> None:
    clock = Clock()
    watch = PortWatch(str(write_sysfs(tmp_path, hcas())), list(COUNTERS), clock)
    first = watch()
    clock.now += 287  # rounds are jittered: the text must not depend on the interval
    assert watch() == first and first == '{"v":1,"ports":[' + ",".join(f'["mlx5_{i}",1,4,5,400,{{}}]'
                                                                   for i in range(8)) + "]}"
    write_sysfs(tmp_path, hcas({2: {"link_downed": 1}}))
    clock.now += 300
    record = decode(watch(), "test")
    assert record.at == clock.now and record.window == 300.0
    assert [p.increase for p in record.ports if p.increase] == [{"link_downed": 1}]
    clock.now += 300
    assert watch() == first  # nothing rose since: the clean text again


def test_a_port_at_half_its_usual_rate_with_topolabel_health(tmp_path: Path, capsys) -> None:
    write_sysfs(tmp_path / "a", hcas(rates={6: "200 Gb/sec (4X HDR)"}))
    write_sysfs(tmp_path / "b", hcas())
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps({"kind": "List", "items": [{"kind": "Node", "metadata": {"name": n}} for n in "ab"]}))
    config = tmp_path / "topolabel.yaml"
    config.write_text("health: {maxIsolatedFraction: 0.5}\n")
    code = main(["health", "--config", str(config), "--nodes", str(nodes), "--sysfs", f"a={tmp_path / 'a'}",
                 "--sysfs", f"b={tmp_path / 'b'}", "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["isolated"] == ["a"]
    assert out["nodes"][0]["reasons"] == ["mlx5_6/1 runs at 200 Gb/s, most ports at 400 Gb/s"]
    assert out["nodes"][1] == {"node": "b", "state": "healthy", "healthy": True, "scope": "node", "reasons": []}


def test_topolabel_health_keeps_counters_and_counts_in_its_state_file(tmp_path: Path, capsys) -> None:
    config = tmp_path / "topolabel.yaml"
    config.write_text("health: {degradeAfter: 2, maxIsolatedFraction: 1}\n")
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps({"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "a"}}]}))
    state = tmp_path / "state.json"
    codes = []
    for n in (0, 1, 2):
        write_sysfs(tmp_path / "sys", hcas({1: {"link_downed": n}}))
        codes.append(main(["health", "--config", str(config), "--nodes", str(nodes), "--sysfs", f"a={tmp_path / 'sys'}",
                           "--state", str(state), "-o", "json"]))
        capsys.readouterr()
    assert codes == [0, 0, 1]  # no baseline; one flap (suspect); the second flap
    saved = json.loads(state.read_text())
    assert saved["nodes"]["a"]["isolated"] and saved["baselines"]["ports"]["a"]["counters"]["mlx5_1/1"]["link_downed"] == 2
    state.write_text("[1, 2]")
    assert main(["health", "--nodes", str(nodes), "--state", str(state)]) == 2
    assert "state.json: not a topolabel health state" in capsys.readouterr().err


def test_sysfs_reading_and_the_record_are_bounded_and_refuse_what_is_not_one(tmp_path: Path) -> None:
    ports = read_port_health(write_sysfs(tmp_path, hcas({0: {"link_downed": 7}}, down=(4,))), ["link_downed", "nope"])
    assert [(p.name, p.state, p.phys_state, p.rate, p.counters) for p in ports][:1] == [("mlx5_0/1", 4, 5, 400.0,
                                                                                       {"link_downed": 7})]
    assert ports[4].state == 1 and ports[4].phys_state == 3
    many = make_record(ports * 20, None, 0, 0)
    assert len(many.ports) == 64 and len(encode(many)) <= MAX_CHARS
    for text, message in (("{", "not a port record"), ('{"v": 2}', "version 2"), ("x" * 9000, "more than 8192"),
                          ('{"v":1,"window":0,"ports":[["a","1",4,5,400,{}]]}', "wrong types")):
        with pytest.raises(SourceError, match=message):
            decode(text, "node a")
