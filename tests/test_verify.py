"""`verify` finds every planted disagreement, and nothing else."""

from __future__ import annotations

import json
import random
from pathlib import Path

from labeler.io.nodes import Node
from labeler.topology.model import Level, Snapshot
from labeler.topology.verify import compare_sources, label_drift
from topolabel.cli import main

LEVELS_A = (Level("block", "topolabel.dev/block"), Level("rack", "topolabel.dev/rack"))
LEVELS_B = (Level("spine", "x/spine"), Level("leaf", "x/leaf"))


def cluster(seed: int) -> tuple[Snapshot, Snapshot, set[str], set[str]]:
    """Source A (inventory names) and source B (switch names) of 6 blocks x 4 racks x 6 nodes; B differs on
    a few planted nodes (moved to another rack), and on one whole rack it merges with its neighbour."""
    rng = random.Random(seed)
    a, b = {}, {}
    for blk in range(6):
        for rack in range(4):
            for i in range(6):
                node = f"n-{blk}-{rack}-{i}"
                a[node] = {"block": f"b{blk}", "rack": f"b{blk}-r{rack}"}
                b[node] = {"spine": f"spine-{blk:02d}", "leaf": f"leaf-{blk:02d}{rack:02d}"}
    nodes = sorted(a)
    moved = set(rng.sample(nodes, 5))
    for node in moved:  # B puts it on another rack of the same block
        blk, rack = node.split("-")[1:3]
        b[node]["leaf"] = f"leaf-{int(blk):02d}{(int(rack) + 1) % 4:02d}"
    # B merges rack 3 of block 5 into rack 2's leaf: all six nodes of the smaller side disagree
    merged = {f"n-5-3-{i}" for i in range(6)} - moved
    for node in merged:
        b[node]["leaf"] = "leaf-0502"
    return Snapshot(LEVELS_A, a), Snapshot(LEVELS_B, b), moved, merged


def test_two_sources_every_planted_difference_and_nothing_else() -> None:
    for seed in range(5):
        a, b, moved, merged = cluster(seed)
        report = compare_sources(a, b, names=("inventory", "fabric"))
        found = {d.node for d in report.disagreements}
        assert found == moved | merged, seed
        assert all(d.level == "rack=leaf" for d in report.disagreements)
        one = next(d for d in report.disagreements if d.node in moved)
        assert one.a == a.nodes[one.node]["rack"] and one.b == b.nodes[one.node]["leaf"]


def test_block_level_pairs_by_position_and_extra_nodes_are_listed() -> None:
    a, b, _, _ = cluster(0)
    b.nodes["only-b"] = {"spine": "spine-00", "leaf": "leaf-0000"}
    del a.nodes["n-0-0-0"]
    report = compare_sources(a, b)
    assert report.only_in_a == [] and report.only_in_b == ["n-0-0-0", "only-b"]
    assert not [d for d in report.disagreements if d.level == "block=spine"]


def test_stale_labels_are_found_and_nothing_else() -> None:
    a, _, _, _ = cluster(0)
    nodes = [Node(n, labels={lv.label: a.nodes[n][lv.name] for lv in a.levels}) for n in a.nodes]
    stale = {5: ("topolabel.dev/rack", "b0-r9"), 17: ("topolabel.dev/block", "old"), 40: ("topolabel.dev/rack", None)}
    for index, (key, value) in stale.items():
        labels = dict(nodes[index].labels)
        if value is None:
            del labels[key]
        else:
            labels[key] = value
        nodes[index] = Node(nodes[index].name, labels=labels)
    report = label_drift(a, nodes)
    assert {(d.node, d.level, d.a) for d in report.disagreements} == {
        (nodes[5].name, "rack", "b0-r9"), (nodes[17].name, "block", "old"), (nodes[40].name, "rack", None)}
    assert report.compared == len(nodes)


def test_cli_exit_status_and_json(tmp_path: Path, capsys) -> None:
    a, b, moved, merged = cluster(1)
    (tmp_path / "a.json").write_text(json.dumps(a.to_dict()))
    (tmp_path / "b.json").write_text(json.dumps(b.to_dict()))
    code = main(["verify", "--snapshot", str(tmp_path / "a.json"), "--against", str(tmp_path / "b.json"),
                 "--pair", "rack=leaf", "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    assert {d["node"] for d in out["disagreements"]} == moved | merged
    assert main(["verify", "--snapshot", str(tmp_path / "a.json"), "--against", str(tmp_path / "a.json"),
                 "-o", "json"]) == 0
    capsys.readouterr()
    assert main(["verify", "--snapshot", str(tmp_path / "a.json"), "--against", str(tmp_path / "b.json"),
                 "--pair", "rack=nope"]) == 2
