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
    ({"c.yaml": "keyPrefix: topolabel.dev\n"}, ["discover", "--config", "c.yaml"], "c.yaml: keyPrefix: must end with '/'"),
    ({"c.yaml": "sources: {}\n"}, ["discover", "--config", "c.yaml"], "c.yaml: sources: unknown key; did you mean 'source'?"),
    ({"n.yaml": "kind: Pod\n"}, ["discover", "--source", "labels", "--preset", "gke", "--nodes", "n.yaml"],
     "n.yaml: expected a NodeList"),
    ({"n.yaml": "items: [\n"}, ["discover", "--source", "labels", "--preset", "gke", "--nodes", "n.yaml"],
     "n.yaml: not valid YAML: line 2, column 1: expected the node content"),
    ({}, ["discover", "--source", "labels", "--preset", "gke", "--nodes", "missing.yaml"], "missing.yaml: cannot read"),
    ({"s.json": "{\"levels\": []}"}, ["plan", "--snapshot", "s.json", "--nodes", str(EXAMPLES / "nodes.yaml")],
     "s.json: 'levels' must be a non-empty list"),
    ({}, ["discover", "--nodes", str(EXAMPLES / "nodes.yaml")], "no source: give --source"),
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


def test_help_has_examples() -> None:
    result = topolabel("kueue", "--help")
    assert result.returncode == 0 and "--check" in result.stdout and "examples:" in result.stdout
