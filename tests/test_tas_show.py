"""`topolabel show`: one tree per flavor in the terminal, and an SVG that a real renderer (rsvg-convert) draws."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from kueue_config.tas import svg
from testkit.tas_cluster import BLOCK, GPU_TOLERATION, HOST, RACK, batch_job, kueue_objects, node, node_list, pod
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
    assert "block b1  6/16 gpu free  0/2 nodes free: n1, n2" in out
    assert "rack r1  6/16 gpu free  0/2 nodes free: n1, n2" in out
    assert "block b2  16/16 gpu free  2/2 nodes free: n4, n5" in out
    assert "hostname" not in out  # one node per hostname domain: collapsed, the names are on the racks
    assert "nodes left out: 1 not Ready" in out
    assert main(_args(files, "--depth", "3")) == 0
    assert "hostname n2  6/8 gpu free  0/1 nodes free: n2" in capsys.readouterr().out


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
    assert "block 30e6…7f88  16/16 gpu free  2/2 nodes free: gke-n0, gke-n1" in out
    assert "block 30e6…ffff  16/16 gpu free  2/2 nodes free: gke-n2, gke-n3" in out


def _render(svg_path: Path, view_box: tuple[int, int, int, int]) -> tuple[int, int, list[bytes]]:
    """rsvg-convert's drawing of the part `view_box` (x, y, width, height) of the SVG, as a person would see it
    on a canvas that large: (width, height, RGBA rows)."""
    import png

    rsvg = shutil.which("rsvg-convert")
    if rsvg is None:
        pytest.skip("rsvg-convert (librsvg2-bin, in .ci/apt-packages) is not installed")
    x, y, width, height = view_box
    source = svg_path.with_suffix(f".{x}-{y}.svg")
    source.write_text(re.sub(r'width="\d+" height="\d+" viewBox="0 0 \d+ \d+"',
                             f'width="{width}" height="{height}" viewBox="{x} {y} {width} {height}"',
                             svg_path.read_text(), count=1))
    out = source.with_suffix(".png")
    subprocess.run([rsvg, "-o", str(out), str(source)], check=True, timeout=300)
    drawn_width, drawn_height, rows, _ = png.Reader(filename=str(out)).asRGBA8()
    return drawn_width, drawn_height, [bytes(row) for row in rows]


def _drawn_and_contained(svg_path: Path, margin: int = 200) -> tuple[int, int]:
    """The picture's size, after checking that rsvg-convert draws it that size and draws nothing (no text, no
    box) outside it: the strips `margin` pixels wide right of and below the canvas stay transparent."""
    root = ET.fromstring(svg_path.read_text())
    width, height = int(root.get("width")), int(root.get("height"))
    for strip in ((width, 0, margin, height + margin), (0, height, width + margin, margin)):
        drawn_width, drawn_height, rows = _render(svg_path, strip)
        assert (drawn_width, drawn_height) == strip[2:]
        assert not any(any(row[3::4]) for row in rows), f"something is drawn outside the canvas, in {strip}"
    return width, height


def test_the_canvas_check_sees_text_that_runs_off_the_canvas(tmp_path: Path) -> None:
    """The check the pictures below pass: a label starting inside the canvas but running past its edge fails it."""
    picture = tmp_path / "off.svg"
    picture.write_text('<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100" viewBox="0 0 200 100">'
                       '<rect width="200" height="100" fill="#fff"/><text x="150" y="50" font-size="12">'
                       'a label too long for the room</text></svg>')
    with pytest.raises(AssertionError, match="outside the canvas"):
        _drawn_and_contained(picture)
    picture.write_text(picture.read_text().replace('x="150"', 'x="10"'))
    assert _drawn_and_contained(picture) == (200, 100)


def _cells(root: ET.Element) -> list[ET.Element]:
    """The node cells: small rects with their own hover text."""
    return [r for r in root.iter(f"{NS}rect") if r.find(f"{NS}title") is not None]


def _texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{NS}text")]


def test_svg_colours_cells_by_use_has_a_legend_and_renders(files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "topo.svg"
    assert main(_args(files, "--svg", str(out))) == 0
    root = ET.fromstring(out.read_text())
    texts = _texts(root)
    assert texts[0] == "Kueue TAS: topo - 1 flavor(s)"
    assert "flavor gpus · Topology topo · 4 node(s) · 22/32 gpu free" in texts
    assert "boxes: block > rack (named); cells: one hostname each" in texts
    assert {"gpu free", "full", "no gpu", "block b1", "0/2 nodes free · 6/16 gpu free", "rack r1"} <= set(texts)
    cells = {c.find(f"{NS}title").text.split(":")[0]: c.get("fill") for c in _cells(root)}
    assert set(cells) == {f"block {b} / rack {r} / hostname {n}" for b, r, n in
                          [("b1", "r1", "n1"), ("b1", "r1", "n2"), ("b2", "r3", "n4"), ("b2", "r3", "n5")]}
    assert cells["block b1 / rack r1 / hostname n1"] == svg.colour(1.0) == "#d73027"  # full: red, not empty grey
    assert cells["block b2 / rack r3 / hostname n5"] == svg.colour(0.0) == "#1a9850"  # free: green
    _drawn_and_contained(out)


def test_svg_overlays_where_fit_places_a_job(files: dict[str, Path], tmp_path: Path, capsys) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(batch_job(2, {REQ: RACK})))  # r3: n4, n5 free; r1 holds only n2's 6 GPUs
    out = tmp_path / "where.svg"
    assert main(_args(files, "--job", str(job), "--svg", str(out))) == 0
    assert "job Job/train: fits, 2 pod(s) placed in flavor gpus" in capsys.readouterr().out
    root = ET.fromstring(out.read_text())
    outlined = [c.find(f"{NS}title").text for c in _cells(root) if c.get("stroke") == svg.JOB]
    assert outlined == ["block b2 / rack r3 / hostname n4: 8/8 gpu free, 1/1 nodes free (n4); the job: 1 pod(s)",
                        "block b2 / rack r3 / hostname n5: 8/8 gpu free, 1/1 nodes free (n5); the job: 1 pod(s)"]
    texts = _texts(root)
    assert "job Job/train: fits, 2 pod(s) placed in flavor gpus" in texts and "where the job goes (pods)" in texts
    assert "2/2 nodes free · 16/16 gpu free · job: 2 pod(s)" in texts  # rack r3's label
    _drawn_and_contained(out)


SUB = "example.com/subblock"


def _fabric(tmp_path: Path, blocks: int, subblocks: int, racks: int, hosts: int) -> list[str]:
    """block > subblock > rack > host nodes named for where they sit (`gpu-b03-s2-r07-n5`), one in three with a
    pod: the arguments for show. Blocks are numbered so that a sort by text would put b10 before b2."""
    items, pods = [], []
    for b in range(blocks):
        for s in range(subblocks):
            for r in range(racks):
                for h in range(hosts):
                    name = f"gpu-b{b}-s{s}-r{r:02d}-n{h}"
                    items.append(node(name, f"b{b}", f"b{b}-s{s}-r{r:02d}", labels={SUB: f"b{b}-s{s}"}))
                    if len(items) % 3 == 0:
                        pods.append(pod(f"p{len(items)}", name, 8 if len(items) % 6 == 0 else 4))
    (tmp_path / "n.json").write_text(json.dumps(node_list(items)))  # JSON: YAML would take a minute to read
    (tmp_path / "p.json").write_text(json.dumps(node_list(pods)))
    (tmp_path / "k.yaml").write_text(yaml.safe_dump_all(kueue_objects([BLOCK, SUB, RACK, HOST],
                                                                      tolerations=[GPU_TOLERATION])))
    return ["show", "--nodes", str(tmp_path / "n.json"), "--pods", str(tmp_path / "p.json"),
            "--kueue-dir", str(tmp_path / "k.yaml")]


def test_svg_of_10000_nodes_names_the_two_coarsest_levels_and_draws_finer_ones_as_bands(tmp_path: Path) -> None:
    out = tmp_path / "big.svg"
    assert main([*_fabric(tmp_path, 10, 8, 16, 8), "--svg", str(out), "-o", "json"]) == 0  # 10,240 nodes
    root = ET.fromstring(out.read_text())
    cells = _cells(root)
    assert len(cells) == 10_240  # one cell per node
    sizes = {float(c.get("width")) for c in cells}
    assert len(sizes) == 1 and sizes.pop() >= 8
    texts = _texts(root)
    assert "boxes: block > subblock (named); rack (bands, hover for names); cells: one hostname each" in texts
    blocks = [t for t in texts if t.startswith("block ")]
    assert blocks == [f"block b{b}" for b in range(10)]  # natural order: b2 before b10
    assert [t for t in texts if t.startswith("subblock ")] == [f"subblock b{b}-s{s}" for b in range(10) for s in range(8)]
    assert not any(t.startswith("rack ") for t in texts)  # bands: named only in their hover text
    bands = [g.find(f"{NS}title").text for g in root.iter(f"{NS}g") if "/ rack " in g.find(f"{NS}title").text]
    assert len(bands) == 1280 and bands[0].startswith("block b0 / subblock b0-s0 / rack b0-s0-r00: ")
    fills = {c.get("fill") for c in cells}
    assert {svg.colour(0.0), svg.colour(0.5), svg.colour(1.0)} <= fills
    width, height = _drawn_and_contained(out)
    assert width == svg.WIDTH and 2000 < height <= svg.MAX_HEIGHT + 400


def test_svg_fills_the_finest_boxes_when_cells_would_be_too_small_and_says_so(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(svg, "MAX_HEIGHT", 300)
    out = tmp_path / "agg.svg"
    assert main([*_fabric(tmp_path, 2, 4, 8, 16), "--svg", str(out), "-o", "json"]) == 0
    root = ET.fromstring(out.read_text())
    assert ("boxes: block > subblock > rack (named); finest boxes coloured by their use (one cell per node would be "
            "smaller than 5 px)") in _texts(root)
    assert _cells(root) == []
    _drawn_and_contained(out)


def test_level_draws_down_to_one_level(tmp_path: Path, capsys) -> None:
    out = tmp_path / "blocks.svg"
    args = _fabric(tmp_path, 3, 2, 2, 2)
    assert main([*args, "--level", "block", "--svg", str(out)]) == 0
    tree = capsys.readouterr().out
    assert "block b0" in tree and "subblock" not in tree
    root = ET.fromstring(out.read_text())
    texts = _texts(root)
    assert "boxes: block (named); cells: one hostname each" in texts and not any("subblock b" in t for t in texts)
    assert len(_cells(root)) == 24
    assert main([*args, "--level", SUB]) == 0 and "subblock b0-s1" in capsys.readouterr().out
    assert main([*args, "--level", "row"]) == 2
    assert "--level 'row': the Topology has no such level; its levels: block, subblock, rack, hostname" in \
        capsys.readouterr().err


def test_headlines_wrap_and_labels_shorten_inside_a_narrow_picture(tmp_path: Path) -> None:
    from kueue_config.tas.render_tree import DomainView, FlavorView
    child = DomainView(RACK, "rack-with-a-name-far-too-long-for-its-box-" * 2, 2, 8, 16, node_names=["n1", "n2"])
    top = DomainView(BLOCK, "b1", 2, 8, 16, children=[child], node_names=["n1", "n2"])
    fv = FlavorView("flavor-with-a-long-name", "topology", (BLOCK, RACK), "nvidia.com/gpu", [top], 2)
    job = "job Job/train: does not fit: " + "couldn't assign flavors to pod set main: topology " * 4
    out = tmp_path / "narrow.svg"
    out.write_text(svg.render_svg([fv], "Kueue TAS: a title long enough to need two lines here", "nvidia.com/gpu",
                                  job, width=360))
    texts = _texts(ET.fromstring(out.read_text()))
    assert sum(t.startswith("couldn't") or "topology" in t for t in texts) > 3  # the job line wrapped
    assert any(t.startswith("rack rack-with") and "…" in t for t in texts)  # the label shortened in the middle
    _drawn_and_contained(out)


def test_names_are_escaped_in_svg() -> None:
    from kueue_config.tas.render_tree import DomainView, FlavorView
    view = DomainView(BLOCK, "a<b&c", 1, 1, 2, node_names=["n&1"])
    text = svg.render_svg([FlavorView("f<1>", "t", (BLOCK,), "nvidia.com/gpu", [view], 1)], 'T "x" <y>',
                          "nvidia.com/gpu")
    root = ET.fromstring(text)
    assert "block a<b&c" in _texts(root)


def test_terminal_tree_is_in_natural_order_and_fits_80_columns(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(_fabric(tmp_path, 12, 2, 2, 4)) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    blocks = [line.split()[2] for line in out.splitlines() if "── block " in line]
    assert blocks == [f"b{b}" for b in range(12)]
    assert "├── block b0  100/128 gpu free  11/16 nodes free" in out
