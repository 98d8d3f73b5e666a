"""`topolabel discover --source infiniband` end to end, the Kueue objects from its snapshot, and its errors."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
import yaml

from hack.ibfabric import Spec, build
from hack.synth import H100, node_list, node_object
from testkit.environment import SHARED
from testkit.ibsim import PRELOAD, ibsim, needs_ibsim  # noqa: F401 (ibsim is a fixture)
from topolabel.cli import main

NDR = SHARED / "fabrics" / "ndr-582ca.ibnetdiscover"
GB200 = SHARED / "fabrics" / "gb200-self-only.ibnetdiscover"


def topolabel(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    """Run the CLI in this process: (exit code, stdout, stderr); an unexpected exception fails the test."""
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def kueue_accepts(capsys: pytest.CaptureFixture, snapshot: str, hosts: list[str], tmp_path: Path) -> list[dict]:
    """Write the snapshot and the hosts as GPU nodes, run `topolabel kueue`, return the objects."""
    (tmp_path / "snap.json").write_text(snapshot)
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(yaml.safe_dump(node_list([node_object(h, {}, H100, "dc1") for h in hosts])))
    code, out, err = topolabel(capsys, "kueue", "--snapshot", str(tmp_path / "snap.json"), "--nodes", str(nodes),
                               "--output-dir", "-")
    assert code == 0, err
    return list(yaml.safe_load_all(out))


def test_discover_json_and_kueue_on_the_ndr_capture(capsys, monkeypatch, tmp_path: Path) -> None:
    code, out, err = topolabel(capsys, "discover", "--source", "infiniband", "--ibnetdiscover", str(NDR), "-o", "json")
    assert code == 0, err
    snap = json.loads(out)
    assert list(snap) == ["levels", "nodes", "problems"]
    assert snap["levels"] == [{"name": "leafgroup", "label": "topolabel.dev/leafgroup"}]
    assert len(snap["nodes"]) == 120 and len({v["leafgroup"] for v in snap["nodes"].values()}) == 8
    monkeypatch.setattr("sys.stdin", io.StringIO(NDR.read_text()))
    _, from_stdin, _ = topolabel(capsys, "discover", "--source", "infiniband", "--ibnetdiscover", "-", "-o", "json")
    assert json.loads(from_stdin)["nodes"] == snap["nodes"]
    objects = kueue_accepts(capsys, out, sorted(snap["nodes"]), tmp_path)
    topology = next(o for o in objects if o["kind"] == "Topology")
    assert [lv["nodeLabel"] for lv in topology["spec"]["levels"]] == ["topolabel.dev/leafgroup", "kubernetes.io/hostname"]


@needs_ibsim
def test_three_level_fabric_from_ibsim_through_kueue(capsys, ibsim, tmp_path: Path) -> None:
    fabric = build(Spec(pods=2, sus=2, rails=8, hosts=2, spines=8, cores=2))
    path = tmp_path / "fabric.ibnetdiscover"
    path.write_text(ibsim(fabric).discover())
    code, out, err = topolabel(capsys, "discover", "--source", "infiniband", "--ibnetdiscover", str(path), "-o", "json")
    assert code == 0, err
    snap = json.loads(out)
    assert [lv["name"] for lv in snap["levels"]] == ["block", "leafgroup"]
    assert snap["nodes"]["p1-gpu-02-c01"] == {"block": "p1-ibspine-01..08", "leafgroup": "p1-ibleaf-02-01..08"}
    objects = kueue_accepts(capsys, out, sorted(snap["nodes"]), tmp_path)
    topology = next(o for o in objects if o["kind"] == "Topology")
    assert [lv["nodeLabel"] for lv in topology["spec"]["levels"]] == [
        "topolabel.dev/block", "topolabel.dev/leafgroup", "kubernetes.io/hostname"]


def one_line_error(capsys: pytest.CaptureFixture, fragment: str, *args: str) -> None:
    code, _, err = topolabel(capsys, "discover", "--source", "infiniband", *args)
    assert code == 2
    assert fragment in err and len(err.strip().splitlines()) == 1, err


def test_gb200_capture_exits_with_the_reason(capsys) -> None:
    one_line_error(capsys, "no switch in the fabric; the discovery saw only 'dgx-gb200-n01-c1 HCA-1' "
                   "(0xb8e92403009ca838), so it yields no topology", "--ibnetdiscover", str(GB200))


@pytest.mark.parametrize("files, args, fragment", [
    ({}, ["--ibnetdiscover", "missing.txt"], "missing.txt: cannot read: No such file or directory"),
    ({}, ["--ibnetdiscover", str(NDR), "--run"], "give one of --ib-fabric NAME (the fabric the collector published), --ibnetdiscover FILE"),
    ({}, ["--ibnetdiscover", str(NDR), "--hca-pattern", "mlx5_["], "hca_pattern: not a regular expression"),
    ({"m.yaml": "- a\n"}, ["--ibnetdiscover", str(NDR), "--guid-map", "m.yaml"], "m.yaml: expected a mapping of node name"),
    ({"n.map": "0xzz \"x\"\n"}, ["--ibnetdiscover", str(NDR), "--node-name-map", "n.map"], "n.map:1: '0xzz' is not a GUID"),
    ({"f.txt": "hello\n"}, ["--ibnetdiscover", "f.txt"], "f.txt: no Switch or Ca records"),
])
def test_bad_input_is_one_line(capsys, monkeypatch, tmp_path: Path, files: dict, args: list, fragment: str) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    one_line_error(capsys, fragment, *args)


def test_run_without_the_tool_says_what_to_install(capsys, monkeypatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    one_line_error(capsys, "ibnetdiscover: not found; install infiniband-diags", "--run")


@needs_ibsim
def test_run_gives_up_after_the_timeout(capsys, monkeypatch) -> None:
    """With the simulator library but no simulator, ibnetdiscover waits for ever: the timeout ends it."""
    monkeypatch.setenv("LD_PRELOAD", PRELOAD)
    monkeypatch.setenv("IBSIM_SOCKNAME", f"topolabel-none-{os.getpid()}")
    one_line_error(capsys, "ibnetdiscover: no answer within 2 s", "--run", "--ib-timeout", "2")
