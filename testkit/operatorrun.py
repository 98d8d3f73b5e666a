"""Running `topolabel run` in tests: in a thread (to read its metrics) or as a process (to kill it)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from testkit.environment import ROOT
from topolabel.operator.handlers import Operator
from topolabel.operator.settings import RunOptions


def wait_until(check: Callable[[], Any], timeout: float, what: str | Callable[[], str], every: float = 0.1) -> Any:
    """Poll `check` until it returns something true; fail naming `what` after `timeout` seconds (a callable
    `what` is asked then, so the failure can say what was seen meanwhile)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            said = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {said} (last: {value!r})")
        time.sleep(every)


class InThread:
    """`with InThread(opts) as op:` runs an operator on its own event loop and stops it on exit."""

    def __init__(self, opts: RunOptions) -> None:
        self.operator = Operator(opts)
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="operator", daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(self.operator.run(stop_flag=self.stop))
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            self.error = exc

    def __enter__(self) -> "InThread":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join(60)
        assert not self.thread.is_alive(), "the operator did not stop"

    def sample(self, name: str, **labels: str) -> float:
        return self.operator.metrics.registry.get_sample_value(name, labels) or 0.0

    def passes(self, scope: str = "full") -> int:
        return int(self.sample("topolabel_syncs_total", scope=scope))

    def wait_passes(self, count: int, scope: str = "full", timeout: float = 60) -> None:
        wait_until(lambda: self.error or self.passes(scope) >= count, timeout, f"{count} {scope} pass(es)")
        assert self.error is None, f"the operator failed: {self.error!r}"

    @property
    def conditions(self) -> dict[str, tuple[str, str]]:
        controller = self.operator.controller
        items = controller.conditions.items if controller else {}
        return {t: (c.status, c.reason) for t, c in items.items()}


def spawn(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    """`topolabel run ARGS` as a child process (its own session, so it can be killed outright)."""
    out = open(log, "ab")
    return subprocess.Popen([sys.executable, "-m", "topolabel.cli", "run", *args], cwd=ROOT, stdout=out,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL: no cleanup runs, as when a node dies under the operator."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            kill(proc)
