"""Label plans touch only what topolabel manages, keep unplaced nodes, refuse large disturbances."""

from __future__ import annotations

import copy
import threading

import pytest

from hack.synth import gke_cluster
from labeler.cluster.apply import apply_plan
from labeler.errors import PlanRefused, TopologyError
from labeler.io.nodes import MANAGED_ANNOTATION, Node, parse_nodes
from labeler.topology.model import Level, Problem, Snapshot, ownership
from labeler.topology.placement import level_keys, to_snapshot
from labeler.topology.plan import check_share, make_plan
from providers.base import SourceContext
from providers.labels import discover


class Store:
    """Node objects held in memory, patched with JSON merge-patch semantics (RFC 7386)."""

    def __init__(self, items: list[dict]) -> None:
        self.items = {i["metadata"]["name"]: copy.deepcopy(i) for i in items}
        self.patches: list[str] = []
        self.lock = threading.Lock()

    def patch(self, name: str, body: dict) -> None:
        with self.lock:
            self.patches.append(name)
            _merge(self.items[name], body)

    def nodes(self) -> list[Node]:
        return parse_nodes(list(self.items.values()), "store")


def _merge(target: dict, patch: dict) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            _merge(target.setdefault(key, {}), value)
        else:
            target[key] = value


def gke_snapshot(nodes: list[Node]) -> Snapshot:
    found = discover(SourceContext(nodes=nodes, options={"preset": "gke"}))
    return to_snapshot(found, level_keys(found.level_names))


@pytest.fixture
def store() -> Store:
    items, _ = gke_cluster(blocks=2, subblocks=2, hosts=5)
    return Store(items)


def test_first_apply_labels_everything_second_writes_nothing(store: Store) -> None:
    plan = make_plan(gke_snapshot(store.nodes()), store.nodes())
    assert len(plan.changes) == 20 and plan.disruptive == 0
    result = apply_plan(plan, store.patch, concurrency=4)
    assert sorted(result.written) == sorted(store.items) and not result.failed
    node = store.nodes()[0]
    assert node.labels["topolabel.dev/block"] == node.labels["cloud.google.com/gce-topology-block"]
    assert node.annotations[MANAGED_ANNOTATION] == "topolabel.dev/block,topolabel.dev/host,topolabel.dev/subblock"
    store.patches.clear()
    again = make_plan(gke_snapshot(store.nodes()), store.nodes())
    assert again.changes == [] and again.unchanged == 20
    assert apply_plan(again, store.patch).written == [] and store.patches == []


def test_source_that_lost_half_the_nodes_removes_nothing(store: Store) -> None:
    apply_plan(make_plan(gke_snapshot(store.nodes()), store.nodes()), store.patch)
    before = {n.name: dict(n.labels) for n in store.nodes()}
    snap = gke_snapshot(store.nodes())
    lost = sorted(snap.nodes)[::2]
    for name in lost:
        del snap.nodes[name]
    plan = make_plan(snap, store.nodes())
    assert plan.changes == []
    assert sorted(p.node for p in plan.problems) == lost
    apply_plan(plan, store.patch)
    assert {n.name: dict(n.labels) for n in store.nodes()} == before


def test_renamed_key_is_removed_and_foreign_keys_untouched(store: Store) -> None:
    apply_plan(make_plan(gke_snapshot(store.nodes()), store.nodes()), store.patch)
    name = sorted(store.items)[0]
    store.items[name]["metadata"]["labels"]["team.example/owner"] = "ml"
    snap = gke_snapshot(store.nodes())
    renamed = Snapshot((snap.levels[0], snap.levels[1]), {n: {k: v[k] for k in ("block", "subblock")}
                                                          for n, v in snap.nodes.items()})
    plan = make_plan(renamed, store.nodes())
    assert all(c.remove == ["topolabel.dev/host"] and c.set == {} for c in plan.changes)
    assert plan.disruptive == 20
    apply_plan(plan, store.patch)
    labels = store.items[name]["metadata"]["labels"]
    assert "topolabel.dev/host" not in labels and labels["team.example/owner"] == "ml"
    assert "cloud.google.com/gce-topology-host" in labels


def test_a_key_the_node_already_carried_never_becomes_managed() -> None:
    snap = Snapshot((Level("rack", "example.com/rack"),), {"same": {"rack": "r1"}, "other": {"rack": "r1"}})
    nodes = [Node("same", {"example.com/rack": "r1"}), Node("other", {"example.com/rack": "hand-set"})]
    owned = ownership(keys=["example.com/rack", "example.com/rack-v2"])  # a config naming them
    plan = make_plan(snap, nodes, owned)
    assert [(c.node, c.set, c.managed) for c in plan.changes] == []  # nothing claimed, nothing rewritten
    assert [(p.node, p.source) for p in plan.conflicts] == [("other", "plan")]
    assert "example.com/rack='hand-set', which topolabel did not write" in plan.conflicts[0].message
    # a later level rename removes only what topolabel wrote: neither node loses example.com/rack
    renamed = Snapshot((Level("rack", "example.com/rack-v2"),), {"same": {"rack": "r1"}, "other": {"rack": "r1"}})
    assert all(c.remove == [] for c in make_plan(renamed, nodes, owned).changes)


def test_a_crafted_annotation_never_removes_a_label_topolabel_cannot_own() -> None:
    crafted = Node("n1", {"kubernetes.io/hostname": "n1", "cloud.google.com/gke-nodepool": "a", "topolabel.dev/rack": "r0"},
                   {MANAGED_ANNOTATION: "kubernetes.io/hostname,cloud.google.com/gke-nodepool,topolabel.dev/rack"})
    plan = make_plan(Snapshot((Level("block", "topolabel.dev/block"),), {"n1": {"block": "b1"}}), [crafted])
    (change,) = plan.changes
    assert change.remove == ["topolabel.dev/rack"] and change.managed == ["topolabel.dev/block"]


def test_large_disturbance_is_refused_unless_forced(store: Store) -> None:
    apply_plan(make_plan(gke_snapshot(store.nodes()), store.nodes()), store.patch)
    moved = Snapshot((Level("block", "topolabel.dev/block"),),
                     {n.name: {"block": "elsewhere"} for n in store.nodes()})
    plan = make_plan(moved, store.nodes())
    with pytest.raises(PlanRefused, match="rewrites or removes labels on 20 of 20 nodes"):
        check_share(plan, 0.25)
    check_share(plan, 0.25, force=True)
    small = make_plan(Snapshot(moved.levels, {"gke-a3-b00-s00-n000": {"block": "elsewhere"}}), store.nodes())
    check_share(small, 0.25)  # one node of 20 is within the share


def test_node_not_in_cluster_is_reported(store: Store) -> None:
    snap = gke_snapshot(store.nodes())
    snap.nodes["ghost"] = dict(next(iter(snap.nodes.values())))
    plan = make_plan(snap, store.nodes())
    assert any(p.node == "ghost" and "not in the cluster" in p.message for p in plan.problems)


def test_a_plan_that_consumes_its_snapshot_is_the_same_plan(store: Store) -> None:
    """`consume` releases each node's values as its change is made: the same changes, unchanged count,
    problems (a node missing from either side, a claim) and claimed nodes; the snapshot keeps only the nodes
    not in the cluster."""
    nodes = store.nodes()
    snap = gke_snapshot(nodes)
    snap.nodes["ghost"] = dict(next(iter(snap.nodes.values())))
    gone = sorted(snap.nodes)[3]
    del snap.nodes[gone]
    claimant = nodes[5].name
    snap.problems.append(Problem("infiniband", "HCA 0x1 is claimed by two nodes", claimant, claim=True))
    snap.problems.append(Problem("infiniband", "HCA 0x2 is claimed by a node not here", "elsewhere", claim=True))
    kept = make_plan(snap, nodes)
    consumed = make_plan(snap, nodes, consume=True)
    assert consumed.to_dict() == kept.to_dict() and consumed.claimed == kept.claimed == {claimant}
    assert (consumed.unchanged, consumed.total) == (kept.unchanged, kept.total) == (1, 20)
    assert {p.message for p in kept.problems if p.node in ("ghost", gone)} == {
        "placed by the source but not in the cluster", "not placed by the source; its labels are kept"}
    assert list(snap.nodes) == ["ghost"]


def test_patch_is_a_small_merge_patch(store: Store) -> None:
    change = make_plan(gke_snapshot(store.nodes()), store.nodes()).changes[0]
    body = change.patch()
    assert set(body) == {"metadata"} and set(body["metadata"]) == {"labels", "annotations"}
    assert set(body["metadata"]["labels"]) == {"topolabel.dev/block", "topolabel.dev/subblock", "topolabel.dev/host"}


@pytest.mark.parametrize("key", ["karpenter.sh/nodepool", "node.openshift.io/os_id", "example.com/rack"])
def test_a_plan_writes_only_keys_topolabel_owns(key: str) -> None:
    """Issue 32, example 8: another tool's key as a level key was planned and written (the denylist knew a few
    owners); now only topolabel's prefixes and what the config names are written, and removed."""
    snap = Snapshot((Level("pool", key),), {"n1": {"pool": "a"}})
    with pytest.raises(TopologyError, match=f"label key '{key}' for level 'pool' is not topolabel's to write"):
        make_plan(snap, [Node("n1")])
    assert make_plan(snap, [Node("n1")], ownership(keys=[key]) if key.startswith("example.com") else
                     ownership(key.rpartition("/")[0] + "/")).changes  # a config that names it owns it
    crafted = Node("n1", {key: "theirs", "topolabel.dev/block": "b1"},
                   {MANAGED_ANNOTATION: f"{key},topolabel.dev/block"})
    plan = make_plan(Snapshot((Level("block", "topolabel.dev/block"),), {"n1": {"block": "b1"}}), [crafted])
    assert [c.remove for c in plan.changes] in ([], [[]])  # the listed key is not topolabel's: never removed
