"""No node moves another (issue 32, S1): what a node publishes about itself is a claim, and a claim two sources
contradict counts for nobody.

One node's `topolabel.dev/ib-node-guids` annotation could claim other nodes' HCAs: the last entry won and the
annotation beat the HCA's description, so claims unplaced their victims and merged leaf groups, moving innocent
nodes, at a share the 25 % guard let through. Fabrics here are hack.ibfabric's (`ibnetdiscover` text written
without ibsim), every HCA with its default description, nodes mapped by their agents' annotations.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hack.ibfabric import Spec, build
from labeler.errors import PlanRefused
from labeler.io.nodes import MANAGED_ANNOTATION, Node
from labeler.settings.config import Config
from labeler.topology.model import Snapshot
from labeler.topology.plan import check_share, make_plan
from providers.infiniband import ANNOTATION
from providers.registry import get_source
from topolabel.pipeline import discover

KEY = "topolabel.dev/leafgroup"


@pytest.fixture(scope="module")
def fabric(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """16 hosts in 4 rail-optimised units of 4 (two rails: two HCAs per host), default descriptions."""
    fab = build(Spec(sus=4, hosts=4, rails=2, default_hosts=16, naming="plain"))
    path = tmp_path_factory.mktemp("fabric") / "fabric.ibnet"
    path.write_text(fab.capture_text())
    return fab, path


def annotation(fab, host: str, extra: list[int] = ()) -> str:  # noqa: ANN001
    return ",".join([f"{dev}={guid:#018x}" for dev, guid in fab.truth.guids[host]]
                    + [f"mlx5_9={guid:#018x}" for guid in extra])


def snapshot(path: Path, nodes: list[Node]) -> Snapshot:
    return discover(Config(), get_source("infiniband"), {"ibnetdiscover": str(path)}, nodes)


def labelled(fab, path: Path) -> tuple[list[Node], Snapshot]:  # noqa: ANN001
    """Every node labelled from an honest discovery, as the operator leaves them."""
    honest = [Node(h, annotations={ANNOTATION: annotation(fab, h)}) for h in sorted(fab.truth.guids)]
    snap = snapshot(path, honest)
    return [Node(n.name, {KEY: snap.nodes[n.name]["leafgroup"]}, {**n.annotations, MANAGED_ANNOTATION: KEY})
            for n in honest], snap


@pytest.mark.parametrize("attackers", [2, 4])
def test_nodes_claiming_others_hcas_move_nobody(fabric, attackers: int) -> None:  # noqa: ANN001
    """Attackers in unit 2 claim the rail-1 HCA of hosts in unit 1: before, their leaf sets won the majority
    vote of unit 1's leaf, merging both units and moving the innocent hosts of both."""
    fab, path = fabric
    nodes, before = labelled(fab, path)
    hosts = sorted(fab.truth.guids)
    bad = [h for h in hosts if h.startswith("p1-gpu-02-")][:attackers]
    victims = [h for h in hosts if h.startswith("p1-gpu-01-")][:attackers]
    claims = {a: [fab.truth.guids[v][0][1]] for a, v in zip(bad, victims)}
    hostile = [Node(n.name, n.labels, {**n.annotations, ANNOTATION: annotation(fab, n.name, claims.get(n.name, []))})
               for n in nodes]
    after = snapshot(path, hostile)
    assert {h: after.nodes.get(h, before.nodes[h]) for h in hosts} == before.nodes  # nobody moved
    assert {p.node for p in after.problems if p.claim} == set(bad) | set(victims) == set(hosts) - set(after.nodes)
    plan = make_plan(after, hostile)
    assert plan.disruptive == 0 and plan.claimed == set(bad) | set(victims)
    if attackers * 2 > 0.25 * len(hosts):  # more claims than the guard's share: refused, naming them
        with pytest.raises(PlanRefused, match=r"on 0 of 16 nodes and 8 more are in contested claims"):
            check_share(plan, 0.25)
    else:
        check_share(plan, 0.25)


def test_a_description_naming_another_node_is_a_contested_claim(fabric, tmp_path: Path) -> None:  # noqa: ANN001
    """The host of an HCA sets its description: an HCA on p1-gpu-02-c01's cable describing itself as
    p1-gpu-01-c01's, which publishes its own GUIDs without it, belongs to nobody."""
    fab, path = fabric
    nodes, before = labelled(fab, path)
    guid = fab.truth.guids["p1-gpu-02-c01"][0][1]
    lines = path.read_text().splitlines(keepends=True)
    forged = tmp_path / "forged.ibnet"  # its header and its peer's port line describe it
    forged.write_text("".join(line.replace("MT4129 ConnectX7   Mellanox Technologies", "p1-gpu-01-c01 mlx5_0")
                              if f"H-{guid:016x}" in line else line for line in lines))
    mine = [Node(n.name, n.labels, n.annotations if n.name != "p1-gpu-02-c01" else
                 {**n.annotations, ANNOTATION: annotation(fab, n.name)[len("mlx5_0=0x0000000000000000,"):]})
            for n in nodes]  # the forger stops publishing that HCA
    after = snapshot(forged, mine)
    claims = [p for p in after.problems if p.claim]
    assert [p.node for p in claims] == ["p1-gpu-01-c01"]
    assert ("is given to this node by the HCA's description, but its own topolabel.dev/ib-node-guids annotation "
            "does not list it") in claims[0].message
    assert "p1-gpu-01-c01" not in after.nodes  # left as it is: its labels stay
    assert {h: after.nodes.get(h, v) for h, v in before.nodes.items()} == before.nodes


def test_the_map_file_and_an_annotation_disagreeing_is_a_claim_for_both(fabric, tmp_path: Path) -> None:  # noqa: ANN001
    fab, path = fabric
    nodes, _ = labelled(fab, path)
    guid = fab.truth.guids["p1-gpu-03-c02"][0][1]
    guids = tmp_path / "guids.yaml"
    guids.write_text(f"p1-gpu-04-c04: ['{guid:#018x}']\n")
    after = discover(Config(), get_source("infiniband"), {"ibnetdiscover": str(path), "guid_map": str(guids)}, nodes)
    assert {p.node for p in after.problems if p.claim} == {"p1-gpu-03-c02", "p1-gpu-04-c04"}
