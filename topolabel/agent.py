"""The agent: publish what only the node itself can see as annotations on its own Node, and nothing else.

It runs in a hostNetwork DaemonSet beside lldpd. Each round runs `lldpcli -f json0 show neighbors`, turns
the output into the compact facts JSON (`providers.lldp.facts`), optionally asks `nvidia-smi` for the
node's NVLink domain (`providers.gpu_clique`) and reads its InfiniBand ports for fabric health
(`PortWatch`), and sends one merge patch to its own Node when the values changed, or when `resync` seconds
passed (to restore an annotation someone removed). It never reads Nodes, so `patch` on nodes is all its RBAC
grants; an admission policy keeps it to its own Node.
"""

from __future__ import annotations

import random
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Generic, Mapping, Sequence, TextIO, TypeVar

from kubernetes.client.exceptions import ApiException

from labeler.cluster.kube import api_error
from labeler.errors import TopolabelError
from labeler.io.documents import load_json
from labeler.io.hosttools import run_tool
from providers.infiniband.portrecord import encode, make_record
from providers.infiniband.sysfs import read_port_health
from providers.lldp.facts import Neighbor, parse_json0

LLDPCLI_TIMEOUT = 30.0
LLDPCLI_MAX_BYTES = 4 << 20  # json0 of 256 neighbours (the most the facts hold) is well under 1 MiB
_LOG_PREFIX = re.compile(r"^\S+ \[\w+/\w+\] ")  # lldpcli's "2026-11-30T02:08:31 [WARN/control] "


def lldpcli_command(lldpcli: str = "lldpcli", socket: str | None = None) -> list[str]:
    """The command that prints the neighbours; `socket` is lldpd's control socket when not the default."""
    return [lldpcli, *(["-u", socket] if socket else []), "-f", "json0", "show", "neighbors"]


def read_neighbors(command: Sequence[str], timeout: float = LLDPCLI_TIMEOUT) -> tuple[Neighbor, ...]:
    """Run lldpcli and parse its json0 output like any document (bounded size and nesting); failures are
    one-line errors, which the loop logs before trying again."""
    out = run_tool(command, timeout, missing="install lldpd, or give --lldpcli", failed="is lldpd running?",
                   clean=lambda line: _LOG_PREFIX.sub("", line.strip()), max_bytes=LLDPCLI_MAX_BYTES)
    return parse_json0(load_json(out, "lldpcli output"), "lldpcli output")


def annotation_patch(values: Mapping[str, str | None]) -> dict[str, Any]:
    """The merge patch that sets (or, for None, removes) these annotations and touches nothing else."""
    return {"metadata": {"annotations": dict(values)}}


class PortWatch:
    """This node's InfiniBand ports, read every round: the record (`providers.infiniband.portrecord`) of their
    states, rates and how much their error counters rose since the round before; None without any port."""

    def __init__(self, sysfs: str, counters: Sequence[str], clock: Callable[[], float] = time.time) -> None:
        self.sysfs, self.counters, self.clock = sysfs, tuple(counters), clock
        self.before: dict[str, dict[str, int]] | None = None
        self.at = 0.0

    def __call__(self) -> str | None:
        ports = read_port_health(self.sysfs, self.counters)
        now = self.clock()
        record = make_record(ports, self.before, now - self.at, now)
        self.before, self.at = {p.name: p.counters for p in ports}, now
        return encode(record) if ports else None


ValueT = TypeVar("ValueT")


@dataclass
class Agent(Generic[ValueT]):
    """One node's publisher: `collect` gives the value (an annotation's text, or the values of several
    annotations), `publish` writes it to the Node."""

    collect: Callable[[], ValueT]
    publish: Callable[[ValueT], None]
    resync: float = 3600.0
    clock: Callable[[], float] = time.monotonic
    last: ValueT | None = field(default=None, init=False)
    written_at: float = field(default=float("-inf"), init=False)

    def round(self) -> bool:
        """Collect, and publish when the value changed or a resync is due; True when it wrote."""
        value = self.collect()
        now = self.clock()
        if value == self.last and now - self.written_at < self.resync:
            return False
        self.publish(value)
        self.last, self.written_at = value, now
        return True


def run(agent: Agent[Any], interval: float, once: bool, log: TextIO = sys.stderr,
        sleep: Callable[[float], None] = time.sleep, alive: Path | None = None) -> int:
    """Rounds every `interval` seconds (with jitter, so a DaemonSet does not patch in step).

    With `once`, one round whose errors propagate (the CLI prints them); otherwise an error is logged and
    the next round tries again. After every round, finished or failed, `alive` is touched: the DaemonSet's
    liveness probe restarts an agent whose loop stopped turning (every call it makes has a timeout, so only
    a bug can stop it).
    """
    while True:
        try:
            wrote = agent.round()
            print(f"topolabel agent: {'published' if wrote else 'unchanged'}", file=log, flush=True)
        except TopolabelError as exc:
            if once:
                raise
            print(f"topolabel agent: error: {exc}", file=log, flush=True)
        except ApiException as exc:
            if once:
                raise
            print(f"topolabel agent: Kubernetes API error: {api_error(exc)}", file=log, flush=True)
        if alive is not None:
            alive.touch()
        if once:
            return 0
        sleep(interval * random.uniform(0.9, 1.1))
