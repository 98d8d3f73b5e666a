"""Fabric health's decisions (labeler.topology.isolation): hysteresis per node, quarantine per domain, the brake."""

from __future__ import annotations

import json

import pytest

from labeler.settings.config import parse_config
from labeler.topology.isolation import (HEALTHY, HELD, ISOLATED, SUSPECT, DomainRule, Finding, History, Policy,
                               condition_findings, decide)
from labeler.io.nodes import Node

BLOCK = "topolabel.dev/block"
LEAF = "topolabel.dev/leafgroup"


def cluster(blocks: int = 4, groups: int = 4, hosts: int = 4) -> dict[str, dict[str, str]]:
    """blocks x groups x hosts nodes labelled with their block and leaf group."""
    return {f"n-{b}-{g}-{h}": {BLOCK: f"b{b}", LEAF: f"b{b}-g{g}"}
            for b in range(blocks) for g in range(groups) for h in range(hosts)}


def run(passes: list[list[Finding]], nodes: dict[str, dict[str, str]], policy: Policy, start: float = 1000.0,
        step: float = 60.0) -> list:
    """The decision of each pass, `step` seconds apart, history carried over."""
    history, out = History(), []
    for i, findings in enumerate(passes):
        decision, history = decide(findings, nodes, policy, history, start + i * step)
        out.append(decision)
    return out


def bad(node: str, at: float | None = None, scope: str = "node") -> Finding:
    return Finding(node, "errors", f"{node}: link_downed +1", at=at, scope=scope)


def test_a_node_is_degraded_after_n_bad_observations_within_the_window_and_not_before() -> None:
    nodes = cluster()
    policy = Policy(degrade_after=3, window=600, recover_after=300)
    d = run([[bad("n-0-0-0")], [bad("n-0-0-0")], [bad("n-0-0-0")]], nodes, policy)
    assert [x.verdicts["n-0-0-0"].state for x in d] == [SUSPECT, SUSPECT, ISOLATED]
    assert "1 of 3 bad observations within 600s" in d[0].verdicts["n-0-0-0"].reasons[-1]
    assert all(v.state == HEALTHY for x in d for n, v in x.verdicts.items() if n != "n-0-0-0")
    # three observations spread wider than the window never add up
    spread = run([[bad("n-0-0-0")], [bad("n-0-0-0")], [bad("n-0-0-0")]], nodes, policy, step=400)
    assert [x.verdicts["n-0-0-0"].state for x in spread] == [SUSPECT, SUSPECT, SUSPECT]


def test_one_published_window_read_on_several_passes_counts_once_a_flapping_link_counts_each_time() -> None:
    nodes, policy = cluster(), Policy(degrade_after=2, window=600, recover_after=300)
    same = run([[bad("n-1-1-1", at=990.0)]] * 4, nodes, policy)
    assert {x.verdicts["n-1-1-1"].state for x in same} == {SUSPECT}
    flapping = run([[bad("n-1-1-1", at=990.0)], [], [bad("n-1-1-1", at=1100.0)]], nodes, policy)
    assert [x.verdicts["n-1-1-1"].state for x in flapping] == [SUSPECT, SUSPECT, ISOLATED]


def test_healthy_again_only_after_the_clean_period() -> None:
    nodes, policy = cluster(), Policy(degrade_after=1, window=600, recover_after=300)
    d = run([[bad("n-0-0-0")], [], [], [], [], [], []], nodes, policy, step=60)
    assert [x.verdicts["n-0-0-0"].state for x in d] == [ISOLATED] * 5 + [HEALTHY] * 2
    assert d[2].verdicts["n-0-0-0"].reasons == ["recovering: last bad observation 120s ago (n-0-0-0: link_downed +1), "
                                                "healthy after 300s without one"]


def test_a_leaf_takes_its_nodes_along_and_says_so() -> None:
    nodes, policy = cluster(), Policy(degrade_after=1, max_fraction=0.2)
    behind = [n for n, labels in nodes.items() if labels[LEAF] == "b2-g3"]
    d = run([[bad(n, scope="leaf sw-7") for n in behind]], nodes, policy)[0]
    assert d.isolated == sorted(behind)
    assert {d.verdicts[n].scope for n in behind} == {"leaf sw-7"} and d.by_scope() == {"leaf": 4}


def test_k_of_n_degraded_quarantines_the_domain_per_level() -> None:
    nodes = cluster()
    policy = Policy(degrade_after=1, max_fraction=0.3, domains=(DomainRule("leafgroup", LEAF, nodes=2),))
    d = run([[bad("n-0-1-0"), bad("n-0-1-2"), bad("n-3-0-0")]], nodes, policy)[0]
    group = sorted(n for n, labels in nodes.items() if labels[LEAF] == "b0-g1")
    assert d.isolated == sorted([*group, "n-3-0-0"])
    assert [(q.level, q.value, q.degraded, q.size) for q in d.quarantined] == [("leafgroup", "b0-g1", 2, 4)]
    assert d.verdicts["n-0-1-1"].scope == "leafgroup=b0-g1"
    assert "domain leafgroup=b0-g1 quarantined: 2 of 4 nodes degraded" in d.verdicts["n-0-1-1"].reasons
    assert d.by_scope() == {"node": 3, "leafgroup": 2}
    by_fraction = Policy(degrade_after=1, max_fraction=0.3, domains=(DomainRule("block", BLOCK, fraction=0.25),))
    d = run([[bad(f"n-2-{g}-0") for g in range(4)]], nodes, by_fraction)[0]
    assert [q.name for q in d.quarantined] == ["block=b2"] and len(d.isolated) == 16


def test_the_brake_isolates_nothing_new_past_the_share_and_keeps_what_it_isolated() -> None:
    nodes = cluster()  # 64 nodes: at most 6 at 10 %
    policy = Policy(degrade_after=1, recover_after=10_000, max_fraction=0.1)
    first = [bad(f"n-0-0-{h}") for h in range(4)]
    spine = [bad(n) for n, labels in nodes.items() if labels[BLOCK] in ("b1", "b2")]  # 32 nodes at once
    d = run([first, first + spine], nodes, policy)
    assert d[0].isolated == sorted(f.node for f in first) and d[0].refused is None
    assert d[1].isolated == d[0].isolated  # kept
    assert len(d[1].names(HELD)) == 32 and d[1].refused.startswith("brake: isolating 32 more node(s) would "
                                                                    "isolate 36 of 64 (more than 10%, at most 6)")
    assert d[1].refused in d[1].verdicts["n-1-0-0"].reasons


def test_the_brake_counts_domains_per_level() -> None:
    nodes = {**{f"t{i}": {BLOCK: f"t{i}"} for i in range(20)}, **{f"big{j}": {BLOCK: "big"} for j in range(80)}}
    policy = Policy(degrade_after=1, max_fraction=0.1, domains=(DomainRule("block", BLOCK, nodes=1),))
    d = run([[bad("t0"), bad("t1")]], nodes, policy)[0]  # 2 nodes, 2 of 21 domains: within 10 %
    assert d.refused is None and [q.name for q in d.quarantined] == ["block=t0", "block=t1"]
    d = run([[bad("t0"), bad("t1"), bad("t2")]], nodes, policy)[0]  # 3 nodes, but 3 of 21 domains
    assert d.isolated == [] and d.quarantined == [] and "3 of 21 block domains" in d.refused


def test_sustained_reads_each_finding_as_persisted() -> None:
    nodes = cluster()
    decision, _ = decide([bad("n-0-0-0")], nodes, Policy(degrade_after=5), History(), 1000.0, sustained=True)
    assert decision.isolated == ["n-0-0-0"]


def test_history_round_trips_through_json_and_refuses_other_documents() -> None:
    nodes = cluster()
    _, history = decide([bad("n-0-0-0")], nodes, Policy(degrade_after=1), History(baselines={"x": {"y": 1}}), 5.0)
    again = History.from_dict(json.loads(json.dumps(history.to_dict())))
    assert again == history and again.nodes["n-0-0-0"].isolated
    for doc in ({"version": 2}, {"version": 1, "nodes": {"a": {"bad": ["x"]}}}, {"version": 1, "baselines": []}):
        with pytest.raises((ValueError, TypeError)):
            History.from_dict(doc)


def test_conditions_other_tools_set_are_findings() -> None:
    nodes = [Node("a", conditions=(("KernelDeadlock", "True", "DockerHung", "task hung"),)),
             Node("b", conditions=(("KernelDeadlock", "False", "", ""),)),
             Node("c", conditions=(("NVSentinelIBLink", "True", "", ""),))]
    found = condition_findings(nodes, {"KernelDeadlock": "True", "NVSentinelIBLink": "True"})
    assert [(f.node, f.message) for f in found] == [("a", "condition KernelDeadlock=True (DockerHung: task hung)"),
                                                    ("c", "condition NVSentinelIBLink=True")]


def test_the_config_section_makes_the_policy_and_checks_what_it_can() -> None:
    cfg = parse_config({"levels": [{"name": "rack", "label": "example.com/rack"}],
                        "health": {"degradeAfter": 2, "maxIsolatedFraction": 0.2,
                                   "domains": [{"level": "rack", "nodes": 2}, {"level": "block", "fraction": 0.5},
                                               {"level": "x.io/pod", "nodes": 3}]}}, "t")
    assert cfg.health_policy() == Policy(2, 1800.0, 3600.0, 0.2, (DomainRule("rack", "example.com/rack", 2),
                                                                 DomainRule("block", BLOCK, None, 0.5),
                                                                 DomainRule("x.io/pod", "x.io/pod", 3)))
    assert cfg.health.taint is None and not cfg.health.enabled
    for health, message in (({"domains": [{"level": "rack"}]}, "health.domains[0]: give `nodes`, `fraction` or both"),
                            ({"counters": {"link_downd": 1}}, "did you mean 'link_downed'?"),
                            ({"taint": {"key": "example.com/sick"}}, "must be topolabel.dev/<name>"),
                            ({"taint": {"effect": "PreferNoSchedule"}}, "health.taint.effect")):
        with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]").replace("?", r"\?")):
            parse_config({"health": health}, "t")
