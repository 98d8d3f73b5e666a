"""LLDP neighbour facts: read from `lldpcli -f json0 show neighbors`, carried as compact JSON.

`json0` keeps one shape whatever the count: `{"lldp": [{"interface": [ENTRY, ...]}]}`, and
`{"lldp": [{}]}` when nothing was heard (plain `-f json` turns a single interface into a dict and prints
`{"lldp": {}}`). In an ENTRY every value below `chassis` and `port` is a list of objects, e.g.
`"chassis": [{"id": [{"type": "mac", "value": "56:6c:.."}], "name": [{"value": "leaf-r01"}]}]`,
`"port": [{"id": [{"type": "ifname", "value": "swp1"}], "descr": [{"value": "swp1"}]}]`. An interface
that hears two neighbours appears as two entries with the same `name`.

The facts format (what the agent publishes in the Node annotation and what `--lldp-dir` files may hold)::

    {"version": 1, "neighbors": [{"interface": "eth0", "chassisName": "leaf-r01",
      "chassisId": "56:6c:21:32:03:8b", "portId": "swp1", "portDescr": "swp1"}]}

It leaves out what changes every second (age, TTL), so the annotation changes only when the wiring does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable

from labeler.errors import InputError, TopologyError
from labeler.io.documents import load_json

ANNOTATION = "topolabel.dev/lldp-neighbors"
VERSION = 1
# A node writes its own facts, so they are bounded: 64 KiB is about 400 neighbours, ten times a big server's.
# The agent's admission policy (manifests/agent/admission-policy.yaml) sets the same limit on the annotation.
MAX_FACTS_BYTES = 65536
MAX_NEIGHBORS = 256


@dataclass(frozen=True, order=True)
class Neighbor:
    """One LLDP neighbour as one local interface hears it."""

    interface: str
    chassis_name: str = ""
    chassis_id: str = ""
    port_id: str = ""
    port_descr: str = ""

    @property
    def switch(self) -> str:
        """The neighbour's readable identity: its system name, its chassis id when it sends none."""
        return self.chassis_name or self.chassis_id

    def describe(self) -> str:
        port = f" port {self.port_id}" if self.port_id else ""
        return f"{self.interface} -> {self.switch or '(unnamed)'}{port}"


def parse_json0(data: Any, origin: str) -> tuple[Neighbor, ...]:
    """Neighbours from parsed `lldpcli -f json0 show neighbors` output; `origin` names it in errors."""
    top = data.get("lldp") if isinstance(data, dict) else None
    if not isinstance(top, list):
        raise TopologyError(f"{origin}: not `lldpcli -f json0 show neighbors` output (no 'lldp' list)")
    neighbors: list[Neighbor] = []
    for block in top:
        entries = block.get("interface", []) if isinstance(block, dict) else None
        if not isinstance(entries, list):
            raise TopologyError(f"{origin}: 'lldp[].interface' must be a list (was it printed with -f json0?)")
        if len(neighbors) + len(entries) > MAX_NEIGHBORS:
            raise TopologyError(f"{origin}: more than {MAX_NEIGHBORS} neighbours")
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict) or not _text(entry.get("name")):
                raise TopologyError(f"{origin}: lldp interface entry {i} has no 'name'")
            chassis, port = _first(entry.get("chassis")), _first(entry.get("port"))
            neighbors.append(Neighbor(
                interface=_text(entry["name"]),
                chassis_name=_value(chassis.get("name")),
                chassis_id=_value(chassis.get("id")),
                port_id=_value(port.get("id")),
                port_descr=_value(port.get("descr"))))
    if not all(n.switch for n in neighbors):
        raise TopologyError(f"{origin}: a neighbour without chassis name or id")
    return tuple(sorted(neighbors))


def _first(items: Any) -> dict[str, Any]:
    return items[0] if isinstance(items, list) and items and isinstance(items[0], dict) else {}


def _value(items: Any) -> str:
    return _text(_first(items).get("value"))


def to_json(neighbors: Iterable[Neighbor]) -> str:
    """The facts format as compact JSON, neighbours sorted so equal wiring gives an equal string."""
    rows = [{"interface": n.interface, "chassisName": n.chassis_name, "chassisId": n.chassis_id,
             "portId": n.port_id, "portDescr": n.port_descr} for n in sorted(neighbors)]
    return json.dumps({"version": VERSION, "neighbors": rows}, separators=(",", ":"))


def from_facts(data: Any, origin: str) -> tuple[Neighbor, ...]:
    """Neighbours from the facts format (already parsed)."""
    rows = data.get("neighbors") if isinstance(data, dict) else None
    if not isinstance(rows, list) or data.get("version") != VERSION:
        raise TopologyError(f"{origin}: expected {{\"version\": {VERSION}, \"neighbors\": [...]}}")
    if len(rows) > MAX_NEIGHBORS:
        raise TopologyError(f"{origin}: more than {MAX_NEIGHBORS} neighbours")
    neighbors = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not _text(row.get("interface")):
            raise TopologyError(f"{origin}: neighbors[{i}] has no 'interface'")
        neighbor = Neighbor(_text(row["interface"]), _text(row.get("chassisName")), _text(row.get("chassisId")),
                            _text(row.get("portId")), _text(row.get("portDescr")))
        if not neighbor.switch:
            raise TopologyError(f"{origin}: neighbors[{i}] has neither chassisName nor chassisId")
        neighbors.append(neighbor)
    return tuple(neighbors)  # in the order given: the agent writes them sorted


def _text(value: Any) -> str:
    return str(value).strip() if isinstance(value, (str, int, float)) and value else ""


def read_facts(text: str, origin: str) -> tuple[Neighbor, ...]:
    """Neighbours from either format: the facts JSON or raw `lldpcli -f json0 show neighbors` output.

    The text may come from a hostile node: it is size-limited and parsed without recursion."""
    if len(text) > MAX_FACTS_BYTES:
        raise TopologyError(f"{origin}: {len(text)} bytes; LLDP facts are at most {MAX_FACTS_BYTES}")
    try:
        data = load_json(text, origin)
    except InputError as exc:
        raise TopologyError(str(exc)) from None
    if isinstance(data, dict) and "lldp" in data:
        return parse_json0(data, origin)
    return from_facts(data, origin)
