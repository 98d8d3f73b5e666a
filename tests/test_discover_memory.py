"""A discovery that reads the nodes itself lets their records go before it makes the snapshot, and keeps of
each node only what its source reads; plan and kueue with a snapshot file keep only the labels and annotations
they read: at 1,000,000 nodes the records are most of the memory (BENCHMARKS.md)."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from hack.synth import gke_cluster, node_list
from labeler.io.nodes import MANAGED_ANNOTATION, Keep, Node, load_nodes_file
from labeler.topology import placement
from labeler.topology.plan import make_plan
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


def discovered(nodes_file: Path, capsys) -> Path:
    """The snapshot file `discover --source labels --preset gke` writes for `nodes_file`, beside it."""
    assert main(["discover", "--source", "labels", "--preset", "gke", "--nodes", str(nodes_file), "-o", "json"]) == 0
    snap_file = nodes_file.with_name("snap.json")
    snap_file.write_text(capsys.readouterr().out)
    return snap_file


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
    full, lean = load_nodes_file(nodes_file), load_nodes_file(nodes_file, Keep(provider_ids=False))
    assert all(n.provider_id.startswith("gce://") for n in full) and {n.provider_id for n in lean} == {""}
    assert [n.labels for n in full] == [n.labels for n in lean] and [n.name for n in full] == [n.name for n in lean]


def test_plan_reads_the_nodes_sharing_the_snapshots_strings(nodes_file: Path, tmp_path: Path, monkeypatch,
                                                             capsys) -> None:
    """With --snapshot, the records share the snapshot's node names and values (one copy each) and keep no
    providerID; the plan is what it was."""
    snap_file = discovered(nodes_file, capsys)
    import topolabel.commands.plan as plan_command

    seen = []
    make = plan_command.make_plan

    def checking(snapshot, nodes, *args, **kwargs):
        names = {name: name for name in snapshot.nodes}
        blocks = {v["block"]: v["block"] for v in snapshot.nodes.values()}
        labelled = [n.labels["topolabel.dev/block"] for n in nodes if n.labels]  # the one node topolabel labelled
        seen.append((all(names[n.name] is n.name for n in nodes), [blocks[v] is v for v in labelled],
                     {n.provider_id for n in nodes}))
        return make(snapshot, nodes, *args, **kwargs)

    monkeypatch.setattr(plan_command, "make_plan", checking)
    assert main(["plan", "--snapshot", str(snap_file), "--nodes", str(nodes_file), "-o", "json"]) == 0
    assert seen == [(True, [True], {""})]
    assert len(json.loads(capsys.readouterr().out)["changes"]) == 100


@pytest.fixture
def varied(tmp_path: Path, capsys) -> tuple[Path, Path]:
    items, _ = gke_cluster(blocks=2, subblocks=2, hosts=25)
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(node_list(items)))
    snap_file = discovered(plain, capsys)
    snap = json.loads(snap_file.read_text())
    keys = {lv["name"]: lv["label"] for lv in snap["levels"]}
    managed = ",".join(sorted(keys.values()))
    for i, item in enumerate(items):
        meta = item["metadata"]
        values = snap["nodes"][meta["name"]]
        if i % 2:
            meta["labels"].update({keys[level]: value for level, value in values.items()})
            meta["annotations"] = {MANAGED_ANNOTATION: managed, "example.com/note": str(i % 3)}
        if i % 14 == 1:  # labelled before, and an owned key since dropped from the levels
            meta["labels"]["topolabel.dev/rack"] = "stale"
            meta["annotations"][MANAGED_ANNOTATION] += ",topolabel.dev/rack"
        if i % 11 == 0:
            meta["labels"][keys["block"]] = "set-by-hand"
        if i % 13 == 0:
            meta["labels"]["topolabel.dev/other"] = "x"
        if i % 17 == 0:
            meta["labels"]["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3"  # the pool label, before the fallback
        if i % 19 == 0:
            del meta["labels"]["node.kubernetes.io/instance-type"]  # in no pool
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps(node_list(items)))
    return nodes, snap_file


def test_plan_and_kueue_keep_only_what_they_read_and_answer_the_same(varied, tmp_path: Path, monkeypatch,
                                                                    capsys) -> None:
    """With --snapshot, plan keeps the level keys, the keys topolabel may own and the managed annotation; kueue
    the pool labels and no annotation. Their output equals what the whole records give."""
    nodes_file, snap_file = varied
    import kueue_config.objects as objects
    import topolabel.commands.kueue as kueue_command
    import topolabel.commands.plan as plan_command

    whole = load_nodes_file(nodes_file)
    snapshot = pipeline.read_snapshot(str(snap_file))
    kept: dict[str, list[Node]] = {}
    for module, name in ((plan_command, "make_plan"), (kueue_command, "generate")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda snap, nodes, *args, real=real, name=name, **kwargs:
                            (kept.__setitem__(name, nodes), real(snap, nodes, *args, **kwargs))[1])
    assert main(["plan", "--snapshot", str(snap_file), "--nodes", str(nodes_file), "-o", "json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert planned == json.loads(json.dumps(make_plan(snapshot, whole).to_dict()))
    assert planned["changes"] and any(c["remove"] for c in planned["changes"]) and planned["problems"]
    assert {k for n in kept["make_plan"] for k in n.labels} == {
        "topolabel.dev/block", "topolabel.dev/subblock", "topolabel.dev/host", "topolabel.dev/rack",
        "topolabel.dev/other"}
    assert {k for n in kept["make_plan"] for k in n.annotations} == {MANAGED_ANNOTATION}

    out = tmp_path / "kueue"
    assert main(["kueue", "--snapshot", str(snap_file), "--nodes", str(nodes_file), "--output-dir", str(out)]) == 0
    cfg = pipeline.read_config(None)
    assert objects.generate(snapshot, kept["generate"], cfg) == objects.generate(snapshot, whole, cfg)
    assert {k for n in kept["generate"] for k in n.labels} == {"nvidia.com/gpu.product",
                                                               "node.kubernetes.io/instance-type"}
    assert not any(n.annotations for n in kept["generate"])
    distinct = {tuple(n.labels.items()) for n in kept["generate"]}
    assert len({id(n.labels) for n in kept["generate"]}) == len(distinct) == 6  # shared by the nodes of a pool


def test_a_projection_is_the_same_on_either_path_and_shares_a_bounded_number(monkeypatch, tmp_path: Path) -> None:
    """The typed path (JSON runs) and the field-by-field path (YAML) keep the same entries; equal projections are
    one mapping, the first SHARED_PROJECTIONS of them; none kept is the one shared empty mapping."""
    import yaml

    from labeler.io import nodes as nodes_module

    items, _ = gke_cluster(blocks=1, subblocks=2, hosts=10)
    as_json, as_yaml = tmp_path / "n.json", tmp_path / "n.yaml"
    as_json.write_text(json.dumps(node_list(items)))
    as_yaml.write_text(yaml.safe_dump(node_list(items)))
    keep = Keep(labels=lambda key: key.endswith(("subblock", "host")), annotations=lambda key: False)
    typed, read = load_nodes_file(as_json, keep), load_nodes_file(as_yaml, keep)
    assert [n.labels for n in typed] == [n.labels for n in read]
    assert {k for n in typed for k in n.labels} == {"cloud.google.com/gce-topology-subblock",
                                                    "cloud.google.com/gce-topology-host"}
    assert all(n.annotations is nodes_module.EMPTY for n in typed + read)
    monkeypatch.setattr(nodes_module, "SHARED_PROJECTIONS", 3)
    pooled = load_nodes_file(as_json, Keep(labels="cloud.google.com/gce-topology-subblock".__eq__))
    assert len({id(n.labels) for n in pooled}) == 2  # two subblocks: two mappings for 20 nodes
    hosts = load_nodes_file(as_json, Keep(labels="cloud.google.com/gce-topology-host".__eq__))
    assert len({id(n.labels) for n in hosts}) == 20 and len({tuple(n.labels.items()) for n in hosts}) == 20
    nothing = load_nodes_file(as_json, Keep(labels=lambda key: False))
    assert all(n.labels is nodes_module.EMPTY for n in nothing)


def test_a_snapshot_files_bytes_go_before_its_checks(tmp_path: Path, capsys, monkeypatch) -> None:
    """The bytes read are dropped as soon as they are decoded: the checks, and their tables, do not sit on top
    of them (1,000,000 nodes: 156 MB of the peak)."""
    from labeler.topology import snapshotfile

    items, _ = gke_cluster(blocks=1, subblocks=2, hosts=10)
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps(node_list(items)))
    snap_file = discovered(nodes, capsys)
    freed: list[bool] = []

    class Tracked(bytes):
        def __del__(self) -> None:
            freed.append(True)

    read, check = snapshotfile.read_bytes, snapshotfile._checked
    monkeypatch.setattr(snapshotfile, "read_bytes", lambda path: Tracked(read(path)))
    seen: list[bool] = []
    monkeypatch.setattr(snapshotfile, "_checked", lambda found, origin: (seen.append(bool(freed)),
                                                                         check(found, origin))[1])
    assert len(snapshotfile.read_snapshot(str(snap_file)).nodes) == 20
    assert seen == [True]
