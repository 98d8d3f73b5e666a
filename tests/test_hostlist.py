"""Hostlist compression matches what Slurm prints, and Slurm's parser reads back exactly the names given."""

from __future__ import annotations

import random
from functools import cmp_to_key

import pytest

from exporters.hostlist import compress, natcmp
from testkit.slurm_rules import HostlistError, expand


@pytest.mark.parametrize("names, expected", [
    (["gpu001", "gpu002", "gpu003", "gpu004", "gpu007"], "gpu[001-004,007]"),
    (["gpu007", "gpu003", "gpu001", "gpu002", "gpu004", "gpu002"], "gpu[001-004,007]"),  # any order, duplicates
    (["node5"], "node5"),  # one number needs no bracket
    (["n9", "n10", "n11"], "n[9-11]"),  # 9 and 10 print the same at width 1
    (["n09", "n10"], "n[09-10]"),
    (["n1", "n01"], "n[1,01]"),  # different padding never merges; narrower width first
    (["n008", "n009", "n10"], "n[10,008-009]"),
    (["b3", "a1", "a2", "a5", "login", "login"], "a[1-2,5],b3,login"),
    (["x", "x1", "x2"], "x,x[1-2]"),  # a bare name sorts before numbered names of its prefix
    (["ip-10-0-1-23", "ip-10-0-1-24", "ip-10-0-2-5"], "ip-10-0-1-[23-24],ip-10-0-2-5"),
    (["rack2-n1", "rack10-n1", "rack1-n1"], "rack1-n1,rack2-n1,rack10-n1"),  # natural order of prefixes
    (["r01-n1", "r1-n1", "r00-n1"], "r00-n1,r01-n1,r1-n1"),  # leading zeros compare digit by digit
    (["12", "13", "14"], "[12-14]"),
    (["gpu001.example.com", "gpu002.example.com"], "gpu001.example.com,gpu002.example.com"),
    ([], ""),
])
def test_compress_like_slurm(names: list[str], expected: str) -> None:
    assert compress(names) == expected
    assert sorted(expand(expected)) == sorted(set(names))


def test_natural_order() -> None:
    names = ["n10", "n9", "n1", "n01", "n001", "a", "b2c", "b10c", "b02c"]
    ordered = sorted(names, key=cmp_to_key(natcmp))
    assert ordered == ["a", "b02c", "b2c", "b10c", "n001", "n01", "n1", "n9", "n10"]
    assert natcmp("x", "x") == 0 and natcmp("x1", "x") > 0


def test_round_trip_on_random_names() -> None:
    rng = random.Random(8)
    for _ in range(300):
        prefixes = [rng.choice(["gpu", "gpu-", "ib", "n", "rack1-n", "h.", ""]) for _ in range(rng.randint(1, 3))]
        names = {f"{rng.choice(prefixes)}{rng.randint(0, 130):0{rng.choice([1, 1, 2, 3])}d}"
                 for _ in range(rng.randint(1, 40))}
        names |= {rng.choice(["login", "ctl", "gpu"]) for _ in range(rng.randint(0, 2))}
        text = compress(names)
        assert sorted(expand(text)) == sorted(names), text
        assert len(text) <= sum(len(n) + 1 for n in names) + 2  # never longer than the plain list


def test_compression_is_compact_for_a_large_cluster() -> None:
    names = [f"gpu{i:04d}" for i in range(1, 4097) if i % 97]
    text = compress(names)
    assert text.startswith("gpu[0001-0096,0098-0193,") and text.count(",") == 42
    assert expand(text) == names


def test_expand_rejects_what_slurm_rejects() -> None:
    assert expand("a[1-2]b,rack[1-2]-n[1-2]") == ["a1b", "a2b", "rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]
    for bad in ("a[1-", "a[3-1]", "a[x]", "a]1["):
        with pytest.raises(HostlistError):
            expand(bad)
