"""`topolabel show`: one tree per flavor in the terminal, and an SVG that a real renderer (rsvg-convert) draws."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from kueue_config.tas import svg
from tests.tas_cluster import BLOCK, GPU_TOLERATION, HOST, RACK, batch_job, kueue_objects, node, node_list, pod
from topolabel.cli import main

KEYS = [BLOCK, RACK, HOST]
NS = "{http://www.w3.org/2000/svg}"
REQ = "kueue.x-k8s.io/podset-required-topology"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    nodes = [node("n1", "b1", "r1"), node("n2", "b1", "r1"), node("n3", "b1", "r2", ready=False),
             node("n4", "b2", "r3", labels={"pool": "other"}), node("n5", "b2", "r3")]
    pods = [pod("a", "n1", 8), pod("b", "n2", 2), pod("c", "n5", 8, phase="Failed")]
    out = {"nodes": tmp_path / "nodes.yaml", "pods": tmp_path / "pods.yaml", "kueue": tmp_path / "kueue.yaml"}
    out["nodes"].write_text(yaml.safe_dump(node_list(nodes)))
    out["pods"].write_text(yaml.safe_dump(node_list(pods)))
    out["kueue"].write_text(yaml.safe_dump_all(kueue_objects(KEYS, tolerations=[GPU_TOLERATION])))
    return out


def _args(files: dict[str, Path], *more: str) -> list[str]:
    return ["show", "--nodes", str(files["nodes"]), "--pods", str(files["pods"]), "--kueue-dir",
            str(files["kueue"]), *more]


def test_terminal_tree_shows_free_and_total_gpus(files: dict[str, Path], capsys) -> None:
    assert main(_args(files)) == 0
    out = capsys.readouterr().out
    # n3 is not Ready: not counted. b1 = n1 (0 free) + n2 (6 free); b2 = n4 + n5 (the failed pod holds nothing).
    assert "flavor gpus (Topology topo): 4 node(s), 22/32 gpu free" in out
    assert "block b1  6/16 gpu free  2 node(s): n1, n2" in out
    assert "rack r1  6/16 gpu free  2 node(s): n1, n2" in out
    assert "block b2  16/16 gpu free  2 node(s): n4, n5" in out
    assert "hostname" not in out  # one node per hostname domain: collapsed, the names are on the racks
    assert "nodes left out: 1 not Ready" in out
    assert main(_args(files, "--depth", "3")) == 0
    assert "hostname n2  6/8 gpu free  1 node(s): n2" in capsys.readouterr().out


def test_one_tree_per_flavor_each_with_its_own_nodes(files: dict[str, Path], capsys) -> None:
    api = "kueue.x-k8s.io/v1beta2"
    objects = kueue_objects(KEYS, tolerations=[GPU_TOLERATION])
    objects[1]["spec"]["nodeLabels"] = {"pool": "other"}
    objects.append({"apiVersion": api, "kind": "Topology", "metadata": {"name": "racks"},
                    "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": HOST}]}})
    objects.append({"apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": "all"},
                    "spec": {"nodeLabels": {}, "topologyName": "racks"}})
    files["kueue"].write_text(yaml.safe_dump_all(objects))
    assert main(_args(files, "-o", "yaml")) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert [(f["flavor"], f["topology"], [d["value"] for d in f["domains"]]) for f in shown["flavors"]] == [
        ("all", "racks", ["r1", "r3"]), ("gpus", "topo", ["b2"])]
    assert shown["flavors"][1]["domains"][0]["node_names"] == ["n4"]
    assert shown["flavors"][1]["nodes_excluded"]["other_flavor"] == 4
    assert main(_args(files)) == 0
    out = capsys.readouterr().out
    assert "flavor all (Topology racks): 4 node(s)" in out and "flavor gpus (Topology topo): 1 node(s)" in out
    assert "nodes left out: 4 in other pools (not pool=other, flavor gpus)" in out
    assert main(_args(files, "--flavor", "nope")) == 2
    assert "no ResourceFlavor 'nope'" in capsys.readouterr().err


def test_a_level_of_single_nodes_is_collapsed_and_hash_values_get_short_names(tmp_path: Path, capsys) -> None:
    host = "example.com/host"
    blocks = ["30e605f63be4da3943b8649f74877f88", "30e605f63be4da39ffffffffffffffff"]
    nodes = [node(f"gke-n{i}", blocks[i // 2], labels={host: f"h{i}"}) for i in range(4)]
    kueue = kueue_objects([BLOCK, host, HOST], tolerations=[GPU_TOLERATION])
    (tmp_path / "n.yaml").write_text(yaml.safe_dump(node_list(nodes)))
    (tmp_path / "k.yaml").write_text(yaml.safe_dump_all(kueue))
    assert main(["show", "--nodes", str(tmp_path / "n.yaml"), "--kueue-dir", str(tmp_path / "k.yaml")]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 3  # the flavor and its two blocks: the host level holds one node per domain
    # the two ids share 16 characters: each is shortened in the middle, keeping both ends
    assert "block 30e6…7f88  16/16 gpu free  2 node(s): gke-n0, gke-n1" in out
    assert "block 30e6…ffff  16/16 gpu free  2 node(s): gke-n2, gke-n3" in out


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def _render(svg_path: Path) -> tuple[int, int]:
    rsvg = shutil.which("rsvg-convert")
    if rsvg is None:
        pytest.skip("rsvg-convert (librsvg2-bin, in .ci/apt-packages) is not installed")
    png = svg_path.with_suffix(".png")
    subprocess.run([rsvg, "-o", str(png), str(svg_path)], check=True, timeout=120)
    return _png_size(png)


def _cells(root: ET.Element) -> list[ET.Element]:
    return [r for r in root.iter(f"{NS}rect") if r.find(f"{NS}title") is not None]


def test_svg_colours_cells_by_use_has_a_legend_and_renders(files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "topo.svg"
    assert main(_args(files, "--svg", str(out))) == 0
    root = ET.fromstring(out.read_text())
    texts = [t.text for t in root.iter(f"{NS}text")]
    assert texts[0] == "Kueue TAS: topo - 1 flavor(s)"
    assert "flavor gpus · Topology topo · 4 node(s) · 22/32 gpu free · rows: block" in texts
    assert {"gpu free", "full", "no gpu", "block b1", "6/16 free · 2 node(s)"} <= set(texts)
    cells = {c.find(f"{NS}title").text.split(":")[0]: c.get("fill") for c in _cells(root)}
    assert set(cells) == {f"block {b} / rack {r} / hostname {n}" for b, r, n in
                          [("b1", "r1", "n1"), ("b1", "r1", "n2"), ("b2", "r3", "n4"), ("b2", "r3", "n5")]}
    assert cells["block b1 / rack r1 / hostname n1"] == svg.colour(1.0) == "#d73027"  # full: red, not empty grey
    assert cells["block b2 / rack r3 / hostname n5"] == svg.colour(0.0) == "#1a9850"  # free: green
    width, height = _render(out)
    assert (width, height) == (int(root.get("width")), int(root.get("height")))


def test_svg_overlays_where_fit_places_a_job(files: dict[str, Path], tmp_path: Path, capsys) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(batch_job(2, {REQ: RACK})))  # r3: n4, n5 free; r1 holds only n2's 6 GPUs
    out = tmp_path / "where.svg"
    assert main(_args(files, "--job", str(job), "--svg", str(out))) == 0
    assert "job Job/train: fits, 2 pod(s) placed in flavor gpus" in capsys.readouterr().out
    root = ET.fromstring(out.read_text())
    outlined = [c.find(f"{NS}title").text for c in _cells(root) if c.get("stroke") == svg.JOB]
    assert outlined == ["block b2 / rack r3 / hostname n4: 8/8 gpu free, 1 node(s) (n4); the job: 1 pod(s)",
                        "block b2 / rack r3 / hostname n5: 8/8 gpu free, 1 node(s) (n5); the job: 1 pod(s)"]
    texts = [t.text for t in root.iter(f"{NS}text")]
    assert "job Job/train: fits, 2 pod(s) placed in flavor gpus" in texts and "where the job goes (pods)" in texts
    _render(out)


def _big(tmp_path: Path, count: int, per_block: int = 128, per_rack: int = 8) -> list[str]:
    """`count` nodes in blocks of racks, labelled, one in three with a pod: the arguments for show."""
    items = [node(f"node-{i:05d}", f"b{i // per_block:03d}", f"b{i // per_block:03d}-r{i // per_rack:03d}")
             for i in range(count)]
    pods = [pod(f"p{i}", f"node-{i:05d}", 8 if i % 6 == 0 else 4) for i in range(0, count, 3)]
    (tmp_path / "n.json").write_text(json.dumps(node_list(items)))  # JSON: YAML would take a minute to read
    (tmp_path / "p.json").write_text(json.dumps(node_list(pods)))
    (tmp_path / "k.yaml").write_text(yaml.safe_dump_all(kueue_objects(KEYS, tolerations=[GPU_TOLERATION])))
    return ["show", "--nodes", str(tmp_path / "n.json"), "--pods", str(tmp_path / "p.json"),
            "--kueue-dir", str(tmp_path / "k.yaml")]


def test_svg_of_10000_nodes_stays_readable(tmp_path: Path) -> None:
    out = tmp_path / "big.svg"
    assert main([*_big(tmp_path, 10_000), "--svg", str(out), "-o", "json"]) == 0
    root = ET.fromstring(out.read_text())
    cells = _cells(root)
    rows = [r for r in root.iter(f"{NS}g")]
    assert len(cells) == 10_000 and len(rows) == 79  # one cell per node, one row per block
    sizes = {float(c.get("width")) for c in cells}
    assert len(sizes) == 1 and sizes.pop() >= 9  # as large as 79 rows allow within MAX_HEIGHT
    fills = {c.get("fill") for c in cells}
    assert {svg.colour(0.0), svg.colour(0.5), svg.colour(1.0)} <= fills
    width, height = _render(out)
    assert width == svg.WIDTH and 1000 < height <= svg.MAX_HEIGHT + 400


def test_svg_aggregates_cells_below_the_minimum_size_and_says_so(tmp_path: Path, monkeypatch) -> None:
    # one block of 1,024 nodes needs nine lines of 6 px cells: 82 px, over a (lowered) 50 px budget
    monkeypatch.setattr(svg, "MAX_HEIGHT", 50)
    out = tmp_path / "agg.svg"
    assert main([*_big(tmp_path, 1024, per_block=1024, per_rack=16), "--svg", str(out), "-o", "json"]) == 0
    root = ET.fromstring(out.read_text())
    texts = [t.text for t in root.iter(f"{NS}text")]
    assert ("each cell is one rack (64 cells for 1024 nodes): one cell per node would be smaller than 6 px"
            in texts)
    assert len(_cells(root)) == 64
    _render(out)


def test_names_are_escaped_in_svg() -> None:
    from kueue_config.tas.render_tree import DomainView, FlavorView
    view = DomainView(BLOCK, "a<b&c", 1, 1, 2, node_names=["n&1"])
    text = svg.render_svg([FlavorView("f<1>", "t", (BLOCK,), "nvidia.com/gpu", [view], 1)], 'T "x" <y>',
                          "nvidia.com/gpu")
    root = ET.fromstring(text)
    assert "block a<b&c" in [t.text for t in root.iter(f"{NS}text")]


def test_terminal_output_fits_80_columns_without_breaking_names(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(_big(tmp_path, 512)) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "node-00000 … 00127" in out  # node names whole; the range drops the shared prefix
