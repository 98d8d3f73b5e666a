"""Running a diagnostic tool of this host (ibnetdiscover, lldpcli, nvidia-smi) under a timeout.

Such tools hang without the fabric or daemon they talk to, so there is always a timeout, and each way of
failing becomes one `SourceError` line that says what to do. The tool runs in a process group of its own
and a timeout kills the whole group: a wrapper script's children (a `timeout`, a shell pipeline) would
otherwise live on holding the output pipes, and the caller would wait on them for ever.
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Callable, Sequence

from .errors import SourceError

REAP_SECONDS = 5.0  # after the kill, how long to wait for the pipes to close


def run_tool(argv: Sequence[str], timeout: float, *, missing: str, stalled: str = "", failed: str = "",
             clean: Callable[[str], str] = str.strip, ok: Sequence[int] = (0,)) -> str:
    """The tool's stdout. `missing`, `stalled` and `failed` are hints added to the matching error;
    `clean` tidies the last stderr line (e.g. drops a log prefix) before it is shown; `ok` are the exit
    statuses that are answers (ibqueryerrors exits 1 when it found errors)."""
    command = " ".join(argv)
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, encoding="utf-8", errors="replace", start_new_session=True)
    except FileNotFoundError:
        raise SourceError(f"{argv[0]}: not found; {missing}") from None
    except OSError as exc:  # not executable, a directory
        raise SourceError(f"{argv[0]}: cannot run: {exc.strerror or exc}") from None
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise SourceError(f"{command}: no answer within {timeout:g} s" + (f" ({stalled})" if stalled else "")) from None
    except BaseException:  # interrupted (a signal, Ctrl-C): leave no tool behind
        _kill_group(proc)
        raise
    if proc.returncode not in ok:
        lines = stderr.strip().splitlines() or stdout.strip().splitlines() or ["no error output"]
        raise SourceError(f"{command}: exit {proc.returncode}: {clean(lines[-1])}" + (f" ({failed})" if failed else ""))
    return stdout


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the tool and everything it started, then reap it (its pipes close with the last of them)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.communicate(timeout=REAP_SECONDS)
    except subprocess.TimeoutExpired:  # a child that left the group still holds a pipe: stop reading
        proc.kill()
        proc.wait()
