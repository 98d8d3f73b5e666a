"""Every command's output for people, on the bundled examples, in an 80-column terminal: no line is longer, and
no token (a node name, a label, a path) is broken across lines. A token may only be shortened in the middle
(`30e6…c2f1`): every word printed at 80 columns is a word the same command prints at 1,000 columns, or such a
shortening of one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from testkit.environment import EXAMPLES
from testkit.ibsysfs import FakeDevice, FakePort, write_sysfs
from testkit.kmockcluster import MockCluster
from topolabel.cli import main

WIDTH = 80
SLOW = "gke-a3-b00-s00-n000"  # its mlx5_3 runs at half rate
JOBS = sorted((EXAMPLES / "jobs").glob("*.yaml"))
TREE = re.compile(r"[│├└─]+")
TOO_BIG = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "too-big", "namespace": "ml-research", "labels": {"kueue.x-k8s.io/queue-name": "gpu"}},
           "spec": {"parallelism": 41, "completions": 41, "completionMode": "Indexed", "template": {
               "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": "topolabel.dev/block"}},
               "spec": {"restartPolicy": "Never", "containers": [
                   {"name": "main", "image": "trainer", "resources": {"limits": {"nvidia.com/gpu": 8}}}]}}}}


def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, columns: int,
        args: list[str]) -> tuple[int, str]:
    """`topolabel ARGS` in a terminal `columns` wide: its exit status and everything it printed. An argument
    may hold `{columns}` (a directory of its own per width); the output names it as written."""
    monkeypatch.setenv("COLUMNS", str(columns))
    code = main([arg.format(columns=columns) for arg in args])
    out = capsys.readouterr()
    text = out.out + out.err
    for arg in args:
        text = text.replace(arg.format(columns=columns), arg) if "{columns}" in arg else text
    return code, text


def tokens(text: str) -> set[str]:
    return set(TREE.sub(" ", text).split())


def broken(narrow: str, wide: str) -> list[str]:
    """Words of the narrow output that are neither words of the wide one nor one shortened in the middle."""
    whole = tokens(wide)
    out = []
    for word in tokens(narrow) - whole:
        head, ellipsis, tail = word.partition("…")
        if not (ellipsis and head and tail) or not any(len(w) > len(word) and w.startswith(head) and w.endswith(tail)
                                                       for w in whole):
            out.append(word)
    return sorted(out)


def snapshot_of_examples(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    """In `tmp_path`, where `examples/` is the bundled examples (paths as short as a person types them): the
    examples' snapshot, `snap.json`."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").symlink_to(EXAMPLES)
    assert main(["discover", "--config", "examples/topolabel.yaml", "--nodes", "examples/nodes.yaml", "-o", "json"]) == 0
    (tmp_path / "snap.json").write_text(capsys.readouterr().out)
    (tmp_path / "health.yaml").write_text("health: {maxIsolatedFraction: 0.5}\n")
    slow = [FakeDevice(f"mlx5_{i}", 0xE09D730300858D00 + 16 * i, [FakePort(rate="200 Gb/sec (4X HDR)" if i == 3
                                                                            else "400 Gb/sec (4X NDR)")])
            for i in range(8)]
    write_sysfs(tmp_path / "sys-slow", slow)
    write_sysfs(tmp_path / "sys-ok", [FakeDevice(d.name, d.node_guid + 1, [FakePort()]) for d in slow])
    return "snap.json"


def commands(snapshot: str, bad: str) -> dict[str, list[str]]:
    """Each command that prints for people, as someone would first run it on the examples."""
    cfg, nodes = "examples/topolabel.yaml", "examples/nodes.yaml"
    common = ["--config", cfg, "--snapshot", snapshot, "--nodes", nodes]
    out: dict[str, list[str]] = {
        "discover": ["discover", "--config", cfg, "--nodes", nodes],
        "discover (teams)": ["discover", "--config", "examples/teams.yaml", "--nodes", nodes],
        "plan": ["plan", *common],
        "verify": ["verify", "--config", cfg, "--nodes", nodes, "--against", snapshot],
        "show": ["show", *common],
        "show --level block": ["show", *common, "--level", "block"],
        "kueue": ["kueue", *common, "--output-dir", "kueue-{columns}"],  # each width writes its own files
        "config check": ["config", "check", cfg, "examples/teams.yaml", bad],
        "help sources": ["help", "sources"],
        # a node whose HCA runs at half rate, another's port record the test wrote (snapshot_of_examples' sysfs)
        "health": ["health", "--config", "health.yaml", "--nodes", nodes, "--sysfs", f"{SLOW}=sys-slow",
                   "--sysfs", "gke-a3-b00-s00-n001=sys-ok"],
    }
    # 41 pods of 8 GPUs in one block: over the queue's quota, so Kueue's message, why and advice
    out["fit too-big.yaml"] = ["fit", "too-big.yaml", *common]
    out["capacity"] = ["capacity", "--size", "8", "--gpus", "8", "--within", "block", "--queue", "gpu",
                       "--namespace", "ml-research", *common]
    for job in JOBS:
        out[f"fit {job.name}"] = ["fit", f"examples/jobs/{job.name}", *common]
        out[f"job check {job.name}"] = ["job", "check", f"examples/jobs/{job.name}", "--snapshot", snapshot]
    return out


def test_every_command_fits_80_columns_without_breaking_a_token(tmp_path: Path, capsys, monkeypatch) -> None:
    snapshot = snapshot_of_examples(tmp_path, capsys, monkeypatch)
    (tmp_path / "bad.yaml").write_text("source: {type: labels, prest: gke}\nplan: {maxChangeFraction: 3}\n")
    (tmp_path / "too-big.yaml").write_text(yaml.safe_dump(TOO_BIG))
    checked = 0  # config check's problems are output for people too
    for name, args in commands(snapshot, "bad.yaml").items():
        narrow_code, narrow = run(capsys, monkeypatch, WIDTH, args)
        wide_code, wide = run(capsys, monkeypatch, 1000, args)
        assert narrow_code == wide_code, (name, narrow)
        long = [line for line in narrow.splitlines() if len(line) > WIDTH]
        assert not long, f"{name}: lines over {WIDTH} columns: {long}"
        assert broken(narrow, wide) == [], f"{name}: tokens broken at {WIDTH} columns:\n{narrow}"
        checked += 1
    assert checked == 12 + 2 * len(JOBS)


def test_apply_fits_80_columns_with_its_details(capsys, monkeypatch, tmp_path: Path) -> None:
    """apply prints its result first, and with -v the plan's lines: against kmock, a Kubernetes mock."""
    items = yaml.safe_load((EXAMPLES / "nodes.yaml").read_text())["items"]
    snapshot = snapshot_of_examples(tmp_path, capsys, monkeypatch)
    outputs = {}
    for columns in (WIDTH, 1000):
        with MockCluster(kueue=False, labeler_crd=False) as cluster:
            cluster.create_nodes(items)
            args = ["apply", "--config", "examples/topolabel.yaml", "--snapshot", snapshot,
                    "--kubeconfig", str(cluster.kubeconfig(tmp_path)), "-v"]
            code, outputs[columns] = run(capsys, monkeypatch, columns, args)
            assert code == 0, outputs[columns]
    narrow = outputs[WIDTH]
    assert narrow.splitlines()[0] == "wrote 64 node(s), 1 unchanged, 0 failed, 0 retried"
    assert "gke-a3-b00-s00-n000  +block=30e6" in narrow
    assert max(len(line) for line in narrow.splitlines()) <= WIDTH
    assert broken(narrow, outputs[1000]) == []


def test_the_check_sees_a_broken_token() -> None:
    """What the tests above rely on: a word cut across lines, or cut at one end, is caught; a middle
    shortening is not."""
    wide = "PyTorchJob/llama-finetune   warning   metadata.labels"
    assert broken("PyTorchJob/lla\nma-finetune warning metadata.labels", wide) == ["PyTorchJob/lla", "ma-finetune"]
    assert broken("PyTorchJob/llama-fine… warning", wide) == ["PyTorchJob/llama-fine…"]
    assert broken("PyTor…netune warning", wide) == []
