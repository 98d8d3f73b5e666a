"""The command line end to end on the bundled example, and its errors: one clear line, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import EXAMPLES
from topolabel.cli import main


def topolabel(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "topolabel.cli", *args], capture_output=True, text=True,
                          input=stdin, timeout=120)


def test_discover_prints_the_snapshot_format(capsys) -> None:
    assert main(["discover", "--source", "labels", "--preset", "gke", "--nodes", str(EXAMPLES / "nodes.yaml"),
                 "-o", "json"]) == 0
    snap = json.loads(capsys.readouterr().out)
    assert list(snap) == ["levels", "nodes", "problems"]
    assert [lv["name"] for lv in snap["levels"]] == ["block", "subblock", "host"]
    assert len(snap["nodes"]) == 64
    assert snap["problems"] == [{"node": "gke-a3-new-n000", "source": "labels",
                                 "message": "has none of the labels cloud.google.com/gce-topology-block, "
                                            "cloud.google.com/gce-topology-subblock, cloud.google.com/gce-topology-host"}]


def test_yaml_output_equals_json(capsys) -> None:
    args = ["discover", "--config", str(EXAMPLES / "topolabel.yaml"), "--nodes", str(EXAMPLES / "nodes.yaml")]
    main([*args, "-o", "json"])
    as_json = json.loads(capsys.readouterr().out)
    main([*args, "-o", "yaml"])
    assert yaml.safe_load(capsys.readouterr().out) == as_json


def test_example_pipeline_snapshot_plan_kueue_check(tmp_path: Path, capsys) -> None:
    cfg, nodes = str(EXAMPLES / "topolabel.yaml"), str(EXAMPLES / "nodes.yaml")
    main(["discover", "--config", cfg, "--nodes", nodes, "-o", "json"])
    snap = tmp_path / "snap.json"
    snap.write_text(capsys.readouterr().out)
    assert main(["plan", "--config", cfg, "--snapshot", str(snap), "--nodes", nodes, "-o", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert len(plan["changes"]) == 64 and plan["unchanged"] == 1
    out = tmp_path / "kueue"
    kueue = ["kueue", "--config", cfg, "--snapshot", str(snap), "--nodes", nodes, "--output-dir", str(out)]
    assert main(kueue) == 0
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert main(kueue) == 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first
    assert main([*kueue, "--check"]) == 0
    flavor = next(out.glob("resourceflavor-nvidia-b200-*.yaml"))
    flavor.write_text(flavor.read_text().replace("value: present", "value: presenT"))
    capsys.readouterr()
    assert main([*kueue, "--check"]) == 1
    assert "-    value: presenT" in capsys.readouterr().out


def test_stream_to_stdout(capsys) -> None:
    assert main(["kueue", "--config", str(EXAMPLES / "topolabel.yaml"), "--nodes", str(EXAMPLES / "nodes.yaml"),
                 "--output-dir", "-"]) == 0
    kinds = [d["kind"] for d in yaml.safe_load_all(capsys.readouterr().out)]
    assert kinds == ["Topology", "ResourceFlavor", "ResourceFlavor", "ClusterQueue", "LocalQueue", "LocalQueue"]


@pytest.mark.parametrize("files, args, fragment", [
    ({"c.yaml": "plan: {maxChangeFraction: 2}\n"}, ["discover", "--config", "c.yaml"],
     "c.yaml: plan.maxChangeFraction: Input should be less than or equal to 1"),
    ({"c.yaml": "keyPrefix: topolabel.dev\n"}, ["discover", "--config", "c.yaml"], "c.yaml: keyPrefix: Value error, must end with '/'"),
    ({"c.yaml": "sources: {}\n"}, ["discover", "--config", "c.yaml"], "c.yaml: sources: Extra inputs are not permitted"),
    ({"n.yaml": "kind: Pod\n"}, ["discover", "--source", "labels", "--preset", "gke", "--nodes", "n.yaml"],
     "n.yaml: expected a NodeList"),
    ({"n.yaml": "items: [\n"}, ["discover", "--source", "labels", "--preset", "gke", "--nodes", "n.yaml"],
     "n.yaml: not valid YAML: line 2, column 1: did not find expected node content"),
    ({}, ["discover", "--source", "labels", "--preset", "gke", "--nodes", "missing.yaml"], "missing.yaml: cannot read"),
    ({"s.json": "{\"levels\": []}"}, ["plan", "--snapshot", "s.json", "--nodes", str(EXAMPLES / "nodes.yaml")],
     "s.json: 'levels' must be a non-empty list"),
    ({}, ["discover", "--nodes", str(EXAMPLES / "nodes.yaml")], "no source: give --source"),
    ({"s.json": json.dumps({"levels": [{"name": "host", "label": "kubernetes.io/hostname"}],
                            "nodes": {"gke-a3-b00-s00-n000": {"host": "evil"}}})},
     ["plan", "--snapshot", "s.json", "--nodes", str(EXAMPLES / "nodes.yaml")],
     "s.json: label key 'kubernetes.io/hostname' for level 'host' belongs to Kubernetes"),
])
def test_errors_are_one_clear_line(tmp_path: Path, files: dict, args: list, fragment: str, monkeypatch) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    result = subprocess.run([sys.executable, "-m", "topolabel.cli", *args], capture_output=True, text=True,
                            timeout=120, cwd=tmp_path, env={"PYTHONPATH": str(EXAMPLES.parent), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 2
    assert fragment in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_joining_rack_whose_name_collides_leaves_the_labelled_rack_alone(tmp_path: Path, capsys) -> None:
    managed = {"topolabel.dev/managed-labels": "topolabel.dev/rack"}
    items = [{"kind": "Node", "metadata": {"name": f"a{i}", "labels": {"topolabel.dev/rack": "rack-1"},
                                           "annotations": managed}} for i in range(3)]
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(yaml.safe_dump({"items": [*items, {"kind": "Node", "metadata": {"name": "new"}}]}))
    inventory = tmp_path / "inv.yaml"
    inventory.write_text("levels: [rack]\nhosts:\n" + "".join(f"  - {{node: a{i}, rack: rack-1}}\n" for i in range(3))
                         + "  - {node: new, rack: rack 1}\n")
    assert main(["plan", "--source", "inventory", "--inventory", str(inventory), "--nodes", str(nodes), "-o", "json"]) == 0
    changes = json.loads(capsys.readouterr().out)["changes"]
    assert [c["node"] for c in changes] == ["new"] and changes[0]["set"]["topolabel.dev/rack"].startswith("rack-1-")


def test_help_has_examples() -> None:
    result = topolabel("kueue", "--help")
    assert result.returncode == 0 and "--check" in result.stdout and "examples:" in result.stdout
