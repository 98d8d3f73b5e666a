"""The inventory source: YAML or CSV, exact names and patterns, unmatched nodes reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from labeler.errors import SourceError
from labeler.io.nodes import Node
from labeler.topology.placement import level_keys, to_snapshot
from providers.base import SourceContext
from providers.inventory import discover

YAML = """
levels: [room, row, rack]
localNames: true
hosts:
  - {node: gpu-001, room: dc1, row: r3, rack: "12"}
  - {pattern: "gpu-1*", room: dc1, row: r4, rack: "12"}
  - {pattern: "gpu-*", room: dc2, row: r1, rack: "01"}
"""


def place(tmp_path: Path, text: str, name: str, nodes: list[str] | None = None):
    path = tmp_path / name
    path.write_text(text)
    ctx = SourceContext(nodes=[Node(n) for n in nodes or []], options={"inventory": str(path)})
    found = discover(ctx)
    return to_snapshot(found, level_keys(found.level_names))


def test_yaml_exact_then_first_matching_pattern(tmp_path: Path) -> None:
    snap = place(tmp_path, YAML, "inv.yaml", ["gpu-001", "gpu-101", "gpu-201", "cpu-1"])
    assert snap.nodes["gpu-001"]["row"] == "r3"
    assert snap.nodes["gpu-101"]["row"] == "r4"
    assert snap.nodes["gpu-201"]["room"] == "dc2"
    # rack "12" in row r3 and in row r4 are different racks (localNames)
    assert snap.nodes["gpu-001"]["rack"] != snap.nodes["gpu-101"]["rack"]
    assert [p.node for p in snap.problems] == ["cpu-1"]


def test_without_nodes_exact_entries_are_placed(tmp_path: Path) -> None:
    snap = place(tmp_path, YAML, "inv.yaml")
    assert set(snap.nodes) == {"gpu-001"}


def test_csv(tmp_path: Path) -> None:
    text = "node,block,rack\n# comment\ngpu-00?,b1,rack-a\ngpu-010,b1,rack-b\n"
    snap = place(tmp_path, text, "inv.csv", ["gpu-001", "gpu-010"])
    assert snap.nodes["gpu-001"] == {"block": "b1", "rack": "rack-a"}
    assert snap.nodes["gpu-010"] == {"block": "b1", "rack": "rack-b"}


@pytest.mark.parametrize("name, text, fragment", [
    ("bad.yaml", "levels: [a]\nhosts:\n  - {node: x}\n", "hosts[0] has no value for level(s) a"),
    ("bad.yaml", "levels: []\nhosts: []\n", "'levels' must be a non-empty list"),
    ("bad.yaml", "levels: [a]\nhosts:\n  - {node: x, pattern: y, a: 1}\n", "exactly one of 'node' or 'pattern'"),
    ("bad.yaml", "levels: [a\n", "not valid YAML"),
    ("bad.csv", "node,block\nx\n", "row 2 must have 2 non-empty cells"),
    ("bad.csv", "node,block\nx,\"" + "a" * 200_000 + "\"\n", "not valid CSV: field larger than field limit"),
    ("bad.yaml", 'levels: [a]\nlocalNames: "false"\nhosts: [{node: x, a: r1}]\n', "'localNames' must be true or false"),
    ("bad.yaml", "levels: [a]\nlocalNames: no\nhosts: [{node: x, a: r1}]\n", "'localNames' must be true or false"),
    ("bad.yaml", "levels: [a]\nhosts: [{node: x, a: [r1]}]\n", "hosts[0] has no value for level(s) a"),
    ("bad.yaml", "levels: [a]\nhosts: [{node: x, a: true}]\n", "hosts[0] has no value for level(s) a"),
])
def test_bad_files_name_file_and_problem(tmp_path: Path, name: str, text: str, fragment: str) -> None:
    with pytest.raises(SourceError) as err:
        place(tmp_path, text, name)
    assert str(tmp_path / name) in str(err.value) and fragment in str(err.value)


def test_values_are_the_strings_written_not_yaml_numbers(tmp_path: Path) -> None:
    racks = ["012", "1:30", "0x1F", "1_000", "0", "1e3", "2024-01-01"]
    text = "levels: [rack]\nlocalNames: false\nhosts:\n" + "".join(f"  - {{node: n{i}, rack: {r}}}\n"
                                                                   for i, r in enumerate(racks))
    snap = place(tmp_path, text, "inv.yaml", [f"n{i}" for i in range(len(racks))])
    assert [snap.nodes[f"n{i}"]["rack"] for i in range(len(racks))] == ["012", "1-30", "0x1F", "1_000", "0", "1e3",
                                                                          "2024-01-01"]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="none.yaml: cannot read: No such file"):
        discover(SourceContext(options={"inventory": str(tmp_path / "none.yaml")}))
