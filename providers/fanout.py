"""Asking a cloud API about several regions, zones or projects at once: every answer and every failure.

Failures are collected, not raised at the first, so a source's one error can name every region or zone
that could not answer (and keep the traceback of a failure that is a bug, not an API's answer).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Hashable, Iterable, TypeVar

from labeler.progress import Progress, quiet

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def each(fn: Callable[[K], V], keys: Iterable[K], what: str, progress: Progress = quiet,
         workers: int = 16) -> tuple[dict[K, V], dict[K, Exception]]:
    """`fn(key)` for every key in a thread pool of at most `workers`: the answers and the failures by key, in
    the keys' sorted order. `what` names the work in progress reports (`aws: regions`)."""
    ordered = sorted(set(keys))  # type: ignore[type-var]
    answers: dict[K, V] = {}
    failures: dict[K, Exception] = {}
    task = progress(what, len(ordered))
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(ordered)))) as pool:
        futures = {key: pool.submit(fn, key) for key in ordered}
        for future in futures.values():
            future.add_done_callback(lambda _: task.advance())
        for key, future in futures.items():
            try:
                answers[key] = future.result()
            except Exception as exc:  # noqa: BLE001 - the caller decides what each one means
                failures[key] = exc
    task.close()
    return answers, failures
