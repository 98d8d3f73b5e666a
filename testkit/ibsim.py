"""Run the real `ibnetdiscover` against `ibsim` simulating a generated fabric.

`ibsim` serves the fabric over a Unix socket named by IBSIM_SOCKNAME (unique per simulator, so tests run
side by side); `ibnetdiscover` reaches it through the umad2sim preload library. ibnetdiscover hangs without
a simulator, so it always runs under `timeout`; the simulator is stopped by its PID.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import time
import uuid
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Callable, Iterator

import pytest

from hack.ibfabric import Fabric

PRELOAD = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
READY = "Network simulator ready"

needs_ibsim = pytest.mark.skipif(
    not (shutil.which("ibsim") and shutil.which("ibnetdiscover") and Path(PRELOAD).exists()),
    reason="needs Debian packages ibsim-utils and infiniband-diags (.ci/apt-packages)")
needs_opensm = pytest.mark.skipif(not shutil.which("opensm"), reason="needs Debian package opensm (.ci/apt-packages)")


class Simulator:
    """A running ibsim: `discover()` runs ibnetdiscover against it; `unlink()` cuts a cable live."""

    def __init__(self, proc: subprocess.Popen, sockname: str, sim_host: str) -> None:
        self.proc, self.sockname, self.sim_host = proc, sockname, sim_host
        self.output = ""

    def env(self) -> dict[str, str]:
        """What a process needs to reach this simulator (ibnetdiscover, or `topolabel --run`)."""
        return {**os.environ, "LD_PRELOAD": PRELOAD, "IBSIM_SOCKNAME": self.sockname, "SIM_HOST": self.sim_host}

    def discover(self, *args: str, timeout: int = 60) -> str:
        result = subprocess.run(["timeout", str(timeout), "ibnetdiscover", *args], env=self.env(),
                                capture_output=True, text=True, check=False)
        assert result.returncode == 0, f"ibnetdiscover {' '.join(args)}: exit {result.returncode}: {result.stderr[-500:]}"
        return result.stdout

    def unlink(self, node_id: str, port: int) -> None:
        """Cut a cable through ibsim's console, as an operator pulling it would."""
        self.command(f'Unlink "{node_id}"[{port}]')

    def relink(self, node_id: str, port: int) -> None:
        """Put a cable cut by `unlink` back."""
        self.command(f'ReLink "{node_id}"[{port}]')

    def set_counter(self, node_id: str, port: int, counter: str, value: int) -> None:
        """Set a port's PMA counter (`PortXmitDiscards`, `LinkDownedCounter`, ...), as errors on the link would."""
        said = self.command(f'PerformanceSet "{node_id}"[{port}] PortCounters.{counter}={value}')
        assert "has been set" in said, said

    def command(self, line: str) -> str:
        """One console command; its answer (up to the next prompt), which must not be an error."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{line}\n".encode())
        self.proc.stdin.flush()
        said = self.wait_for("sim> ", 10)
        assert not any(line.lstrip().startswith("#") for line in said.splitlines()), said  # ibsim's errors
        return said

    def subnet_manager(self, directory: Path, timeout: int = 120) -> None:
        """One sweep of OpenSM (`opensm --once`): LIDs and routes, which PMA queries (ibqueryerrors) need."""
        env = {**self.env(), "OSM_TMP_DIR": str(directory), "OSM_CACHE_DIR": str(directory)}
        result = subprocess.run(["timeout", str(timeout), "opensm", "--once", "-s", "0", "-f",
                                 str(directory / "opensm.log")], env=env, capture_output=True, text=True, check=False)
        assert result.returncode == 0, f"opensm --once: exit {result.returncode}: {result.stderr[-500:]}"

    def query_errors(self, timeout: int = 120) -> str:
        """The real `ibqueryerrors` against this fabric (exit 1 means it found errors)."""
        result = subprocess.run(["timeout", str(timeout), "ibqueryerrors", "--skip-sl"], env=self.env(),
                                capture_output=True, text=True, check=False)
        assert result.returncode in (0, 1), f"ibqueryerrors: exit {result.returncode}: {result.stderr[-500:]}"
        return result.stdout

    def wait_for(self, text: str, seconds: float) -> str:
        """ibsim's output up to and including `text`; fails after `seconds` without it.

        Reads the pipe's file descriptor directly: a buffered reader could hold the awaited line while
        select() reports nothing more to read.
        """
        assert self.proc.stdout is not None
        deadline = time.monotonic() + seconds
        while text not in self.output and time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            chunk = os.read(self.proc.stdout.fileno(), 65536) if ready else b""
            if ready and not chunk:
                break  # ibsim exited
            self.output += chunk.decode(errors="replace")
        head, sep, tail = self.output.partition(text)
        if not sep:
            raise AssertionError(f"ibsim did not say {text!r} in {seconds} s; it said: {self.output[-1000:]}")
        self.output = tail
        return head + sep


@contextmanager
def simulate(fabric: Fabric, directory: Path, console: bool = False, ready_seconds: float = 120) -> Iterator[Simulator]:
    """Start ibsim on `fabric`'s net file; with `console`, its stdin takes commands (see `unlink`)."""
    net = directory / f"fabric-{uuid.uuid4().hex[:8]}.net"
    net.write_text(fabric.net_text())
    nodes, switches, ports = fabric.counts()
    sockname = f"topolabel-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    argv = ["stdbuf", "-oL", "ibsim", "-s", *([] if console else ["-n"]),
            "-N", str(nodes), "-S", str(switches), "-P", str(ports), str(net)]
    proc = subprocess.Popen(argv, env={**os.environ, "IBSIM_SOCKNAME": sockname},
                            stdin=subprocess.PIPE if console else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        sim = Simulator(proc, sockname, fabric.first_ca())
        sim.wait_for(READY, ready_seconds)
        if console:
            sim.wait_for("sim> ", 10)  # the first prompt, so each command's answer ends at the next one
        yield sim
    finally:
        proc.kill()
        proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()
        if proc.stdin:
            proc.stdin.close()


@pytest.fixture
def ibsim(tmp_path: Path) -> Iterator[Callable[..., Simulator]]:
    """`ibsim(fabric, console=False)` starts a simulator for the test; all are stopped when it ends."""
    with ExitStack() as stack:
        yield lambda fabric, console=False: stack.enter_context(simulate(fabric, tmp_path, console))
