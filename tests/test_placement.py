"""Discoveries become snapshots only when they form a tree; values are unique per level."""

from __future__ import annotations

import pytest

from labeler.errors import TopologyError
from labeler.model import Discovery, Level, Snapshot
from labeler.placement import level_keys, pad_depths, to_snapshot

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
    again = Snapshot.from_dict(snap.to_dict())
    assert again.to_dict() == snap.to_dict()
    assert again.labels_for("n1") == {"topolabel.dev/block": "b1", "topolabel.dev/rack": "r1"}
    with pytest.raises(TopologyError, match="snap.json: nodes.n1 has no value for level"):
        Snapshot.from_dict({"levels": [{"name": "a", "label": "x/a"}, {"name": "b", "label": "x/b"}],
                            "nodes": {"n1": {"a": "1"}}}, "snap.json")
