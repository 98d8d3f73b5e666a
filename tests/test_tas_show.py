"""`topolabel show`: the tree in the terminal and as an SVG that a real renderer draws."""

from __future__ import annotations

import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from tests.tas_cluster import BLOCK, GPU_TOLERATION, HOST, RACK, kueue_objects, node, node_list, pod
from topolabel.cli import main

KEYS = [BLOCK, RACK, HOST]


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
    assert "Topology topo: 4 node(s), 22/32 gpu free" in out
    assert "block b1  6/16 gpu free  2 node(s)" in out
    assert "rack r1  6/16 gpu free  2 node(s)" in out
    assert "block b2  16/16 gpu free  2 node(s)" in out
    assert "hostname" not in out  # per-node rows only with --depth
    assert main(_args(files, "--depth", "3")) == 0
    assert "hostname n2  6/8 gpu free  1 node(s)" in capsys.readouterr().out


def test_flavor_and_json(files: dict[str, Path], capsys) -> None:
    kueue = kueue_objects(KEYS)
    kueue[1]["spec"]["nodeLabels"] = {"pool": "other"}
    files["kueue"].write_text(yaml.safe_dump_all(kueue))
    assert main(_args(files, "--flavor", "gpus", "-o", "yaml")) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert [(d["name"], d["nodes"], d["free"], d["total"]) for d in shown["domains"]] == [("b2", 1, 8, 8)]
    assert main(_args(files, "--flavor", "nope")) == 2
    assert "no ResourceFlavor 'nope'" in capsys.readouterr().err


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_svg_is_well_formed_and_renders(files: dict[str, Path], tmp_path: Path, capsys) -> None:
    svg = tmp_path / "topo.svg"
    assert main(_args(files, "--svg", str(svg), "--depth", "3")) == 0
    root = ET.fromstring(svg.read_text())
    ns = "{http://www.w3.org/2000/svg}"
    texts = [t.text for t in root.iter(f"{ns}text")]
    assert "b1" in texts and "6/16" in texts and "n2" in texts and "6/8" in texts
    titles = [t.text for t in root.iter(f"{ns}title")]
    assert "block b2: 16/16 free, 2 node(s)" in titles
    # widths follow total GPUs: b1 and b2 both have 16, so their boxes are equally wide
    boxes = {g.find(f"{ns}title").text.split(":")[0]: float(g.find(f"{ns}rect").get("width"))
             for g in root.iter(f"{ns}g")}
    assert boxes["block b1"] == boxes["block b2"] and boxes["rack r1"] == boxes["block b1"]
    rsvg = shutil.which("rsvg-convert")
    if rsvg is None:
        pytest.skip("rsvg-convert (librsvg2-bin, in .ci/apt-packages) is not installed")
    png = tmp_path / "topo.png"
    subprocess.run([rsvg, "-o", str(png), str(svg)], check=True, timeout=60)
    width, height = _png_size(png)
    assert width == int(root.get("width")) and height == int(root.get("height"))


def test_names_are_escaped_in_svg(tmp_path: Path) -> None:
    from kueue_config.tas.render_tree import DomainView
    from kueue_config.tas.svg import render_svg
    view = DomainView(BLOCK, "a<b&c", 1, 1, 2)
    text = render_svg([view], 'T "x" <y>', "nvidia.com/gpu")
    root = ET.fromstring(text)
    assert "a<b&c" in [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
