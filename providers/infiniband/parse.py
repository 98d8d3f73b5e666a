"""`ibnetdiscover` text (default, `-g`, `--full`, `--node-name-map`-renamed) into a fabric graph.

The graph is an undirected `networkx.MultiGraph` keyed by node GUID (an int: the `S-`/`H-` ids are zero-padded
hex, `switchguid=` and the parenthesised GUIDs are not, so text never compares GUIDs). Node attributes:
`kind` (switch, ca, router), `desc` (description), `nports`, and for CAs `port_guids` {port: GUID}. Each
cable is one edge with `ends` {GUID: port}, `width` (int lanes or None) and `speed` ("HDR", ... or None).
Only connected ports appear in `ibnetdiscover` output, so only cabled, active links become edges.
"""

from __future__ import annotations

import re
from functools import lru_cache

import networkx as nx

from labeler.errors import InputError, SourceError

KINDS = {"Switch": "switch", "Ca": "ca", "Rt": "router"}
ID_KINDS = {"S": "switch", "H": "ca", "R": "router"}
_NODE_LINES = tuple(KINDS)
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


# Nodes (GUID -> attributes, in the order the output lists them) and cables (in the same order): what the
# graph is built from, and what the InfiniBand collector publishes (providers.infiniband.published).
Nodes = dict[int, dict]
Cables = list[tuple[int, int, dict]]


def parse_ibnetdiscover(text: str, origin: str, names: dict[int, str] | None = None) -> nx.MultiGraph:
    """The fabric graph from `ibnetdiscover` output; `names` (a node-name-map) renames nodes by GUID."""
    return fabric_graph(*read_fabric(text, origin, names))


def read_fabric(text: str, origin: str, names: dict[int, str] | None = None) -> tuple[Nodes, Cables]:
    """Nodes and cables from `ibnetdiscover` output, descriptions settled.

    Bad port or node lines are a `SourceError` naming `origin` and the line number; other lines
    (vendid=, Chassis headers, comments, ibwarn noise) carry nothing the topology needs.
    """
    records = _Records(origin)
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.startswith("["):
            records.port(line, lineno)
        elif line.startswith(_NODE_LINES):
            records.node(line, lineno)
    if not records.nodes:
        raise SourceError(f"{origin}: no Switch or Ca records; expected `ibnetdiscover` topology output "
                          "(plain, -g or --full)")
    records.settle_descriptions(names or {})
    return records.nodes, records.edges


def fabric_graph(nodes: Nodes, cables: Cables) -> nx.MultiGraph:
    """The graph, built in the given order, so the same nodes and cables always give the same graph."""
    graph = nx.MultiGraph()
    graph.add_nodes_from(nodes.items())  # in bulk: networkx's per-call bookkeeping is the slow part
    graph.add_edges_from(cables)
    return graph


class _Records:
    """Nodes and cables as the lines describe them; each cable is listed at both ends and kept once."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.nodes: dict[int, dict] = {}
        self.edges: list[tuple[int, int, dict]] = []
        self.peer_desc: dict[int, str] = {}
        self.linked: dict[tuple[int, int], tuple[int, int]] = {}
        self.current: int | None = None

    def node(self, line: str, lineno: int) -> None:
        match = _HEADER.match(line.rstrip())
        if not match:
            raise SourceError(f"{self.origin}:{lineno}: cannot read node line {line.strip()[:100]!r}")
        guid = int(match["guid"], 16)
        data = self._ensure(guid, KINDS[match["type"]], lineno)
        if data["nports"] is not None:
            raise SourceError(f"{self.origin}:{lineno}: node {match['kind']}-{match['guid']} is listed twice")
        data.update(nports=int(match["nports"]), desc=(match["desc"] or "").strip())
        self.current = guid

    def _ensure(self, guid: int, kind: str, lineno: int) -> dict:
        data = self.nodes.get(guid)
        if data is None:
            data = self.nodes[guid] = {"kind": kind, "desc": "", "nports": None, "port_guids": {}}
        elif data["kind"] != kind:
            raise SourceError(f"{self.origin}:{lineno}: GUID {guid:#x} is both a {data['kind']} and a {kind}")
        return data

    def port(self, line: str, lineno: int) -> None:
        if self.current is None:
            raise SourceError(f"{self.origin}:{lineno}: port line before any Switch or Ca line")
        match = _PORT.match(line)
        if not match:
            raise SourceError(f"{self.origin}:{lineno}: cannot read port line {line.strip()[:100]!r}")
        node, port, rport = self.current, int(match["port"]), int(match["rport"])
        remote = int(match["rguid"], 16)
        remote_data = self._ensure(remote, ID_KINDS[match["rkind"]], lineno)
        if match["pguid"]:
            self.nodes[node]["port_guids"][port] = int(match["pguid"], 16)
        if match["rpguid"]:
            remote_data["port_guids"][rport] = int(match["rpguid"], 16)
        self.peer_desc.setdefault(remote, match["rdesc"].strip())
        here, there = (node, port), (remote, rport)
        if here in self.linked:
            if self.linked[here] != there:
                seen = self.linked[here]
                raise SourceError(f"{self.origin}:{lineno}: port {port} of {node:#x} is listed as cabled to both "
                                  f"{seen[0]:#x}[{seen[1]}] and {remote:#x}[{rport}]")
            return  # the other end already described this cable
        width, speed = parse_rate(match["rate"])
        self.linked[here], self.linked[there] = there, here
        self.edges.append((node, remote, {"ends": {node: port, remote: rport}, "width": width, "speed": speed}))

    def settle_descriptions(self, names: dict[int, str]) -> None:
        """One description per node: a node-name-map entry, else what its peers print, else its own header.

        `ibnetdiscover --node-name-map` renames switch headers and every remote name on port lines, but
        prints a CA's own header with its raw description; the peers' view is therefore the renamed one.
        """
        for guid, data in self.nodes.items():
            if guid in names:
                data["desc"] = names[guid]
            elif data["kind"] == "switch":
                data["desc"] = data["desc"] or self.peer_desc.get(guid, "")
            else:
                data["desc"] = self.peer_desc.get(guid) or data["desc"]


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
