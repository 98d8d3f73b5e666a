"""The `topograph` preset on label sets shaped like the ones NVIDIA Topograph writes.

Shapes follow Topograph's own fixtures: chains of different depth under one root (its graph test of mixed-depth
paths at a shared root), accelerator domains inside a closest switch (its block test set), two-level accelerator
domains spanning several closest switches (its dual-xclr simulation models), nodes it found no topology for,
and the keys its older releases wrote.
"""

from __future__ import annotations

import pytest

from labeler.errors import SourceError, TopologyError
from labeler.io.nodes import Node
from labeler.topology.model import ACCELERATOR_LEVELS
from labeler.topology.placement import level_keys, to_snapshot
from providers.base import SourceContext
from providers.labels import discover

TIER = "fabric.topograph.run/tier-"
DOMAIN = "accelerator.topograph.run/domain"
SUB = "accelerator.topograph.run/sub-domain"


def run(nodes: list[Node]):
    found = discover(SourceContext(nodes=nodes, options={"preset": "topograph"}, origin="test"))
    return found, to_snapshot(found, level_keys(found.level_names))


def chain(name: str, *switches: str, **extra: str) -> Node:
    """A node labelled as Topograph labels it: `switches` closest first."""
    labels = {f"{TIER}{i}": s for i, s in enumerate(switches)}
    labels.update({{"domain": DOMAIN, "sub": SUB}.get(k, k): v for k, v in extra.items()})
    return Node(name=name, labels=labels)


def groups(snap, level: str) -> set[frozenset[str]]:
    out: dict[str, set[str]] = {}
    for node, values in snap.nodes.items():
        out.setdefault(values[level], set()).add(node)
    return {frozenset(g) for g in out.values()}


def test_mixed_depth_chains_meet_at_their_shared_root() -> None:
    # node-1 hangs off leaf-1 under the root; node-2 off leaf-2 under spine-2 under the same root: the root is
    # tier-1 for node-1 and tier-2 for node-2, and must still be one domain
    nodes = [chain("node-1", "leaf-1", "shared-root"), chain("node-1b", "leaf-1", "shared-root"),
             chain("node-2", "leaf-2", "spine-2", "shared-root"), chain("node-3", "leaf-3", "spine-2", "shared-root")]
    found, snap = run(nodes)
    assert found.level_names == ("tier-2", "tier-1", "tier-0")
    assert {v["tier-2"] for v in snap.nodes.values()} == {"shared-root"}
    assert snap.nodes["node-1"] == {"tier-2": "shared-root", "tier-1": "leaf-1", "tier-0": "leaf-1"}
    assert snap.nodes["node-2"] == {"tier-2": "shared-root", "tier-1": "spine-2", "tier-0": "leaf-2"}
    assert groups(snap, "tier-1") == {frozenset({"node-1", "node-1b"}), frozenset({"node-2", "node-3"})}
    notice = [p.message for p in snap.problems if p.node is None]
    assert any("2 node(s) report fewer than 3 levels" in m for m in notice), notice
    assert not [p for p in snap.problems if p.node]  # nobody dropped


def test_a_switch_is_one_domain_whatever_tier_number_nodes_give_it() -> None:
    # spine-a is tier-1 for gpu-1 and tier-2 for gpu-2 (a node behind an extra switch); aligned by number from
    # the top, spine-a would land on two levels and core on two
    nodes = [chain("gpu-1", "leaf-a", "spine-a", "core"), chain("gpu-2", "edge-b", "leaf-b", "spine-a", "core")]
    found, snap = run(nodes)
    assert found.level_names == ("tier-3", "tier-2", "tier-1", "tier-0")
    assert snap.nodes["gpu-1"]["tier-2"] == snap.nodes["gpu-2"]["tier-2"] == "spine-a"
    assert snap.nodes["gpu-1"]["tier-3"] == snap.nodes["gpu-2"]["tier-3"] == "core"


def test_a_switch_under_two_different_chains_is_an_error() -> None:
    nodes = [chain("a", "leaf-1", "spine-1", "core"), chain("b", "leaf-1", "spine-2", "core")]
    with pytest.raises(TopologyError, match="switch 'leaf-1' sits under spine-1 < core for node a but under "
                                            "spine-2 < core for node b"):
        run(nodes)


def test_accelerator_domain_is_the_finest_level_when_it_sits_inside_a_leaf() -> None:
    # Topograph's block test set: NVLink domains B1..B4 under leaves S2, S3, S5, S6, three nodes each
    layout = {"B1": ("S2", "S1", "IB2"), "B2": ("S3", "S1", "IB2"),
              "B3": ("S5", "S4", "IB1"), "B4": ("S6", "S4", "IB1")}
    nodes = [chain(f"node{b[1]}0{i}", *tiers, domain=b) for b, tiers in layout.items() for i in range(1, 4)]
    nodes.append(chain("cpu-1", "S2", "S1", "IB2"))  # no NVLink domain: its own
    found, snap = run(nodes)
    assert found.level_names == ("tier-2", "tier-1", "tier-0", "accelerator")
    assert snap.nodes["node101"]["accelerator"] == "B1"
    assert snap.nodes["cpu-1"]["accelerator"] == "cpu-1"
    assert groups(snap, "accelerator") >= {frozenset({"node101", "node102", "node103"})}
    assert "accelerator" in ACCELERATOR_LEVELS  # Slurm's block export takes it as the block


def test_accelerator_domains_wider_than_a_leaf_sit_above_it_with_their_sub_domains_below() -> None:
    # Topograph's dual-xclr models: a domain spans the racks (tier-0 switches) of one tier-1 switch, and each
    # rack is a sub-domain of it
    nodes = []
    for d, sw in ((1, "sw-01"), (2, "sw-02")):
        for r in (1, 2, 4):
            for i in range(2):
                rack = f"rack-{d}-{r:02d}"
                nodes.append(chain(f"n{d}{r}{i}", rack, sw, "core", domain=f"domain-0{d}", sub=rack))
    found, snap = run(nodes)
    assert found.level_names == ("tier-2", "tier-1", "accelerator", "tier-0", "accelerator-sub")
    assert groups(snap, "accelerator") == groups(snap, "tier-1")
    assert groups(snap, "accelerator-sub") == groups(snap, "tier-0")
    assert any("accelerator domains span several tier-0 domains" in p.message for p in snap.problems)


def test_domains_that_fit_nowhere_are_an_error_naming_them() -> None:
    nodes = [chain("a", "leaf-1", "spine", domain="nvl-x"), chain("b", "leaf-2", "spine", domain="nvl-y"),
             chain("c", "leaf-2", "spine", domain="nvl-x")]
    with pytest.raises(TopologyError, match="the accelerator domains do not nest in the fabric tiers"):
        run(nodes)


def test_sub_domains_that_do_not_nest_are_left_out_with_a_notice() -> None:
    nodes = [chain("a", "leaf-1", "spine", domain="nvl-1", sub="half-1"),
             chain("b", "leaf-1", "spine", domain="nvl-1", sub="half-2"),
             chain("c", "leaf-2", "spine", domain="nvl-2", sub="half-1")]  # half-1 in two domains
    found, snap = run(nodes)
    assert found.level_names == ("tier-1", "tier-0", "accelerator")
    assert any("the accelerator-sub level is left out" in p.message for p in snap.problems)


def test_accelerator_domain_alone_when_no_fabric_tiers() -> None:
    found, snap = run([chain("a", domain="nvl-1"), chain("b", domain="nvl-1"), chain("c", domain="nvl-2")])
    assert found.level_names == ("accelerator",)
    assert groups(snap, "accelerator") == {frozenset({"a", "b"}), frozenset({"c"})}


def test_no_topology_placeholder_and_unlabelled_nodes_are_problems_not_a_domain() -> None:
    nodes = [chain("gpu-1", "leaf-1", "spine"), chain("cpu-1", "no-topology"), Node("login")]
    found, snap = run(nodes)
    assert set(snap.nodes) == {"gpu-1"}
    why = {p.node: p.message for p in snap.problems if p.node}
    assert "found no topology for it" in why["cpu-1"]
    assert "has none of Topograph's labels" in why["login"]


def test_gaps_in_a_chain_are_reported() -> None:
    node = Node("gap", labels={f"{TIER}0": "leaf", f"{TIER}2": "core"})
    _, snap = run([node, chain("ok", "leaf", "spine", "core")])
    assert [p.message for p in snap.problems if p.node == "gap"] == [
        f"is missing {TIER}1 between switches it has; left as it is"]


@pytest.mark.parametrize("labels, expected", [
    ({"network.topology.nvidia.com/tier-0": "l1", "network.topology.nvidia.com/tier-1": "s1",
      "xclr.topology.nvidia.com/domain": "nvl1"}, {"tier-1": "s1", "tier-0": "l1", "accelerator": "nvl1"}),
    ({"network.topology.nvidia.com/leaf": "l1", "network.topology.nvidia.com/spine": "s1",
      "network.topology.nvidia.com/core": "c1", "network.topology.nvidia.com/accelerator": "nvl1"},
     {"core": "c1", "spine": "s1", "leaf": "l1", "accelerator": "nvl1"}),
    ({"network.topology.nvidia.com/block": "l1", "network.topology.nvidia.com/spine": "s1",
      "network.topology.nvidia.com/datacenter": "c1"}, {"datacenter": "c1", "spine": "s1", "block": "l1"}),
    ({f"{TIER}0": "l1", "nvidia.com/gpu.clique": "uuid.3"}, {"tier-0": "l1", "accelerator": "uuid.3"}),
])
def test_older_releases_keys_and_the_clique_label_topograph_defers_to(labels: dict, expected: dict) -> None:
    _, snap = run([Node("n", labels=labels)])
    assert snap.nodes["n"] == expected


def test_nodes_left_on_an_older_release_are_read_and_named() -> None:
    old = Node("old", labels={"network.topology.nvidia.com/leaf": "l1", "network.topology.nvidia.com/spine": "s1"})
    _, snap = run([chain("new", "l1", "s1"), old])
    assert snap.nodes["old"] == snap.nodes["new"]
    assert any("1 node(s) carry only an older Topograph release's keys" in p.message and "old" in p.message
               for p in snap.problems)


def test_nothing_to_read_is_an_error() -> None:
    with pytest.raises(SourceError, match="no node can be placed from Topograph's labels"):
        run([Node("n", labels={"kubernetes.io/hostname": "n"})])
