"""How every benchmark measures a child process: wall time by the clock, CPU seconds and peak RSS by GNU time.

Not wait4/getrusage on our own child: a child's ru_maxrss starts at its parent's RSS when it forks (the
kernel keeps the larger of the old and new address space's high-water mark across exec; measured: a `true`
forked from a 400 MB Python reports 414 MB), and a benchmark's own process holds the fixture (moto, a fabric,
100,000 node objects). GNU time forks the measured program from its own small process.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Mapping, Sequence

GNU_TIME = "/usr/bin/time"
CHILD_TIMEOUT = 900  # seconds; measure() runs every child under `timeout`
ROOT = Path(__file__).resolve().parent.parent  # children run here, so `-m topolabel.cli` is this checkout's
SHIPPED = ("topolabel", "labeler", "providers", "kueue_config", "exporters")  # pyproject.toml's packages


@dataclass
class Run:
    """One whole child process: wall seconds, CPU seconds (user + system), peak RSS in MB, its output."""

    wall: float
    cpu: float
    rss_mb: float
    stdout: str = ""
    returncode: int = 0


def topolabel(*args: str) -> list[str]:
    """This checkout's `topolabel` command line (not an installed console script that may import another), its
    bytecode compiled first."""
    _compiled()
    return [sys.executable, "-m", "topolabel.cli", *args]


@functools.cache
def _compiled() -> None:
    """The shipped packages' bytecode, written as pip writes it when it installs them, so that a measured
    command starts as an installed topolabel does even where nothing writes bytecode (PYTHONDONTWRITEBYTECODE=1
    here): compiling every module it imports costs a discovery 0.06 CPU s (issue 33). Stale files only."""
    import compileall

    for package in SHIPPED:
        compileall.compile_dir(ROOT / package, quiet=1)


def _need_gnu_time() -> None:
    if not Path(GNU_TIME).exists():
        raise SystemExit(f"benchmarks need GNU time at {GNU_TIME} (Debian package time; .ci/apt-packages)")


class Timed:
    """A child started under GNU time, for runs the benchmark stops itself (the operator).

    `signal` reaches the measured program, not GNU time, which must live to write the figures."""

    def __init__(self, argv: Sequence[str], stdout: IO[bytes] | int | None = None, stderr: IO[bytes] | int | None = None,
                 env: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> None:
        _need_gnu_time()
        self._usage = tempfile.NamedTemporaryFile("r", prefix="gnu-time-")
        self.start = time.perf_counter()
        self.proc = subprocess.Popen([GNU_TIME, "-f", "%U %S %M", "-o", self._usage.name, *argv], stdout=stdout,
                                     stderr=stderr, env=dict(env) if env is not None else None, cwd=cwd or ROOT)

    def child_pid(self, timeout: float = 10.0) -> int:
        """The measured program's pid (GNU time's only child)."""
        deadline = time.monotonic() + timeout
        path = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        while time.monotonic() < deadline:
            pids = path.read_text().split() if path.exists() else []
            if pids:
                return int(pids[0])
            time.sleep(0.01)
        raise RuntimeError(f"{GNU_TIME} started no child")

    def signal(self, sig: int = signal.SIGTERM) -> None:
        os.kill(self.child_pid(), sig)

    def wait(self, timeout: float | None = None) -> Run:
        code = self.proc.wait(timeout)
        wall = time.perf_counter() - self.start
        fields = self._usage.read().split()
        self._usage.close()
        if len(fields) < 3:
            raise RuntimeError(f"{GNU_TIME} wrote no figures (exit {code})")
        user, system, rss_kb = fields[-3:]
        return Run(wall, float(user) + float(system), int(rss_kb) / 1024, returncode=code)


def measure(argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | Path | None = None,
            check: bool = True, stdout: Path | None = None) -> Run:
    """Run `argv` to its end under `timeout`; its stdout is returned, or written to `stdout` when given."""
    with tempfile.TemporaryFile() as err, open(stdout or os.devnull, "wb") if stdout else \
            tempfile.TemporaryFile() as out:
        timed = Timed(["timeout", str(CHILD_TIMEOUT), *argv], stdout=out, stderr=err, env=env, cwd=cwd)
        run = timed.wait()
        if check and run.returncode != 0:
            err.seek(0)
            raise SystemExit(f"{' '.join(argv[:4])} ... exited {run.returncode}: "
                             f"{err.read().decode(errors='replace')[-800:]}")
        if not stdout:
            out.seek(0)
            run.stdout = out.read().decode()
    return run


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a running process so far: a server the measured child talks to."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load() -> str:
    """The 1- and 5-minute load averages, to print beside figures taken on a shared machine."""
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (5 min {five:.1f}) on {os.cpu_count()} CPUs"
