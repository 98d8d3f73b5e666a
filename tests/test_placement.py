"""Discoveries become snapshots only when they form a tree; values are unique per level and stable as nodes
join; a snapshot read from a file is untrusted and checked the same way."""

from __future__ import annotations

import re

import pytest

from labeler.errors import TopologyError
from labeler.io.nodes import MANAGED_ANNOTATION, Node
from labeler.topology.model import Discovery, Level, Ownership, ownership
from labeler.topology.placement import (check_levels, level_keys, pad_depths, snapshot_from_dict, to_snapshot,
                                        written_values)

LEVELS = (Level("block", "topolabel.dev/block"), Level("rack", "topolabel.dev/rack"))


def test_two_parents_is_an_error_naming_both() -> None:
    found = Discovery("test", ("block", "rack"), {"n1": ("b1", "r1"), "n2": ("b2", "r1"), "n3": ("b2", "r2")})
    with pytest.raises(TopologyError) as err:
        to_snapshot(found, LEVELS)
    message = str(err.value)
    assert "rack 'r1'" in message and "'b1' (node n1)" in message and "'b2' (node n2)" in message


def test_local_names_make_repeated_rack_names_distinct() -> None:
    found = Discovery("test", ("block", "rack"), {"n1": ("b1", "r1"), "n2": ("b2", "r1")}, local_names=True)
    snap = to_snapshot(found, LEVELS)
    assert snap.nodes["n1"]["block"] == "b1" and snap.nodes["n2"]["block"] == "b2"
    assert snap.nodes["n1"]["rack"] != snap.nodes["n2"]["rack"]
    assert all(v.startswith("r1-") for v in (snap.nodes["n1"]["rack"], snap.nodes["n2"]["rack"]))


def test_incomplete_paths_are_problems_not_placements() -> None:
    found = Discovery("test", ("block", "rack"), {"n1": ("b1", "r1"), "n2": ("b1",), "n3": ("b1", " ")})
    snap = to_snapshot(found, LEVELS)
    assert set(snap.nodes) == {"n1"}
    assert {p.node for p in snap.problems} == {"n2", "n3"}


def test_padding_repeats_the_finest_known_domain() -> None:
    found = Discovery("aws", ("l1", "l2", "l3"), {"a": ("x", "y", "z"), "b": ("x", "y"), "c": ("x", "y")})
    pad_depths(found, 3)
    assert found.paths["b"] == ("x", "y", "y") == found.paths["c"]
    assert len(found.problems) == 1 and "2 node(s)" in found.problems[0].message
    snap = to_snapshot(found, level_keys(found.level_names))
    assert snap.nodes["b"]["l3"] == snap.nodes["c"]["l3"] != snap.nodes["a"]["l3"]


def test_level_keys_validate_and_override() -> None:
    levels = level_keys(["block", "rack"], "example.com/", {"rack": "other.io/rack"})
    assert [lv.label for lv in levels] == ["example.com/block", "other.io/rack"]
    with pytest.raises(TopologyError, match="label key 'Bad Key/rack'"):
        level_keys(["rack"], "Bad Key/")
    with pytest.raises(TopologyError, match="share one label key"):
        level_keys(["a", "b"], overrides={"a": "x.io/k", "b": "x.io/k"})


def test_snapshot_round_trip_and_errors() -> None:
    found = Discovery("test", ("block", "rack"), {"n1": ("b1", "r1")})
    snap = to_snapshot(found, LEVELS)
    again = snapshot_from_dict(snap.to_dict())
    assert again.to_dict() == snap.to_dict()
    assert again.labels_for("n1") == {"topolabel.dev/block": "b1", "topolabel.dev/rack": "r1"}
    with pytest.raises(TopologyError, match="snap.json: nodes.n1 has no value for level"):
        snapshot_from_dict({"levels": [{"name": "a", "label": "topolabel.dev/a"}, {"name": "b", "label": "topolabel.dev/b"}],
                            "nodes": {"n1": {"a": "1"}}}, "snap.json")


def _one_level(label: str, values: dict, name: str = "block") -> dict:
    return {"levels": [{"name": name, "label": label}], "nodes": {n: {name: v} for n, v in values.items()}}


@pytest.mark.parametrize("data, fragment", [
    (_one_level("kubernetes.io/hostname", {"n1": "evil"}, "host"), "belongs to Kubernetes"),
    (_one_level("node.kubernetes.io/instance-type", {"n1": "a"}), "belongs to Kubernetes"),
    (_one_level("topology.kubernetes.io/zone", {"n1": "a"}), "belongs to Kubernetes"),
    (_one_level("kueue.x-k8s.io/queue-name", {"n1": "a"}), "belongs to Kubernetes"),
    (_one_level("cloud.google.com/gce-topology-block", {"n1": "a"}), "belongs to GKE"),
    (_one_level("topology.k8s.aws/network-node-layer-1", {"n1": "a"}), "belongs to AWS"),
    (_one_level("nvidia.com/gpu.clique", {"n1": "a"}), "belongs to NVIDIA"),
    (_one_level("Bad Key/x", {"n1": "a"}), "not a lower-case DNS subdomain"),
    (_one_level("topolabel.dev/block", {"n1": 1}), "nodes.n1.block: '1' is not a label value"),
    (_one_level("topolabel.dev/block", {"n1": "a b"}), "nodes.n1.block: 'a b' is not a label value"),
    (_one_level("topolabel.dev/block", {"n1": "x" * 64}), "is not a label value"),
    (_one_level("topolabel.dev/block", {"n1": ""}), "is not a label value"),
    (_one_level("topolabel.dev/block", {"n 1": "a"}), "not a Kubernetes node name"),
    ({"levels": [{"name": "a", "label": "topolabel.dev/a"}, {"name": "b", "label": "topolabel.dev/b"}],
      "nodes": {"n1": {"a": "p", "b": "q"}, "n2": {"a": "r", "b": "q"}}}, "not a tree"),
    ({"levels": [{"name": "a", "label": "topolabel.dev/a"}, {"name": "a", "label": "topolabel.dev/b"}], "nodes": {}}, "share one name"),
    ({"levels": [{"name": f"l{i}", "label": f"topolabel.dev/l{i}"} for i in range(16)], "nodes": {}}, "16 levels"),
    ({"levels": [{"name": 1, "label": "topolabel.dev/a"}], "nodes": {}}, "levels[0] needs 'name' and 'label' strings"),
    ({"levels": [{"name": "a", "label": "topolabel.dev/a"}], "nodes": {}, "problems": "oops"}, "'problems' must be a list"),
])
def test_an_untrusted_snapshot_gets_the_checks_discovery_output_gets(data: dict, fragment: str) -> None:
    with pytest.raises(TopologyError, match="snap.json: .*" + re.escape(fragment)):
        snapshot_from_dict(data, "snap.json")


def test_keys_a_config_owns_are_written_and_no_others() -> None:
    """A config owns its keyPrefix and the keys it names; never Kubernetes' or a cloud's, whatever it says."""
    owned = ownership("topo.example.com/", ["example.com/rack"])
    for key in ("topolabel.dev/block", "topo.example.com/block", "example.com/rack"):
        check_levels([Level("x", key)], "cfg", owned)
    for key, why in [("example.com/row", "is not topolabel's to write: it writes only keys under or named "
                                         "topolabel.dev/, topo.example.com/, example.com/rack"),
                     ("x.topo.example.com/block", "is not topolabel's to write")]:
        with pytest.raises(TopologyError, match=re.escape(why)):
            check_levels([Level("x", key)], "cfg", owned)
    assert level_keys(["rack"], "topo.example.com/", {"rack": "example.com/rack"})[0].label == "example.com/rack"
    with pytest.raises(TopologyError, match="belongs to Kubernetes"):
        level_keys(["host"], overrides={"host": "kubernetes.io/hostname"})
    assert Ownership(("",)).owns("rack") and not Ownership(("",)).owns("example.com/rack")


@pytest.mark.parametrize("overrides, prefix", [
    ({"block": "kubernetes.io/hostname"}, "topolabel.dev/"),
    ({}, "node.kubernetes.io/"),
    ({"block": "cloud.google.com/gce-topology-block"}, "topolabel.dev/"),
])
def test_a_config_cannot_make_topolabel_write_a_label_it_does_not_own(overrides: dict, prefix: str) -> None:
    with pytest.raises(TopologyError, match="belongs to"):
        level_keys(["block"], prefix, overrides)


def _labelled(name: str, labels: dict[str, str]) -> Node:
    return Node(name, labels, {MANAGED_ANNOTATION: ",".join(sorted(labels))})


def test_a_joining_domain_never_renames_an_existing_one() -> None:
    first = to_snapshot(Discovery("test", ("block", "rack"), {f"a{i}": ("b1", "rack-1") for i in range(3)}), LEVELS)
    nodes = [_labelled(n, first.labels_for(n)) for n in first.nodes] + [Node("new")]
    joined = Discovery("test", ("block", "rack"), {**{f"a{i}": ("b1", "rack-1") for i in range(3)}, "new": ("b1", "rack 1")})
    snap = to_snapshot(joined, LEVELS, written_values(LEVELS, nodes))
    assert {snap.nodes[f"a{i}"]["rack"] for i in range(3)} == {"rack-1"}
    assert re.fullmatch(r"rack-1-[0-9a-f]{8}", snap.nodes["new"]["rack"])
    # without the labels (a first run) both collide and both are hashed, whatever the order
    fresh = to_snapshot(joined, LEVELS)
    assert fresh.nodes["a0"]["rack"] != "rack-1" and fresh.nodes["new"]["rack"] != fresh.nodes["a0"]["rack"]


def test_only_labels_topolabel_wrote_and_could_give_are_kept() -> None:
    found = Discovery("test", ("block", "rack"), {"a": ("b1", "r1"), "b": ("b1", "r2")})
    foreign = Node("a", {"topolabel.dev/rack": "r2"})  # not in the managed annotation: ignored
    steered = _labelled("b", {"topolabel.dev/block": "b1", "topolabel.dev/rack": "r1"})  # not a value r2 could get
    snap = to_snapshot(found, LEVELS, written_values(LEVELS, [foreign, steered]))
    assert snap.nodes["a"]["rack"] == "r1" and snap.nodes["b"]["rack"] == "r2"


@pytest.mark.parametrize("odd, expected", [
    (("b1 ", " r99"), {"block": "b1", "rack": "r99"}),  # blanks around a value are dropped, as one by one
    ((7, "r99"), {"block": "7", "rack": "r99"}),  # a value that is not a string is its text
    (["b1", "r99"], {"block": "b1", "rack": "r99"}),  # a list for a tuple
    (("b1", ""), None),  # incomplete: a problem, the node left as it is
    (("b1",), None),
])
def test_one_unusual_path_among_many_clean_ones_is_read_as_alone(odd: tuple, expected: dict | None) -> None:
    """Clean paths (tuples of stripped strings, full depth) are checked per level over their distinct values;
    one that is not sends them all the one-by-one way, with the same values for the clean ones."""
    clean = {f"n{i:03d}": (f"b{i // 50}", f"r{i // 10}") for i in range(200)}
    snap = to_snapshot(Discovery("test", ("block", "rack"), {**clean, "odd": odd}), LEVELS)
    assert {n: v for n, v in snap.nodes.items() if n != "odd"} == {n: {"block": b, "rack": r} for n, (b, r) in clean.items()}
    assert snap.nodes.get("odd") == expected
    assert [p.node for p in snap.problems] == ([] if expected else ["odd"])
