"""Label values stay readable, valid and unique; keys are checked for TAS use."""

from __future__ import annotations

import re

import pytest

from labeler.labelvalues import MAX_VALUE, is_valid_value, key_problems, readable, short_hash, to_value, unique_values


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


@pytest.mark.parametrize("key", ["topolabel.dev/block", "cloud.google.com/gce-topology-block", "rack"])
def test_good_keys(key: str) -> None:
    assert key_problems(key) == []


@pytest.mark.parametrize("key, fragment", [
    ("Topolabel.dev/block", "DNS subdomain"),
    ("example.com/-block", "alphanumeric at both ends"),
    ("a/b/c", "more than one '/'"),
    ("example.com/" + "b" * 60, "TAS annotations accept at most 63"),
])
def test_bad_keys_say_why(key: str, fragment: str) -> None:
    assert any(fragment in p for p in key_problems(key))
