"""Kueue objects: right shape, quotas summed, names that change only with immutable fields."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from hack.synth import B200, H100, gke_cluster
from kueue_config.files import diff, header, read_dir, render
from kueue_config.objects import generate
from labeler.errors import OutputError, TopologyError
from labeler.io.nodes import parse_nodes
from labeler.settings.config import parse_config
from labeler.settings.quantities import format_quantity, parse
from labeler.topology.model import Level, Snapshot
from labeler.topology.names import HOSTNAME
from labeler.topology.placement import level_keys, to_snapshot
from providers.base import SourceContext
from providers.labels import discover

CONFIG = {"pools": {"label": "cloud.google.com/gke-accelerator"},
          "kueue": {"topologyName": "gke", "clusterQueue": "gpu",
                    "localQueues": [{"name": "gpu", "namespaces": ["team-b", "team-a"]}]}}


@pytest.fixture
def cluster():
    items, _ = gke_cluster(blocks=2, subblocks=2, hosts=4)  # block 0 is H100, block 1 is B200
    nodes = parse_nodes(items, "test")
    found = discover(SourceContext(nodes=nodes, options={"preset": "gke"}))
    return to_snapshot(found, level_keys(found.level_names)), nodes


def by_kind(objects: list[dict], kind: str) -> list[dict]:
    return [o for o in objects if o["kind"] == kind]


def test_objects(cluster) -> None:
    snap, nodes = cluster
    objects = generate(snap, nodes, parse_config(CONFIG, "test")).objects
    [topo] = by_kind(objects, "Topology")
    assert [lv["nodeLabel"] for lv in topo["spec"]["levels"]] == [
        "topolabel.dev/block", "topolabel.dev/subblock", "topolabel.dev/host", HOSTNAME]
    assert topo["metadata"]["name"].startswith("gke-")
    flavors = by_kind(objects, "ResourceFlavor")
    assert sorted(f["spec"]["nodeLabels"]["cloud.google.com/gke-accelerator"] for f in flavors) == [
        B200.accelerator, H100.accelerator]
    for f in flavors:
        assert f["spec"]["topologyName"] == topo["metadata"]["name"]
        assert f["spec"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present",
                                             "effect": "NoSchedule"}]
    [cq] = by_kind(objects, "ClusterQueue")
    [group] = cq["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    quotas = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in group["flavors"]}
    h100 = next(f["metadata"]["name"] for f in flavors if "h100" in f["metadata"]["name"])
    assert quotas[h100] == {"cpu": str(8 * 207), "memory": f"{8 * 1850}Gi", "nvidia.com/gpu": "64"}
    lqs = by_kind(objects, "LocalQueue")
    assert [(q["metadata"]["namespace"], q["spec"]["clusterQueue"]) for q in lqs] == [("team-a", "gpu"), ("team-b", "gpu")]


def test_output_is_byte_identical_and_check_catches_one_character(cluster, tmp_path: Path) -> None:
    snap, nodes = cluster
    cfg = parse_config(CONFIG, "test")
    files = render(generate(snap, nodes, cfg).objects, "kueue")
    assert files == render(generate(snap, list(reversed(nodes)), cfg).objects, "kueue")
    assert all(text.startswith(header("kueue")) for text in files.values())
    read_dir(tmp_path, "kueue").write(files)
    again = read_dir(tmp_path, "kueue")
    assert diff(again.current(), again.target(files)) == ""
    kustomization = yaml.safe_load((tmp_path / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(files)
    target = tmp_path / "clusterqueue-gpu.yaml"
    target.write_text(target.read_text().replace("nominalQuota: '64'", "nominalQuota: '65'"))
    changed = read_dir(tmp_path, "kueue")
    changes = diff(changed.current(), changed.target(files))
    assert "-        nominalQuota: '65'" in changes and "+        nominalQuota: '64'" in changes


def test_level_change_renames_topology_and_flavors_and_reports_superseded(cluster, tmp_path: Path) -> None:
    snap, nodes = cluster
    cfg = parse_config(CONFIG, "test")
    old = render(generate(snap, nodes, cfg).objects, "kueue")
    read_dir(tmp_path, "kueue").write(old)
    fewer = Snapshot(snap.levels[:2], {n: {k: v[k] for k in ("block", "subblock")} for n, v in snap.nodes.items()})
    new = render(generate(fewer, nodes, cfg).objects, "kueue")
    changes = read_dir(tmp_path, "kueue").write(new)
    gone = changes.removed
    assert sorted(n.split("-")[0] for n in gone) == ["resourceflavor", "resourceflavor", "topology"]
    assert all(gone[n] in new and gone[n].rsplit("-", 1)[0] == n.rsplit("-", 1)[0] for n in gone)  # the successor
    assert changes.updated == ["clusterqueue-gpu.yaml", "kustomization.yaml"] and changes.summary().startswith(
        "3 created, 2 updated, ")
    assert "clusterqueue-gpu.yaml" in new and "clusterqueue-gpu.yaml" not in gone
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*new, "kustomization.yaml"])
    assert yaml.safe_load((tmp_path / "kustomization.yaml").read_text())["resources"] == sorted(
        new, key=lambda n: (["topology", "resourceflavor", "clusterqueue", "localqueue"].index(n.split("-")[0]), n))
    cq = yaml.safe_load(new["clusterqueue-gpu.yaml"])
    new_flavors = {f["name"] for f in cq["spec"]["resourceGroups"][0]["flavors"]}
    assert new_flavors == {yaml.safe_load(t)["metadata"]["name"] for n, t in new.items() if n.startswith("resourceflavor")}


def test_foreign_files_in_the_directory_are_left_alone(cluster, tmp_path: Path) -> None:
    snap, nodes = cluster
    (tmp_path / "notes.yaml").write_text("kind: ConfigMap\nmetadata: {name: mine}\n")
    # a file carrying topolabel's managed-by label, but without the header: copied and edited by a person
    mine = tmp_path / "clusterqueue-mine.yaml"
    mine.write_text("kind: ClusterQueue\nmetadata: {name: mine, labels: {app.kubernetes.io/managed-by: topolabel}}\n")
    files = render(generate(snap, nodes, parse_config(CONFIG, "test")).objects, "kueue")
    read_dir(tmp_path, "kueue").write(files)
    other = Snapshot(snap.levels[:1], {n: {"block": v["block"]} for n, v in snap.nodes.items()})
    read_dir(tmp_path, "kueue").write(render(generate(other, nodes, parse_config(CONFIG, "test")).objects, "kueue"))
    assert (tmp_path / "notes.yaml").exists() and mine.read_text().startswith("kind: ClusterQueue")


def test_a_file_topolabel_did_not_generate_is_never_overwritten(cluster, tmp_path: Path) -> None:
    snap, nodes = cluster
    files = render(generate(snap, nodes, parse_config(CONFIG, "test")).objects, "kueue")
    (tmp_path / "clusterqueue-gpu.yaml").write_text("# my own queue\n")
    with pytest.raises(OutputError, match="clusterqueue-gpu.yaml: exists and was not generated by `topolabel kueue`"):
        read_dir(tmp_path, "kueue").write(files)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clusterqueue-gpu.yaml"]
    assert (tmp_path / "clusterqueue-gpu.yaml").read_text() == "# my own queue\n"


def test_a_hand_written_kustomization_is_merged_keeping_comments_and_entries(cluster, tmp_path: Path) -> None:
    snap, nodes = cluster
    hand = ("# ours, keep this comment\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
            "resources:\n  - namespace.yaml  # first\npatches:\n  - path: quota-patch.yaml\n")
    (tmp_path / "kustomization.yaml").write_text(hand)
    files = render(generate(snap, nodes, parse_config(CONFIG, "test")).objects, "kueue")
    read_dir(tmp_path, "kueue").write(files)
    text = (tmp_path / "kustomization.yaml").read_text()
    assert text.startswith("# ours, keep this comment\n") and "namespace.yaml  # first" in text
    data = yaml.safe_load(text)
    assert data["resources"][0] == "namespace.yaml" and set(data["resources"][1:]) == set(files)
    assert data["patches"] == [{"path": "quota-patch.yaml"}]
    again = read_dir(tmp_path, "kueue")
    assert diff(again.current(), again.target(files)) == ""  # a second run changes nothing


@pytest.mark.parametrize("text", ["kind: Component\nresources: [a.yaml]\n", "resources: {a: b}\n", "- a\n",
                                  "resources: [\n"])
def test_a_kustomization_topolabel_cannot_merge_is_refused_and_kept(cluster, tmp_path: Path, text: str) -> None:
    snap, nodes = cluster
    (tmp_path / "kustomization.yaml").write_text(text)
    files = render(generate(snap, nodes, parse_config(CONFIG, "test")).objects, "kueue")
    with pytest.raises(OutputError, match="kustomization.yaml: "):
        read_dir(tmp_path, "kueue").write(files)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kustomization.yaml"]
    assert (tmp_path / "kustomization.yaml").read_text() == text


def test_nodes_without_pool_label_are_reported(cluster) -> None:
    snap, nodes = cluster
    cfg = parse_config({"pools": {"label": "example.com/none", "fallbackLabels": []}}, "test")
    result = generate(snap, nodes, cfg)
    assert len(result.problems) == len(nodes)
    assert by_kind(result.objects, "ClusterQueue")[0]["spec"]["resourceGroups"] == []


def test_too_many_pools_is_a_clear_error() -> None:
    snap = Snapshot((Level("block", "topolabel.dev/block"),), {f"n{i}": {"block": "b"} for i in range(65)})
    items = [{"kind": "Node", "metadata": {"name": f"n{i}", "labels": {"nvidia.com/gpu.product": f"gpu-{i}"}},
              "status": {"allocatable": {"nvidia.com/gpu": "8"}}} for i in range(65)]
    with pytest.raises(TopologyError, match="65 node pools"):
        generate(snap, parse_nodes(items, "t"), parse_config({}, "t"))


@pytest.mark.parametrize("text, canonical", [("1536Mi", "1536Mi"), ("2Gi", "2Gi"), ("1.5", "1500m"),
                                             ("100m", "100m"), ("8", "8"), ("1024Ki", "1Mi"), ("1k", "1000")])
def test_quantities(text: str, canonical: str) -> None:
    assert format_quantity(parse(text)) == canonical
    assert parse(canonical) == parse(text)


def test_bad_quantity_names_the_node() -> None:
    with pytest.raises(ValueError, match="node n allocatable cpu: 'lots'"):
        parse("lots", "node n allocatable cpu")
    assert parse("0") == Decimal(0)
