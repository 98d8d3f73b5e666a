"""`topolabel agent`: the publishing loop, lldpcli failures, and one round against real lldpd and kmock."""

from __future__ import annotations

import asyncio
import copy
import io
import os
import json
from pathlib import Path

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from labeler.errors import SourceError
from providers.lldp.facts import ANNOTATION, parse_json0, to_json
from testkit.lldplab import build_lab, fixed_wiring, lab_available, mismatches  # noqa: F401 (fixture)
from topolabel.agent import Agent, annotation_patch, lldpcli_command, read_neighbors, run
from topolabel.cli import main

NODES = "v1/nodes"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_round_publishes_changes_and_resyncs_unchanged_facts() -> None:
    facts, written, clock = ["a"], [], Clock()
    agent = Agent(lambda: facts[0], written.append, resync=100, clock=clock)
    assert agent.round() and written == ["a"]
    clock.now = 50
    assert not agent.round() and written == ["a"]
    facts[0] = "b"
    assert agent.round() and written == ["a", "b"]
    clock.now = 151  # unchanged, but a resync is due: restores an annotation someone removed
    assert agent.round() and written == ["a", "b", "b"]


def test_failed_publish_is_retried_next_round() -> None:
    calls = []

    def publish(value: str) -> None:
        calls.append(value)
        if len(calls) == 1:
            raise ApiException(status=403, reason="Forbidden")

    agent = Agent(lambda: "a", publish)
    log, naps = io.StringIO(), []

    def sleep(seconds: float) -> None:
        naps.append(seconds)
        if len(naps) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(agent, interval=10, once=False, log=log, sleep=sleep)
    assert calls == ["a", "a"]
    assert "403 Forbidden" in log.getvalue() and "published" in log.getvalue()
    assert all(9 <= n <= 11 for n in naps)


def test_every_round_failed_or_not_touches_the_alive_file(tmp_path) -> None:
    alive = tmp_path / "alive"
    rounds = iter([SourceError("lldpcli: no answer within 30 s"), "a"])

    def collect() -> str:
        outcome = next(rounds)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    stamps = []

    def sleep(_: float) -> None:
        stamps.append(alive.stat().st_mtime_ns)
        os.utime(alive, ns=(0, 0))  # so the next round's touch shows
        if len(stamps) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(Agent(collect, lambda _: None), interval=10, once=False, log=io.StringIO(), sleep=sleep, alive=alive)
    assert len(stamps) == 2 and all(stamp > 0 for stamp in stamps)


def test_once_lets_errors_out() -> None:
    def collect() -> str:
        raise SourceError("lldpcli: gone")

    with pytest.raises(SourceError):
        run(Agent(collect, print), interval=10, once=True, log=io.StringIO())


def test_lldpcli_without_lldpd_is_a_one_line_error(tmp_path, capsys) -> None:
    socket = str(tmp_path / "none.sock")
    with pytest.raises(SourceError, match="is lldpd running"):
        read_neighbors(lldpcli_command(socket=socket))
    assert main(["agent", "--once", "--print", "--lldp-socket", socket]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("topolabel agent: error: lldpcli -u") and "Traceback" not in err[0]
    assert main(["agent", "--once", "--print", "--lldpcli", str(tmp_path / "no-lldpcli")]) == 2
    assert "not found" in capsys.readouterr().err


def test_agent_needs_a_node_name(monkeypatch, capsys) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    assert main(["agent", "--once"]) == 2
    assert "NODE_NAME" in capsys.readouterr().err


def test_the_patch_touches_only_the_annotation() -> None:
    assert annotation_patch({ANNOTATION: "{}"}) == {"metadata": {"annotations": {ANNOTATION: "{}"}}}
    assert annotation_patch({"topolabel.dev/gpu-clique": None}) == {"metadata": {"annotations": {"topolabel.dev/gpu-clique": None}}}


def kubeconfig(path: Path, url: str) -> str:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "kmock",
        "clusters": [{"name": "kmock", "cluster": {"server": url.rstrip("/")}}],
        "users": [{"name": "agent", "user": {"token": "agent-token"}}],
        "contexts": [{"name": "kmock", "context": {"cluster": "kmock", "user": "agent"}}]}))
    return str(path)


def node(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name},
                         "annotations": {"example.com/keep": "me"}},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}}


@pytest.mark.slow
@pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))
@pytest.mark.asyncio
async def test_agent_once_patches_only_its_own_node(kmock, build_lab, tmp_path, monkeypatch, capsys) -> None:
    wiring = fixed_wiring()
    lab = build_lab(wiring)
    for host in wiring.hosts:
        kmock.objects[NODES, None, host] = node(host)
    before = {h: copy.deepcopy(dict(kmock.objects[NODES, None, h].raw)) for h in wiring.hosts}
    config = kubeconfig(tmp_path / "kubeconfig", str(kmock.url))

    async def agent_round(host: str) -> int:
        monkeypatch.setenv("NODE_NAME", host)  # the downward API's spec.nodeName
        return await asyncio.to_thread(main, ["agent", "--once", "--kubeconfig", config,
                                              "--lldp-socket", lab.socket(host)])

    assert await agent_round("gpu-b") == 0
    assert [(r.method.value, r.url.path) for r in kmock] == [("PATCH", "/api/v1/nodes/gpu-b")]
    published = dict(kmock.objects[NODES, None, "gpu-b"].raw)
    expected = to_json(parse_json0(json.loads(lab.neighbors("gpu-b")), "lab"))
    assert published["metadata"]["annotations"] == {"example.com/keep": "me", ANNOTATION: expected}
    assert {k: v for k, v in published.items() if k != "metadata"} == \
        {k: v for k, v in before["gpu-b"].items() if k != "metadata"}
    assert published["metadata"]["labels"] == before["gpu-b"]["metadata"]["labels"]
    assert all(dict(kmock.objects[NODES, None, h].raw) == before[h] for h in wiring.hosts if h != "gpu-b")
    assert {n["interface"] for n in json.loads(expected)["neighbors"]} == {"eno1", "eth0", "eth1"}

    for host in wiring.hosts:
        assert await agent_round(host) == 0
    switches = lab.dump(wiring.switches, tmp_path / "switches")
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["discover", "--source", "lldp", "--kubeconfig", config,
                                          "--switch-lldp", str(switches), "-o", "json"]) == 0
    assert mismatches(json.loads(capsys.readouterr().out), wiring) == []
