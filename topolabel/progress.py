"""Where progress goes: a rich bar on stderr when it is a terminal (nothing otherwise, so pipes and CI logs
stay clean), and log lines at a sane interval for the operator."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

from labeler.progress import Progress, Task, quiet

if TYPE_CHECKING:  # only the operator logs progress; the CLI does not import logging
    import logging


def terminal(stream: TextIO | None = None) -> Progress:
    """A bar per task on `stream` (stderr) when it is a terminal; else the quiet default."""
    stream = stream or sys.stderr
    if not stream.isatty():
        return quiet

    def start(what: str, total: int | None = None) -> Task:
        return BarTask(what, total, stream)

    return start


class BarTask:
    """One rich progress bar (a spinner without a total), removed from the screen when it closes."""

    def __init__(self, what: str, total: int | None, stream: TextIO) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bars, SpinnerColumn, TextColumn, \
            TimeElapsedColumn

        columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}")]
        if total is not None:
            columns += [BarColumn(), MofNCompleteColumn()]
        self.bars = Bars(*columns, TimeElapsedColumn(), console=Console(file=stream), transient=True)
        self.task = self.bars.add_task(what, total=total)
        self.bars.start()

    def advance(self, done: int = 1) -> None:
        self.bars.advance(self.task, done)

    def close(self) -> None:
        self.bars.stop()


def logged(log: logging.Logger, every: float = 10.0) -> Progress:
    """Log lines: when a task starts, at most every `every` seconds while it runs, and when it ends."""

    def start(what: str, total: int | None = None) -> Task:
        return LoggedTask(log, what, total, every)

    return start


class LoggedTask:
    def __init__(self, log: logging.Logger, what: str, total: int | None, every: float,
                 clock: Any = time.monotonic) -> None:
        self.log, self.what, self.total, self.every, self.clock = log, what, total, every, clock
        self.done = 0
        self.started = self.last = clock()
        log.info("%s: started%s", what, f" ({total} to do)" if total is not None else "")

    def advance(self, done: int = 1) -> None:
        self.done += done
        now = self.clock()
        if now - self.last >= self.every:
            self.last = now
            self.log.info("%s: %s done, %.0fs so far", self.what, self._count(), now - self.started)

    def close(self) -> None:
        self.log.info("%s: %s done in %.1fs", self.what, self._count(), self.clock() - self.started)

    def _count(self) -> str:
        return f"{self.done}/{self.total}" if self.total is not None else str(self.done)

