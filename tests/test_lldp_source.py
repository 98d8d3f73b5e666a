"""`topolabel discover --source lldp`: facts from NODE.json files or from the agent's Node annotations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from providers.lldp.facts import ANNOTATION, Neighbor, to_json
from tests.test_lldp_facts import entry, json0
from topolabel.cli import main


def facts(*pairs: tuple[str, str]) -> str:
    return to_json(Neighbor(interface, switch, f"id-{switch}", "swp1") for interface, switch in pairs)


def run(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, dict | str]:
    capsys.readouterr()
    code = main(["discover", "--source", "lldp", "-o", "json", *args])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 else out.err)


@pytest.fixture
def lldp_dir(tmp_path: Path) -> Path:
    d = tmp_path / "lldp"
    d.mkdir()
    (d / "gpu-a.json").write_text(facts(("eth0", "leaf-r01"), ("eno1", "oob")))
    (d / "gpu-b.json").write_text(json.dumps(json0(entry("eth0", "leaf-r02", "02", "swp3"))))  # raw lldpcli output
    (d / "gpu-c.json").write_text("{broken")
    return d


def nodes_file(tmp_path: Path, annotations: dict[str, str | None]) -> str:
    items = [{"apiVersion": "v1", "kind": "Node",
              "metadata": {"name": name, "annotations": {ANNOTATION: value} if value is not None else {}}}
             for name, value in annotations.items()]
    path = tmp_path / "nodes.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return str(path)


def test_a_directory_of_files_needs_no_cluster(lldp_dir, capsys) -> None:
    code, snap = run(capsys, "--lldp-dir", str(lldp_dir))
    assert code == 0
    assert snap["levels"] == [{"name": "rack", "label": "topolabel.dev/rack"}]
    assert snap["nodes"] == {"gpu-a": {"rack": "leaf-r01"}, "gpu-b": {"rack": "leaf-r02"}}
    assert [(p["node"], p["message"].split(":")[0]) for p in snap["problems"]] == [("gpu-c", str(lldp_dir / "gpu-c.json"))]


def test_with_nodes_missing_files_and_stray_files_are_reported(lldp_dir, tmp_path, capsys) -> None:
    code, snap = run(capsys, "--lldp-dir", str(lldp_dir), "--nodes", nodes_file(tmp_path, {"gpu-a": None, "gpu-z": None}))
    assert code == 0 and snap["nodes"] == {"gpu-a": {"rack": "leaf-r01"}}
    messages = {p.get("node"): p["message"] for p in snap["problems"]}
    assert messages["gpu-z"] == f"no file {lldp_dir / 'gpu-z.json'}"
    assert messages[None] == f"{lldp_dir}: 2 file(s) for hosts that are not nodes, ignored: gpu-b, gpu-c"


def test_annotations_written_by_the_agent(tmp_path, capsys) -> None:
    nodes = nodes_file(tmp_path, {"gpu-a": facts(("eth0", "leaf-r01"), ("eth1", "leaf-r02")),
                                  "gpu-b": facts(("eth0", "leaf-r02")), "gpu-c": None, "gpu-d": "[]"})
    switch_map = tmp_path / "switches.yaml"
    switch_map.write_text(yaml.safe_dump({"levels": ["block"], "pairs": [["leaf-r01", "leaf-r02"]],
                                          "switches": {"leaf-r01": {"block": "b1"}, "leaf-r02": {"block": "b1"}}}))
    code, snap = run(capsys, "--nodes", nodes, "--switch-map", str(switch_map))
    assert code == 0
    assert snap["nodes"] == {"gpu-a": {"block": "b1", "rack": "leaf-r01_leaf-r02"},
                             "gpu-b": {"block": "b1", "rack": "leaf-r01_leaf-r02"}}
    messages = {p.get("node"): p["message"] for p in snap["problems"]}
    assert messages["gpu-c"] == f"no {ANNOTATION} annotation: is the topolabel agent running on it?"
    assert messages["gpu-d"].startswith(f"annotation {ANNOTATION}: expected")
    assert messages["gpu-b"].startswith("hears only leaf-r02 of the pair")


def test_options_from_the_config_file(lldp_dir, tmp_path, capsys) -> None:
    config = tmp_path / "topolabel.yaml"
    config.write_text(yaml.safe_dump({"source": {"type": "lldp", "lldpDir": str(lldp_dir),
                                                 "mgmtInterfaces": "^(eth0)$"}}))
    code, snap = run(capsys, "--config", str(config))
    assert code == 0 and snap["nodes"] == {"gpu-a": {"rack": "oob"}}


@pytest.mark.parametrize("args, words", [
    ((), "no nodes to read the agent's annotations from"),
    (("--lldp-dir", "/nonexistent/lldp"), "/nonexistent/lldp: not a directory"),
    (("--lldp-dir", "{dir}", "--mgmt-interfaces", "(eno"), "mgmt_interfaces: not a regular expression: missing )"),
    (("--lldp-dir", "{dir}", "--switch-map", "m.yaml", "--switch-lldp", "{dir}"), "not both"),
    (("--lldp-dir", "{dir}", "--switch-map", "/nonexistent/map.yaml"), "/nonexistent/map.yaml: cannot read"),
    (("--lldp-dir", "{dir}", "--switch-lldp", "{dir}"), "gpu-c.json: not valid JSON"),
])
def test_bad_input_is_one_clear_line(lldp_dir, capsys, args, words) -> None:
    code, err = run(capsys, *(a.format(dir=lldp_dir) for a in args))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("topolabel discover: error: ") and words in lines[0]


def test_a_hostile_annotation_is_a_problem_for_its_node_alone(tmp_path, capsys) -> None:
    nodes = nodes_file(tmp_path, {"gpu-a": facts(("eth0", "leaf-r01")), "big": " " * 70_000 + facts(("eth0", "x")),
                                  "deep": "[" * 50_000, "many": json.dumps({"version": 1, "neighbors": [
                                      {"interface": f"eth{i}", "chassisName": "leaf-r01"} for i in range(300)]})})
    code, snap = run(capsys, "--nodes", nodes)
    assert code == 0 and snap["nodes"] == {"gpu-a": {"rack": "leaf-r01"}}
    why = {p["node"]: p["message"] for p in snap["problems"]}
    assert "bytes; LLDP facts are at most 65536" in why["big"]
    assert "nested deeper than" in why["deep"] and "more than 256 neighbours" in why["many"]
