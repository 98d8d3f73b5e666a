"""Progress of long operations (many regions, thousands of patches), reported through what the application
plugs in: a bar on a terminal, log lines in the operator, nothing by default. The core and the sources never
print; they only count.
"""

from __future__ import annotations

from typing import Callable, Protocol


class Task(Protocol):
    """One counted operation: `advance` as parts finish; `close` when it ends (also on failure)."""

    def advance(self, done: int = 1) -> None: ...

    def close(self) -> None: ...


# what is being done, and how many parts it has (None when unknown: a spinner, not a bar)
Progress = Callable[[str, "int | None"], Task]


class QuietTask:
    def advance(self, done: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def quiet(what: str, total: int | None = None) -> Task:
    """The default: report nothing."""
    return QuietTask()
