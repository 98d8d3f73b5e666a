"""A node's InfiniBand ports as the agent publishes them for fabric health, and what they say about the node.

The agent (`topolabel agent --ib-health`) reads its ports from sysfs every round and publishes, on its own
Node, the annotation `topolabel.dev/ib-port-health`: each port's state, physical state, rate and the increase
of its error counters since the round before (`window` seconds), as compact JSON:

    {"v": 1, "at": 1764590400, "window": 300,
     "ports": [["mlx5_0", 1, 4, 5, 400, {}], ["mlx5_3", 1, 4, 5, 400, {"link_downed": 2}]]}

`at` (when the window ended, seconds since the epoch, to the millisecond) and `window` are there only when a counter rose: a
record whose ports did not change is the same text round after round, so the agent writes nothing, and a
window with errors is a new observation each time it is published (the operator counts each `at` once). Bounded: at most
`MAX_PORTS` ports and `MAX_CHARS` characters, which the agent's admission policy enforces too.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from labeler.errors import SourceError
from labeler.topology.isolation import Finding

from .sysfs import ACTIVE, PortHealth

ANNOTATION = "topolabel.dev/ib-port-health"
VERSION = 1
MAX_PORTS = 64
MAX_CHARS = 8192
LINK_UP = 5
STATES = {1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE"}
PHYS_STATES = {1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining", 5: "LinkUp",
               6: "LinkErrorRecovery", 7: "PhyTest"}


@dataclass(frozen=True)
class PortRecord:
    device: str
    port: int
    state: int
    phys_state: int
    rate: float
    increase: Mapping[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.device}/{self.port}"

    @property
    def up(self) -> bool:
        return self.state == ACTIVE and self.phys_state == LINK_UP


@dataclass(frozen=True)
class Record:
    window: float  # seconds the increases cover (0 when nothing rose)
    ports: tuple[PortRecord, ...]
    at: float | None = None  # when the window ended; only when some counter rose

    @property
    def active(self) -> int:
        return sum(1 for p in self.ports if p.up)


def make_record(ports: Sequence[PortHealth], before: Mapping[str, Mapping[str, int]] | None, window: float,
                now: float) -> Record:
    """This round's record: increases against `before` (port name -> counters of the last round; None on the
    first round, and a port new since then, has none)."""
    out = []
    for p in ports[:MAX_PORTS]:
        old = (before or {}).get(p.name)
        out.append(PortRecord(p.device, p.port, p.state, p.phys_state, p.rate,
                              {} if old is None else increases(p.counters, old)))
    rose = any(p.increase for p in out)
    return Record(window if rose else 0.0, tuple(out), round(now, 3) if rose else None)


def increases(now: Mapping[str, int], before: Mapping[str, int] | None) -> dict[str, int]:
    """How much each counter rose since `before`, only those that rose (None: no reading before, so a value
    counts whole). A counter that went down was cleared, or its HCA reset: its value is the increase."""
    old = before or {}
    rises = {k: v - old.get(k, 0) if v >= old.get(k, 0) else v for k, v in now.items()}
    return {k: v for k, v in rises.items() if v}


def encode(record: Record) -> str:
    doc: dict[str, Any] = {"v": VERSION}
    if record.at is not None:
        doc.update(at=_number(record.at), window=int(record.window))
    doc["ports"] = [[p.device, p.port, p.state, p.phys_state, _number(p.rate), dict(sorted(p.increase.items()))]
                    for p in record.ports]
    return json.dumps(doc, separators=(",", ":"))


def _number(rate: float) -> float | int:
    return int(rate) if rate == int(rate) else rate


def decode(text: str, origin: str) -> Record:
    """A record back from the annotation; anything else is a `SourceError` naming `origin`."""
    if len(text) > MAX_CHARS:
        raise SourceError(f"{origin}: {len(text)} characters, more than {MAX_CHARS}")
    try:
        doc = json.loads(text)
        if doc.get("v") != VERSION:
            raise ValueError(f"version {doc.get('v')!r}, expected {VERSION}")
        ports = []
        for item in doc["ports"][:MAX_PORTS]:
            device, port, state, phys, rate, rise = item
            if not (isinstance(device, str) and all(type(n) is int for n in (port, state, phys))
                    and isinstance(rate, (int, float)) and isinstance(rise, dict)
                    and all(isinstance(k, str) and type(v) is int for k, v in rise.items())):
                raise ValueError(f"port entry {str(item)[:80]} has the wrong types")
            ports.append(PortRecord(device, port, state, phys, float(rate), rise))
        at = doc.get("at")
        if at is not None and not isinstance(at, (int, float)):
            raise ValueError("at is not a number")
        window = doc.get("window", 0)
        if not isinstance(window, (int, float)):
            raise ValueError("window is not a number")
        return Record(float(window), tuple(ports), None if at is None else float(at))
    except (AttributeError, KeyError, TypeError, ValueError, RecursionError) as exc:
        raise SourceError(f"{origin}: not a port record: {str(exc)[:200]}") from None


@dataclass(frozen=True)
class Usual:
    """What most ports and nodes look like, which a node's ports are held against."""

    rate: float = 0.0
    active: int = 0


def usual(records: Iterable[Record]) -> Usual:
    """The most common rate among ports that are up, and the most common number of ports up per node."""
    rates: Counter = Counter()
    active: Counter = Counter()
    for record in records:
        rates.update(p.rate for p in record.ports if p.up and p.rate)
        active[record.active] += 1
    return Usual(rates.most_common(1)[0][0] if rates else 0.0, active.most_common(1)[0][0] if active else 0)


def findings(node: str, record: Record, limits: Mapping[str, int], norm: Usual) -> list[Finding]:
    """Bad observations in one node's record: counters that rose past their limit within the window, ports
    slower than most, and ports down when most nodes have more up."""
    out = []
    window = f" in {record.window:.0f}s" if record.window else ""
    for p in record.ports:
        over = {k: v for k, v in sorted(p.increase.items()) if v >= limits.get(k, 0) > 0}
        if over:
            rises = ", ".join(f"{k} +{v}" for k, v in over.items())
            flap = " (the link went down: it flaps)" if "link_downed" in over else ""
            out.append(Finding(node, "errors", f"{p.name}: {rises}{window}{flap}", at=record.at))
        if p.up and p.rate and norm.rate and p.rate < norm.rate:
            out.append(Finding(node, "rate", f"{p.name} runs at {_number(p.rate)} Gb/s, most ports at "
                                             f"{_number(norm.rate)} Gb/s"))
    down = [p for p in record.ports if not p.up]
    if down and record.active < norm.active:
        ports = ", ".join(f"{p.name} {STATES.get(p.state, p.state)}/{PHYS_STATES.get(p.phys_state, p.phys_state)}"
                          for p in down)
        out.append(Finding(node, "link", f"{record.active} of its InfiniBand ports up, most nodes have "
                                         f"{norm.active}: {ports}"))
    return out
