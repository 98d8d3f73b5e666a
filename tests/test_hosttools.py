"""Host tools run under a timeout that ends the whole process group, and fail as one line."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from labeler.errors import SourceError
from labeler.io.hosttools import run_tool


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper does not count)."""
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in state


def test_a_timeout_kills_the_tools_children_too(tmp_path: Path) -> None:
    """A wrapper whose child holds the output pipe: killing the wrapper alone would leave the caller waiting."""
    script = tmp_path / "ibnetdiscover"
    script.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > {tmp_path / 'child'}\nwait\n")
    script.chmod(0o755)
    started = time.monotonic()
    with pytest.raises(SourceError, match=r"ibnetdiscover: no answer within 1 s \(no subnet manager\?\)$"):
        run_tool([str(script)], 1, missing="install it", stalled="no subnet manager?")
    assert time.monotonic() - started < 10
    child = int((tmp_path / "child").read_text())
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)


def test_failures_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"^no-such-tool: not found; install it$"):
        run_tool(["no-such-tool"], 5, missing="install it")
    script = tmp_path / "tool"
    script.write_text("#!/bin/sh\necho starting >&2\necho 'ibwarn: cannot open umad port' >&2\nexit 3\n")
    script.chmod(0o755)
    with pytest.raises(SourceError, match=r"tool: exit 3: ibwarn: cannot open umad port \(is it up\?\)$"):
        run_tool([str(script)], 5, missing="x", failed="is it up?")
    assert run_tool(["echo", "fabric"], 5, missing="x") == "fabric\n"


def test_a_file_that_cannot_run_and_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    not_executable = tmp_path / "data.txt"
    not_executable.write_text("x")
    with pytest.raises(SourceError, match=r"data.txt: cannot run: Permission denied$"):
        run_tool([str(not_executable)], 5, missing="-")
    assert run_tool(["printf", "caf\\351\\n"], 5, missing="-") == "caf\ufffd\n"
