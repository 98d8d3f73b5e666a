"""Output that cannot be written: a full disk is one line and exit 2; a reader that went away (a closed pipe)
ends the command quietly with 0, whatever it would have answered, never "differs" (1) or "does not fit" (1).

The CLI runs in-process with stdout on a real file descriptor: /dev/full, or a pipe whose reading end is closed.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

from testkit.environment import EXAMPLES
from topolabel.cli import main

CONFIG, NODES, JOB = EXAMPLES / "topolabel.yaml", EXAMPLES / "nodes.yaml", EXAMPLES / "jobs" / "pytorchjob.yaml"


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("snap") / "snap.json"
    with open(path, "w") as out:
        run(["discover", "--config", str(CONFIG), "--nodes", str(NODES), "-o", "json"], out)
    return path


def commands(snapshot: Path) -> dict[str, list[str]]:
    """One of each way of printing: --version (argparse), compact JSON (orjson to the buffer), rich tables."""
    return {"version": ["--version"],
            "discover json": ["discover", "--config", str(CONFIG), "--nodes", str(NODES), "-o", "json"],
            "fit table": ["fit", str(JOB), "--config", str(CONFIG), "--snapshot", str(snapshot), "--nodes", str(NODES)],
            "verify table": ["verify", "--snapshot", str(snapshot), "--against", str(snapshot)]}


def run(argv: list[str], out: io.TextIOBase) -> int:
    saved, sys.stdout = sys.stdout, out
    try:
        try:
            return main(argv)
        except SystemExit as exc:  # --version
            return int(exc.code or 0)
    finally:
        sys.stdout = saved


@pytest.fixture
def closed_pipe() -> Iterator[io.TextIOWrapper]:
    read, write = os.pipe()
    os.close(read)
    with os.fdopen(write, "w") as out:
        yield out


@pytest.mark.parametrize("what", ["version", "discover json", "fit table", "verify table"])
def test_a_closed_pipe_ends_quietly_with_0(what: str, snapshot: Path, closed_pipe: io.TextIOWrapper,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert run(commands(snapshot)[what], closed_pipe) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("what", ["version", "discover json", "fit table", "verify table"])
def test_a_full_disk_is_one_line_and_exit_2(what: str, snapshot: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with open("/dev/full", "w") as full:
        code = run(commands(snapshot)[what], full)
    err = capsys.readouterr().err
    assert code == 2 and err.endswith(": error: cannot write the output: No space left on device\n"), err
    assert len(err.splitlines()) == 1 and "internal error" not in err


def test_a_huge_message_is_cut_before_it_is_escaped() -> None:
    """A parser's error quoting 300 MB (a billion-laughs kubeconfig) once took minutes and printed it all."""
    from topolabel.output import MAX_MESSAGE, one_line

    line = one_line("\n" * 300_000_000)
    assert line == "\\n" * (MAX_MESSAGE // 2) + f"... ({300_000_000 - MAX_MESSAGE // 2} more characters)"
    assert one_line("a\tb") == "a\\tb" and one_line("x" * MAX_MESSAGE) == "x" * MAX_MESSAGE
