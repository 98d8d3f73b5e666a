"""`ibnetdiscover` text (default, `-g`, `--full`, `--node-name-map`-renamed) into a fabric.

The fabric (providers.infiniband.fabric) is keyed by node GUID (an int: the `S-`/`H-` ids are zero-padded
hex, `switchguid=` and the parenthesised GUIDs are not, so text never compares GUIDs). Node attributes:
`kind` (switch, ca, router), `desc` (description), `nports`, and for CAs `port_guids` {port: GUID}. Each
cable is kept once with `ends` {GUID: port}, `width` (int lanes or None) and `speed` ("HDR", ... or None).
Only connected ports appear in `ibnetdiscover` output, so only cabled, active links become cables.
"""

from __future__ import annotations

import re
from functools import lru_cache

from labeler.errors import InputError, SourceError
from labeler.gcpause import paused_gc

from .fabric import Cables, Fabric, Nodes

KINDS = {"Switch": "switch", "Ca": "ca", "Rt": "router"}
ID_KINDS = {"S": "switch", "H": "ca", "R": "router"}
_NODE_LINES = tuple(KINDS)
_NODE_INITIALS = frozenset(name[0] for name in KINDS)
# Slowest first: a link is degraded when its speed ranks below the fabric's usual one.
SPEEDS = ("SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR")

_HEADER = re.compile(
    r'^(?P<type>Switch|Ca|Rt)\s+(?P<nports>[0-9]{1,9})\s+"(?P<kind>[SHR])-(?P<guid>[0-9a-fA-F]+)"'
    r'(?:\s*#\s*"(?P<desc>.*)"(?:\s+(?:enhanced|base)\s+port\b.*|\s*\(scp\))?)?\s*$')
# Switch ports end `# "remote desc" lid L 4xHDR`; CA ports start with their own port GUID and end
# `# lid L lmc M "remote desc" lid RL 4xHDR`. `-g` adds `[ext N]`, `--full` appends `s= w= v=`.
_PORT = re.compile(
    r'^\[(?P<port>[0-9]{1,9})\](?:\[ext [0-9]+\])?(?:\((?P<pguid>[0-9a-fA-F]+)\))?\s*'
    r'"(?P<rkind>[SHR])-(?P<rguid>[0-9a-fA-F]+)"\[(?P<rport>[0-9]{1,9})\](?:\[ext [0-9]+\])?\s*'
    r'(?:\((?P<rpguid>[0-9a-fA-F]+)\))?\s*#\s*(?:lid\s+[0-9]+\s+lmc\s+[0-9]+\s+)?"(?P<rdesc>.*)"'
    r'\s+lid\s+[0-9]+\s+(?P<rate>\S+)')
_RATE = re.compile(r"^([0-9]{1,9})x([A-Z0-9]+)$")
_NAME_MAP_LINE = re.compile(r'^(?P<guid>\S+)\s+(?:"(?P<quoted>[^"]*)"|(?P<bare>[^"#\s][^#]*?))\s*(?:#.*)?$')


def parse_guid(text: str) -> int:
    """A GUID as an int from `0x0002c903...`, `0002c903...` or `/sys`'s `0002:c903:00a1:b2c3`."""
    digits = text.strip().lower().removeprefix("0x").replace(":", "")
    if not digits or len(digits) > 16 or not re.fullmatch(r"[0-9a-f]+", digits):
        raise InputError(f"{text!r} is not a GUID")
    return int(digits, 16)


@lru_cache(maxsize=256)
def parse_rate(token: str) -> tuple[int | None, str | None]:
    """`4xNDR` -> (4, "NDR"); `??` / `???` parts (unknown to ibnetdiscover) -> None."""
    match = _RATE.match(token)
    if not match:
        return None, None
    speed = match.group(2)
    return int(match.group(1)), speed if speed in SPEEDS else None


def parse_ibnetdiscover(text: str, origin: str, names: dict[int, str] | None = None) -> Fabric:
    """The fabric from `ibnetdiscover` output; `names` (a node-name-map) renames nodes by GUID."""
    return fabric_graph(*read_fabric(text, origin, names))


def fabric_graph(nodes: Nodes, cables: Cables) -> Fabric:
    """The fabric, built in the given order, so the same nodes and cables always give the same fabric."""
    with paused_gc():
        return Fabric(nodes, cables)


@paused_gc()
def read_fabric(text: str, origin: str, names: dict[int, str] | None = None) -> tuple[Nodes, Cables]:
    """Nodes and cables from `ibnetdiscover` output, descriptions settled.

    Bad port or node lines are a `SourceError` naming `origin` and the line number; other lines
    (vendid=, Chassis headers, comments, ibwarn noise) carry nothing the topology needs. Each cable is
    listed at both ends and kept once. One pass, one regular expression per record kind, the work per
    line inline: the port lines of an 8,192-HCA fabric (35,000) are most of a discovery's time.
    """
    nodes: Nodes = {}
    cables: Cables = []
    peer_desc: dict[int, str] = {}
    linked: dict[tuple[int, int], tuple[int, int]] = {}
    current: dict | None = None
    node = 0
    match_port, match_header = _PORT.match, _HEADER.match
    for lineno, line in enumerate(text.splitlines(), start=1):
        first = line[:1]
        if first == "[":
            if current is None:
                raise SourceError(f"{origin}:{lineno}: port line before any Switch or Ca line")
            match = match_port(line)
            if match is None:
                raise SourceError(f"{origin}:{lineno}: cannot read port line {line.strip()[:100]!r}")
            port_text, pguid, rkind, rguid, rport_text, rpguid, rdesc, rate = match.groups()
            port, rport, remote = int(port_text), int(rport_text), int(rguid, 16)
            remote_data = nodes.get(remote)
            if remote_data is None:
                remote_data = nodes[remote] = {"kind": ID_KINDS[rkind], "desc": "", "nports": None, "port_guids": {}}
            elif remote_data["kind"] != ID_KINDS[rkind]:
                raise _both_kinds(origin, lineno, remote, remote_data["kind"], ID_KINDS[rkind])
            if pguid:
                current["port_guids"][port] = int(pguid, 16)
            if rpguid:
                remote_data["port_guids"][rport] = int(rpguid, 16)
            if remote not in peer_desc:
                peer_desc[remote] = rdesc.strip()
            here, there = (node, port), (remote, rport)
            seen = linked.get(here)
            if seen is not None:
                if seen != there:
                    raise SourceError(f"{origin}:{lineno}: port {port} of {node:#x} is listed as cabled to both "
                                      f"{seen[0]:#x}[{seen[1]}] and {remote:#x}[{rport}]")
                continue  # the other end already described this cable
            width, speed = parse_rate(rate)
            linked[here], linked[there] = there, here
            cables.append((node, remote, {"ends": {node: port, remote: rport}, "width": width, "speed": speed}))
        elif first in _NODE_INITIALS and line.startswith(_NODE_LINES):
            match = match_header(line.rstrip())
            if match is None:
                raise SourceError(f"{origin}:{lineno}: cannot read node line {line.strip()[:100]!r}")
            kind_name, nports, letter, guid_text, desc = match.groups()
            node, kind = int(guid_text, 16), KINDS[kind_name]
            current = nodes.get(node)
            if current is None:
                current = nodes[node] = {"kind": kind, "desc": "", "nports": None, "port_guids": {}}
            elif current["kind"] != kind:
                raise _both_kinds(origin, lineno, node, current["kind"], kind)
            if current["nports"] is not None:
                raise SourceError(f"{origin}:{lineno}: node {letter}-{guid_text} is listed twice")
            current["nports"], current["desc"] = int(nports), (desc or "").strip()
    if not nodes:
        raise SourceError(f"{origin}: no Switch or Ca records; expected `ibnetdiscover` topology output "
                          "(plain, -g or --full)")
    _settle_descriptions(nodes, peer_desc, names or {})
    return nodes, cables


def _both_kinds(origin: str, lineno: int, guid: int, was: str, now: str) -> SourceError:
    return SourceError(f"{origin}:{lineno}: GUID {guid:#x} is both a {was} and a {now}")


def _settle_descriptions(nodes: Nodes, peer_desc: dict[int, str], names: dict[int, str]) -> None:
    """One description per node: a node-name-map entry, else what its peers print, else its own header.

    `ibnetdiscover --node-name-map` renames switch headers and every remote name on port lines, but
    prints a CA's own header with its raw description; the peers' view is therefore the renamed one.
    """
    for guid, data in nodes.items():
        if guid in names:
            data["desc"] = names[guid]
        elif data["kind"] == "switch":
            data["desc"] = data["desc"] or peer_desc.get(guid, "")
        else:
            data["desc"] = peer_desc.get(guid) or data["desc"]


def parse_node_name_map(text: str, origin: str) -> dict[int, str]:
    """An ibnetdiscover/OpenSM node-name-map: `0x<GUID> "name"` per line, `#` comments."""
    names: dict[int, str] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _NAME_MAP_LINE.match(line)
        if not match:
            raise SourceError(f"{origin}:{lineno}: not a node-name-map line: expected '0x<GUID> \"name\"'")
        try:
            guid = parse_guid(match["guid"])
        except InputError as exc:
            raise SourceError(f"{origin}:{lineno}: {exc}") from None
        names[guid] = (match["quoted"] if match["quoted"] is not None else match["bare"]).strip()
    return names
