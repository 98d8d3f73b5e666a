"""Issue 32's hostile inputs at the edges `labeler.io.documents` and `labeler.io.files` once missed, replayed: each ends
in an answer or one line with exit 2, within bounded time and memory (the kubeconfig and API-server cases are
tests/test_kubeconfig.py and tests/test_kube_faults.py; stdout tests/test_stdout.py; targets tests/test_writes.py).
"""

from __future__ import annotations

import io
import json
import os
import stat
import threading
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from labeler.errors import SourceError
from labeler.io.hosttools import run_tool
from testkit.environment import EXAMPLES
from testkit.ibcaptures import SMALL
from topolabel.agent import Agent, lldpcli_command, read_neighbors, run as run_agent
from topolabel.cli import main

CONFIG, NODES, JOB = EXAMPLES / "topolabel.yaml", EXAMPLES / "nodes.yaml", EXAMPLES / "jobs" / "pytorchjob.yaml"


def one_line(code: int, err: str, fragment: str) -> None:
    assert code == 2 and fragment in err and len(err.strip().splitlines()) == 1 and "internal error" not in err, err


def test_a_long_scalar_aliased_thousands_of_times_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Example 4: a 126 KiB GUID map (one 100 KB scalar aliased 10,000 times) became a 954 MiB snapshot."""
    guids = tmp_path / "guids.yaml"
    guids.write_text("big: &s " + "a" * 100_000 + "\nnode-a: [" + ", ".join(["*s"] * 10_000) + "]\n")
    fabric = tmp_path / "fabric.ibnet"
    fabric.write_text(SMALL)
    code = main(["discover", "--source", "infiniband", "--ibnetdiscover", str(fabric), "--guid-map", str(guids)])
    one_line(code, capsys.readouterr().err, "aliases expand the document to more than 8 times its size")


def script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_a_tool_that_floods_stdout_is_stopped_at_its_bound(tmp_path: Path) -> None:
    """Example 5: run_tool kept all of stdout, so a chatty tool OOM-killed the agent (192 MiB limit)."""
    with pytest.raises(SourceError, match=r"printed more than 1 MiB; stopped"):
        run_tool([script(tmp_path, "chatty", "yes\n")], 10, missing="", max_bytes=1 << 20)


def test_the_agent_stops_a_flooding_lldpcli_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["agent", "--once", "--print", "--lldpcli", script(tmp_path, "lldpcli", "yes\n")])
    one_line(code, capsys.readouterr().err, "printed more than 4 MiB; stopped")


@pytest.mark.parametrize("output", ['{"lldp": ' + "[" * 100_000 + "]" * 100_000 + "}",
                                    '{"lldp": [{"interface": [{"name": ' + "9" * 5000 + "}]}]}"],
                         ids=["100,000 deep", "a 5,000-digit integer"])  # ids: pytest puts them in the environment
def test_odd_lldpcli_json_is_a_logged_retry_not_the_end_of_the_loop(output: str, tmp_path: Path) -> None:
    """Example 5: 100,000-deep or 5,000-digit lldpcli JSON ended the agent's loop."""
    (tmp_path / "out.json").write_text(output)
    command = lldpcli_command(script(tmp_path, "lldpcli", f"cat {tmp_path / 'out.json'}\n"))
    rounds: list[float] = []

    def sleep(seconds: float) -> None:
        rounds.append(seconds)
        if len(rounds) == 3:
            raise KeyboardInterrupt  # three rounds done: the loop kept turning

    log = io.StringIO()
    with pytest.raises(KeyboardInterrupt):
        run_agent(Agent(lambda: str(read_neighbors(command)), lambda _: None), 1.0, False, log=log, sleep=sleep)
    lines = log.getvalue().splitlines()
    assert len(lines) == 3 and all(line.startswith("topolabel agent: error: lldpcli output: ") for line in lines), lines


@pytest.fixture
def pipe_path() -> Iterator[tuple[str, int]]:
    """A path that can be read once (as `<(...)` or /dev/stdin give): /dev/fd/N of a pipe's reading end."""
    read, write = os.pipe()
    yield f"/dev/fd/{read}", write
    os.close(read)


def feed(fd: int, data: bytes) -> None:
    def write() -> None:
        with os.fdopen(fd, "wb") as out:
            out.write(data)

    threading.Thread(target=write, daemon=True).start()


@pytest.mark.parametrize("as_json", [True, False])
def test_nodes_from_a_pipe_are_read_once(as_json: bool, pipe_path: tuple[str, int],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Example 6: `--nodes <(...)` was read twice (a peek, then the read): a wrong error or a hang."""
    path, fd = pipe_path
    feed(fd, json.dumps(yaml.safe_load(NODES.read_text())).encode() if as_json else NODES.read_bytes())
    assert main(["discover", "--source", "labels", "--preset", "gke", "--nodes", path, "-o", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["nodes"]) == 64


def test_pods_from_a_pipe_are_read_once(pipe_path: tuple[str, int], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    snap = tmp_path / "snap.json"
    assert main(["discover", "--config", str(CONFIG), "--nodes", str(NODES), "-o", "json"]) == 0
    snap.write_text(capsys.readouterr().out)
    path, fd = pipe_path
    pods = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
         "spec": {"nodeName": "gke-a3-b00-s00-n000", "containers": [{"name": "c", "resources": {"requests": {
             "nvidia.com/gpu": "8"}}}]}, "status": {"phase": "Running"}}]}
    feed(fd, json.dumps(pods).encode())
    code = main(["fit", str(JOB), "--config", str(CONFIG), "--snapshot", str(snap), "--nodes", str(NODES),
                 "--pods", path, "-o", "json"])
    assert code in (0, 1), capsys.readouterr().err
    assert "fits" in capsys.readouterr().out


@pytest.mark.parametrize("argv, fragment", [
    (["discover", "--source", "infiniband", "--run", "--ib-timeout", "inf"], "ib_timeout: must be a finite number"),
    (["discover", "--source", "infiniband", "--run", "--hca-pattern", "a{99999999999}"],
     "hca_pattern: not a regular expression: the repetition number is too large"),
    (["discover", "--source", "lldp", "--lldp-dir", "/nonexistent", "--mgmt-interfaces", "a{99999999999}"],
     "mgmt_interfaces: not a regular expression"),
    (["agent", "--interval", "inf"], "'inf' is not a positive number of seconds"),
    (["job", "annotate", str(JOB), "--queue", "", "--within", "block"], "--queue: '' is not a Kubernetes name"),
    (["job", "annotate", str(JOB), "--queue", "a\nb", "--within", "block"], "--queue: 'a\\nb' is not a Kubernetes name"),
    (["job", "annotate", str(JOB), "--queue", "q" * 300, "--within", "block"], "is 300 characters; at most 63"),
])
def test_odd_flags_are_one_line(argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Example 7: these were internal errors, or (--queue) accepted names the API server refuses."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own error: usage and one error line
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and fragment in err and "internal error" not in err, err
