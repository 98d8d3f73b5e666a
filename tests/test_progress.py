"""Progress: a bar on a terminal, nothing into a pipe, log lines at an interval for the operator."""

from __future__ import annotations

import io
import logging
import os

import pytest

from labeler.cluster.apply import apply_plan
from labeler.topology.plan import NodeChange, Plan
from topolabel.progress import LoggedTask, terminal


class Counting:
    def __init__(self) -> None:
        self.started: list[tuple[str, int | None]] = []
        self.done = 0
        self.closed = 0

    def __call__(self, what: str, total: int | None = None) -> "Counting":
        self.started.append((what, total))
        return self

    def advance(self, done: int = 1) -> None:
        self.done += done

    def close(self) -> None:
        self.closed += 1


def test_apply_counts_every_change_once_and_closes_even_with_failures() -> None:
    changes = [NodeChange(f"n{i}", {"k": "v"}, []) for i in range(50)]
    plan = Plan(changes, 0, [], len(changes))
    progress = Counting()

    def patch(name: str, body: dict) -> None:
        if name == "n7":
            raise RuntimeError("boom")

    result = apply_plan(plan, patch, concurrency=4, progress=progress)  # one node's surprise is that node's failure
    assert result.failed == {"n7": "RuntimeError: boom"} and progress.done == 50 and progress.closed == 1
    progress = Counting()
    apply_plan(Plan([c for c in changes if c.node != "n7"], 0, [], 49), patch, concurrency=4,
               progress=progress)
    assert progress.started == [("writing labels", 49)] and progress.done == 49 and progress.closed == 1


def test_terminal_progress_is_silent_into_a_pipe_and_draws_on_a_tty() -> None:
    pipe = io.StringIO()
    task = terminal(pipe)("writing labels", 3)
    task.advance(3)
    task.close()
    assert pipe.getvalue() == ""
    main, tty = os.openpty()
    with os.fdopen(tty, "w") as stream:
        task = terminal(stream)("writing labels", 3)
        task.advance(2)
        task.close()
    drawn = b""
    while True:  # everything rich wrote, in as many reads as the pty hands it over
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: the writing side is closed and drained
            break
        if not chunk:
            break
        drawn += chunk
    os.close(main)
    assert "writing labels" in drawn.decode(errors="replace")


def test_logged_progress_logs_start_at_most_every_interval_and_the_end(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    caplog.set_level(logging.INFO)
    task = LoggedTask(logging.getLogger("t"), "writing labels", 1000, every=10.0, clock=lambda: now[0])
    for _ in range(1000):
        now[0] += 0.125  # 125 s in all: a line at 10, 20, ... 120 s
        task.advance()
    task.close()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "writing labels: started (1000 to do)"
    assert len(lines) == 1 + 12 + 1
    assert lines[-1].startswith("writing labels: 1000/1000 done in 125.0s")
