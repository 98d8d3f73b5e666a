"""A discovery that reads the nodes itself lets their records go before it makes the snapshot, and keeps of
each node only what its source reads: at 1,000,000 nodes the records are most of the memory (BENCHMARKS.md)."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from hack.synth import gke_cluster, node_list
from labeler.io.nodes import MANAGED_ANNOTATION, Node, load_nodes_file
from labeler.topology import placement
from labeler.topology.labelvalues import short_hash
from topolabel import pipeline
from topolabel.cli import main


def live_nodes() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is Node)


@pytest.fixture
def nodes_file(tmp_path: Path) -> Path:
    items, _ = gke_cluster(blocks=2, subblocks=2, hosts=25)
    block = items[0]["metadata"]["labels"]["cloud.google.com/gce-topology-block"]
    items[0]["metadata"]["annotations"] = {MANAGED_ANNOTATION: "topolabel.dev/block"}
    items[0]["metadata"]["labels"]["topolabel.dev/block"] = f"{block}-{short_hash(block)}"  # its other candidate
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps(node_list(items)))
    return path


def test_the_node_records_are_gone_when_the_snapshot_is_made(nodes_file: Path, monkeypatch, capsys) -> None:
    alive: list[int] = []
    make = placement.to_snapshot

    def counting(*args, **kwargs):
        alive.append(live_nodes())
        return make(*args, **kwargs)

    monkeypatch.setattr(pipeline, "to_snapshot", counting)
    assert main(["discover", "--source", "labels", "--preset", "gke", "--nodes", str(nodes_file), "-o", "json"]) == 0
    snap = json.loads(capsys.readouterr().out)
    assert alive == [0] and len(snap["nodes"]) == 100
    # what topolabel wrote on a node still counts: its block keeps the value it carries, not its plain name
    first = json.loads(nodes_file.read_text())["items"][0]["metadata"]
    assert snap["nodes"][first["name"]]["block"] == first["labels"]["topolabel.dev/block"]


def test_provider_ids_are_kept_only_when_asked(nodes_file: Path) -> None:
    full, lean = load_nodes_file(nodes_file), load_nodes_file(nodes_file, provider_ids=False)
    assert all(n.provider_id.startswith("gce://") for n in full) and {n.provider_id for n in lean} == {""}
    assert [n.labels for n in full] == [n.labels for n in lean] and [n.name for n in full] == [n.name for n in lean]


def test_plan_reads_the_nodes_sharing_the_snapshots_strings(nodes_file: Path, tmp_path: Path, monkeypatch,
                                                             capsys) -> None:
    """With --snapshot, the records share the snapshot's node names and values (one copy each) and keep no
    providerID; the plan is what it was."""
    assert main(["discover", "--source", "labels", "--preset", "gke", "--nodes", str(nodes_file), "-o", "json"]) == 0
    snap_file = tmp_path / "snap.json"
    snap_file.write_text(capsys.readouterr().out)
    import topolabel.commands.plan as plan_command

    seen = []
    make = plan_command.make_plan

    def checking(snapshot, nodes, *args):
        names = {name: name for name in snapshot.nodes}
        hosts = {v["host"]: v["host"] for v in snapshot.nodes.values()}
        key = "cloud.google.com/gce-topology-host"
        seen.append((all(names[n.name] is n.name for n in nodes),
                     all(hosts[n.labels[key]] is n.labels[key] for n in nodes), {n.provider_id for n in nodes}))
        return make(snapshot, nodes, *args)

    monkeypatch.setattr(plan_command, "make_plan", checking)
    assert main(["plan", "--snapshot", str(snap_file), "--nodes", str(nodes_file), "-o", "json"]) == 0
    assert seen == [(True, True, {""})]
    assert len(json.loads(capsys.readouterr().out)["changes"]) == 100
