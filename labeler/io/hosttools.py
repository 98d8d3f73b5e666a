"""Running a program of this host (ibnetdiscover, lldpcli, nvidia-smi, a kubeconfig's credential plugin) under
a timeout and a bound on what it prints.

Such tools hang without the fabric or daemon they talk to, so there is always a timeout, and each way of
failing becomes one `SourceError` line that says what to do. The tool runs in a session of its own and a
timeout kills its whole process group: a wrapper script's children (a `timeout`, a shell pipeline) would
otherwise live on holding the output pipes, and the caller would wait on them for ever. Its output is read as
it comes, at most `max_bytes` of it: a tool that floods stdout is stopped before it fills the caller's memory
(the agent runs in 192 MiB), and of stderr only the end is kept, for the error line.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from typing import Callable, Mapping, Sequence

from ..errors import SourceError

REAP_SECONDS = 5.0  # after the kill, how long to wait for the tool to go
MAX_OUTPUT = 16 << 20  # stdout kept by default; callers that expect more (ibnetdiscover) say so
STDERR_KEPT = 1 << 16  # the end of stderr, for the error line
CHUNK = 1 << 16


def run_tool(argv: Sequence[str], timeout: float, *, missing: str, stalled: str = "", failed: str = "",
             clean: Callable[[str], str] = str.strip, ok: Sequence[int] = (0,), max_bytes: int = MAX_OUTPUT,
             env: Mapping[str, str] | None = None, cwd: str | None = None, interactive: bool = False) -> str:
    """The tool's stdout. `missing`, `stalled` and `failed` are hints added to the matching error;
    `clean` tidies the last stderr line (e.g. drops a log prefix) before it is shown; `ok` are the exit
    statuses that are answers (ibqueryerrors exits 1 when it found errors). `interactive`: the tool shares this
    process's stdin and stderr (a credential plugin asking to log in) instead of none and a pipe."""
    command = " ".join(argv)
    try:
        proc = subprocess.Popen(list(argv), stdin=None if interactive else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=None if interactive else subprocess.PIPE,
                                start_new_session=True, env=None if env is None else dict(env), cwd=cwd)
    except FileNotFoundError:
        raise SourceError(f"{argv[0]}: not found; {missing}") from None
    except OSError as exc:  # not executable, a directory
        raise SourceError(f"{argv[0]}: cannot run: {exc.strerror or exc}") from None
    try:
        out, err = _read(proc, time.monotonic() + timeout, max_bytes, command)
    except _Stalled:
        _kill_group(proc)
        raise SourceError(f"{command}: no answer within {timeout:g} s" + (f" ({stalled})" if stalled else "")) from None
    except BaseException:  # too much output, or interrupted (a signal, Ctrl-C): leave no tool behind
        _kill_group(proc)
        raise
    stdout, stderr = (data.decode("utf-8", errors="replace") for data in (out, err))
    if proc.returncode not in ok:
        lines = stderr.strip().splitlines() or stdout.strip().splitlines()[-1:] or ["no error output"]
        raise SourceError(f"{command}: exit {proc.returncode}: {clean(lines[-1])[:500]}" + (f" ({failed})" if failed else ""))
    return stdout


class _Stalled(Exception):
    """The deadline passed before the tool finished."""


def _read(proc: subprocess.Popen[bytes], deadline: float, max_bytes: int, command: str) -> tuple[bytes, bytes]:
    """stdout (at most `max_bytes`) and the end of stderr, until both close and the tool exits; `_Stalled`
    at the deadline, a `SourceError` when stdout runs past its bound."""
    out, err = bytearray(), bytearray()
    with selectors.DefaultSelector() as selector:
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                selector.register(stream, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Stalled
            for key, _ in selector.select(left):
                chunk = os.read(key.fd, CHUNK)
                if not chunk:
                    selector.unregister(key.fileobj)
                elif key.fileobj is proc.stdout:
                    out += chunk
                    if len(out) > max_bytes:
                        raise SourceError(f"{command}: printed more than {max_bytes >> 20 or 1} MiB; stopped")
                else:
                    err += chunk
                    del err[:-STDERR_KEPT]
    try:
        proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:  # its pipes closed, but it has not exited
        raise _Stalled from None
    return bytes(out), bytes(err)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the tool and everything it started, then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    try:
        proc.wait(REAP_SECONDS)
    except subprocess.TimeoutExpired:  # it left its group: kill it alone
        proc.kill()
        proc.wait()
