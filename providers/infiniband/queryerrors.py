"""`ibqueryerrors` (infiniband-diags): the error counters of every port in the fabric, read over the fabric.

The collector runs it beside `ibnetdiscover`; `topolabel health --ibqueryerrors FILE` reads a saved output.
It queries each port's PMA by LID, so the fabric needs a subnet manager (it always has one in service). Its
output names a CA by its description and the port's GUID, a switch by its node GUID:

    Errors for "gpu-017 mlx5_3"
       GUID 0xe09d730300b4e3f1 port 1: [LinkDownedCounter == 3] [PortXmitDiscards == 57]
    Errors for 0x2c5eab03d82c00c0 "MF0;P1-IBLEAF-01-01:MQM8790/U1"
       GUID 0x2c5eab03d82c00c0 port ALL: [SymbolErrorCounter == 1234]
       GUID 0x2c5eab03d82c00c0 port 1: [SymbolErrorCounter == 1234]

The values are what each counter holds since it was last cleared. Counters are named here as sysfs names
them (`LinkDownedCounter` -> `link_downed`), so one set of limits serves both.
"""

from __future__ import annotations

import re

from labeler.errors import SourceError
from labeler.io.hosttools import run_tool

NAMES = {"SymbolErrorCounter": "symbol_error", "LinkErrorRecoveryCounter": "link_error_recovery",
         "LinkDownedCounter": "link_downed", "PortRcvErrors": "port_rcv_errors",
         "PortRcvRemotePhysicalErrors": "port_rcv_remote_physical_errors",
         "PortRcvSwitchRelayErrors": "port_rcv_switch_relay_errors", "PortXmitDiscards": "port_xmit_discards",
         "PortXmitConstraintErrors": "port_xmit_constraint_errors",
         "PortRcvConstraintErrors": "port_rcv_constraint_errors",
         "LocalLinkIntegrityErrors": "local_link_integrity_errors",
         "ExcessiveBufferOverrunErrors": "excessive_buffer_overrun_errors", "VL15Dropped": "VL15_dropped"}
_PORT = re.compile(r"^\s+GUID\s+0x(?P<guid>[0-9a-fA-F]{1,16})\s+port\s+(?P<port>[0-9]{1,4}|ALL):\s*(?P<items>.*)$")
_ITEM = re.compile(r"\[(?P<name>[A-Za-z0-9_]{1,64})\s*==\s*(?P<value>[0-9]{1,20})\]")

# (GUID printed - a CA's port GUID, a switch's node GUID -, port) -> counter -> value
PortErrors = dict[tuple[int, int], dict[str, int]]


def parse_queryerrors(text: str, origin: str) -> PortErrors:
    """The counters of every port the output lists (the `port ALL` sums left out)."""
    out: PortErrors = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.lstrip().startswith("GUID "):
            continue
        match = _PORT.match(line)
        if match is None:
            raise SourceError(f"{origin}:{lineno}: cannot read port line {line.strip()[:100]!r}")
        if match["port"] == "ALL":
            continue
        counters = {NAMES.get(m["name"], m["name"]): int(m["value"]) for m in _ITEM.finditer(match["items"])}
        if counters:
            out.setdefault((int(match["guid"], 16), int(match["port"])), {}).update(counters)
    return out


def run_queryerrors(ca: str | None, port: int | None, timeout: float, binary: str = "ibqueryerrors") -> str:
    """Its output (exit 1 only says that it found errors); a `SourceError` when it cannot run or times out."""
    return run_tool([binary, "--skip-sl", *(["-C", ca] if ca else []), *(["-P", str(port)] if port else [])],
                    timeout, ok=(0, 1), missing="install infiniband-diags",
                    stalled="a fabric this large needs more time, or no subnet manager assigned LIDs")
