"""Label values stay readable, valid and unique; keys are checked for TAS use."""

from __future__ import annotations

import re

import pytest

from labeler.topology.labelvalues import (MAX_VALUE, foreign_owner, is_valid_value, key_problems, level_key_problems, readable,
                                 short_hash, to_value, unique_values)


@pytest.mark.parametrize("raw, expected", [
    ("a09-p1-ibleaf-04-04", "a09-p1-ibleaf-04-04"),
    ("MF0;A09-P1-IBLEAF-04-04:MQM9701/U1", "MF0-A09-P1-IBLEAF-04-04-MQM9701-U1"),
    ("  rack 12 / row 3  ", "rack-12-row-3"),
    ("-_.leaf.01._-", "leaf.01"),
    ("nn-1a2b3c", "nn-1a2b3c"),
])
def test_readable_keeps_names_people_know(raw: str, expected: str) -> None:
    assert readable(raw) == expected
    assert to_value(raw) == expected  # short enough: no hash


def test_long_value_is_shortened_with_stable_hash() -> None:
    raw = "spine-group-" + "x" * 100
    value = to_value(raw)
    assert len(value) <= MAX_VALUE and is_valid_value(value)
    assert value.startswith("spine-group-x")
    assert value.endswith(short_hash(raw))
    assert to_value(raw) == value  # stable


def test_value_with_nothing_readable_gets_a_hash() -> None:
    value = to_value("///")
    assert is_valid_value(value) and value == f"x-{short_hash('///')}"


def test_collisions_are_disambiguated_whatever_the_order() -> None:
    names = {"Rack A": "Rack A", "Rack/A": "Rack/A", "rack-b": "rack-b"}
    first = unique_values(names)
    second = unique_values(dict(reversed(list(names.items()))))
    assert first == second
    assert first["rack-b"] == "rack-b"
    assert first["Rack A"] != first["Rack/A"]
    assert all(re.fullmatch(r"Rack-A-[0-9a-f]{8}", first[k]) for k in ("Rack A", "Rack/A"))


def test_local_display_names_keep_identity_apart() -> None:
    values = unique_values({"row1/r1": "r1", "row2/r1": "r1", "row2/r2": "r2"})
    assert values["row2/r2"] == "r2"
    assert values["row1/r1"] != values["row2/r1"]
    assert all(is_valid_value(v) for v in values.values())


def test_existing_values_stay_and_only_the_newcomer_gets_a_hash() -> None:
    names = {"rack-1": "rack-1", "rack 1": "rack 1", "rack-2": "rack-2"}
    current = {"rack-1": {"rack-1": 4}, "rack-2": {"rack-2": 1}}
    values = unique_values(names, current)
    assert values["rack-1"] == "rack-1" and values["rack-2"] == "rack-2"
    assert values["rack 1"] == f"rack-1-{short_hash('rack 1')}"
    assert unique_values(dict(reversed(list(names.items()))), current) == values


def test_a_hashed_value_is_kept_after_its_partner_left_and_a_stolen_one_is_not() -> None:
    hashed = f"rack-1-{short_hash('rack/1')}"
    assert unique_values({"rack/1": "rack/1"}, {"rack/1": {hashed: 2}}) == {"rack/1": hashed}
    # two identities claiming one value: the one more nodes carry keeps it
    claimed = unique_values({"rack-1": "rack-1", "rack 1": "rack 1"}, {"rack-1": {"rack-1": 1}, "rack 1": {"rack-1": 3}})
    assert claimed["rack 1"] == "rack-1" and claimed["rack-1"] != "rack-1"


@pytest.mark.parametrize("key, owner", [("kubernetes.io/hostname", "Kubernetes"), ("node.kubernetes.io/x", "Kubernetes"),
                                        ("cloud.google.com/gke-nodepool", "GKE"), ("topology.k8s.aws/x", "AWS"),
                                        ("crusoe.ai/pod.id", "Crusoe"), ("topology.nebius.com/tier-1", "Nebius"),
                                        ("ds.coreweave.com/nvlink.domain", "CoreWeave"),
                                        ("topolabel.dev/block", None), ("rack", None), ("example.com/rack", None)])
def test_keys_of_kubernetes_clouds_and_tools_are_not_topolabels(key: str, owner: str | None) -> None:
    assert foreign_owner(key) == owner
    assert bool(level_key_problems(key)) == (owner is not None)


@pytest.mark.parametrize("key", ["topolabel.dev/block", "cloud.google.com/gce-topology-block", "rack"])
def test_good_keys(key: str) -> None:
    assert key_problems(key) == []


@pytest.mark.parametrize("key, fragment", [
    ("Topolabel.dev/block", "DNS subdomain"),
    ("example.com/-block", "alphanumeric at both ends"),
    ("a/b/c", "more than one '/'"),
    ("example.com/" + "b" * 60, "TAS annotations accept at most 63"),
    ("example.com/block\n", "alphanumeric at both ends"),  # a `$` anchor alone lets a final newline pass
    ("example.com\n/block", "DNS subdomain"),
])
def test_bad_keys_say_why(key: str, fragment: str) -> None:
    assert any(fragment in p for p in key_problems(key))


@pytest.mark.parametrize("value", ["rack-1\n", "\n", "rack\n1"])
def test_a_value_ending_in_a_newline_is_no_label_value(value: str) -> None:
    assert not is_valid_value(value)


def test_many_domains_that_are_their_own_values_keep_them_and_others_are_rewritten_as_one_by_one() -> None:
    """`unique_values` takes a whole level at once when every name is already a value; a single name that is
    not (too long, `--`, a space) sends the level the per-name way, with the same result for the others."""
    plain = {f"id{i}": f"host{i:05d}" for i in range(2000)}
    assert unique_values(plain) == plain
    for odd in ("a--b", "rack 7", "x" * 70, "-edge"):
        names = {**plain, "odd": odd}
        values = unique_values(names)
        assert {k: v for k, v in values.items() if k != "odd"} == plain
        assert values["odd"] == to_value(odd) and is_valid_value(values["odd"])
    clash = unique_values({"a": "h1", "b": "h1", "c": "h2"})
    assert clash["c"] == "h2" and clash["a"] != clash["b"] and {clash["a"], clash["b"]} <= {
        f"h1-{short_hash('a')}", f"h1-{short_hash('b')}"}
