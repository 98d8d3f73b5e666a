"""Host tools run under a timeout that kills everything they started, and fail as one line."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from labeler.errors import SourceError
from labeler.hosttools import run_tool


def script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "tool.sh"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def test_a_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    tool = script(tmp_path, f"sleep 600 &\necho $! > {pidfile}\nsleep 600\n")  # the child holds stdout open
    start = time.monotonic()
    with pytest.raises(SourceError, match=r"tool.sh: no answer within 1 s \(is it stuck\?\)"):
        run_tool([tool], 1.0, missing="-", stalled="is it stuck?")
    assert time.monotonic() - start < 5
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child), "the tool's own child outlived the timeout"


def test_failures_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no-such-tool: not found; install it"):
        run_tool(["no-such-tool"], 5, missing="install it")
    not_executable = tmp_path / "data.txt"
    not_executable.write_text("x")
    with pytest.raises(SourceError, match="data.txt: cannot run: Permission denied"):
        run_tool([str(not_executable)], 5, missing="-")
    with pytest.raises(SourceError, match=r"exit 3: last line \(hint\)"):
        run_tool([script(tmp_path, "echo first >&2\necho 'last line' >&2\nexit 3\n")], 5, missing="-", failed="hint")
    assert run_tool([script(tmp_path, "printf 'caf\\351\\n'\n")], 5, missing="-") == "caf\ufffd\n"
