"""`ibnetdiscover` text (default, `-g`, `--full`, `--node-name-map`-renamed) into a fabric (providers.infiniband.fabric).

GUIDs are ints: the `S-`/`H-` ids are zero-padded hex, `switchguid=` and the parenthesised GUIDs are not, so
text never compares GUIDs. Only connected ports appear in `ibnetdiscover` output, so only cabled, active
links become cables; each is listed at both ends and kept once.

Two ways to find the records, one reading of them. Line by line, each line against the expressions of its
kind (`_HEADER`, `_PORT`), which take every spacing the tool or an editor may leave and name the line of
anything they cannot read. Or, for text laid out the way ibnetdiscover prints it (a tab or space where it puts
one, one record a line, `\\n` line ends), passes of `_RECORDS` over the text, which find the same
records with the same fields in 60% of the time the line-by-line reading takes; it is used only when it read
every record line (its last branch finds any other), so what it reads is what the line-by-line reading reads.
It reads the text a slice of whole lines at a time, each slice's records built and freed before the next:
the records of a whole 32,768-HCA capture at once held 70 MB, and faulting that memory in cost a tenth of the
discovery's CPU. A saved capture is read from its file the same way, a slice at a time (`read_ibnetdiscover`),
so that neither its bytes nor its text are ever held whole. Either way the records go through `_build`, one
loop with the work per record inline: the 35,000 port lines of an 8,192-HCA fabric are most of a discovery's
time.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from itertools import chain, repeat
from operator import itemgetter
from typing import Iterable, Iterator

from labeler.errors import InputError, SourceError
from labeler.gcpause import paused_gc
from labeler.io.files import read_text, text_slices

from .fabric import Fabric, Rate

KINDS = {"Switch": "switch", "Ca": "ca", "Rt": "router"}
ID_KINDS = {"S": "switch", "H": "ca", "R": "router"}
_NODE_LINES = tuple(KINDS)
_NODE_INITIALS = frozenset(name[0] for name in KINDS)
# Slowest first: a link is degraded when its speed ranks below the fabric's usual one.
SPEEDS = ("SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR")

_HEADER = (  # the expressions of the line-by-line reading compile when it runs (start-up time)
    r'^(Switch|Ca|Rt)\s+([0-9]{1,9})\s+"([SHR]-[0-9a-fA-F]+)"'
    r'(?:\s*#\s*"(.*)"(?:\s+(?:enhanced|base)\s+port\b.*|\s*\(scp\))?)?\s*$')
# Switch ports end `# "remote desc" lid L 4xHDR`; CA ports start with their own port GUID and end
# `# lid L lmc M "remote desc" lid RL 4xHDR`. `-g` adds `[ext N]`, `--full` appends `s= w= v=`.
_PORT = (
    r'^\[([0-9]{1,9})\](?:\[ext [0-9]+\])?(?:\(([0-9a-fA-F]+)\))?\s*'
    r'"([SHR]-[0-9a-fA-F]+)"\[([0-9]{1,9})\](?:\[ext [0-9]+\])?\s*'
    r'(?:\(([0-9a-fA-F]+)\))?\s*#\s*(?:lid\s+[0-9]+\s+lmc\s+[0-9]+\s+)?"(.*)"\s+lid\s+[0-9]+\s+(\S+)')
# The same records as ibnetdiscover lays them out, each line from its `\n`: every field where the tool prints
# it, no quote after a description (so `.*"` above ends where `[^"]*"` does) nor in a rate. Port lines first
# (four in five records), and possessive (`*+`, `?+`): no field can end where a shorter match would let the rest
# match, so the engine keeps no place to go back to (both together: a quarter less time). A description is
# `[^"]*+`, which the engine steps through in a tight loop, where `[^"\n]*+` costs a set lookup a character (a
# tenth of the reading's instructions): it can therefore run past its line's end, which `_slice_records` refuses.
# The last branch takes a record line the others did not, so that finding one says the text is not laid out
# this way.
_RECORDS = re.compile(
    r'\n\[([0-9]{1,9}+)\](?:\[ext [0-9]++\])?+(?:\(([0-9a-f]++)\) )?+\t"([SHR]-[0-9a-f]++)"\[([0-9]{1,9}+)\]'
    r'(?:\[ext [0-9]++\])?+(?:\(([0-9a-f]++)\) ?+)?+\t\t# (?:lid [0-9]++ lmc [0-9]++ )?+"([^"]*+)" lid [0-9]++ '
    r'([^\s"]++)[^"\n]*+(?=\n)'
    r'|\n(Switch|Ca|Rt)\t([0-9]{1,9}+) "([SHR]-[0-9a-f]++)"\t\t# "([^"]*+)"(?: (?:enhanced|base) port\b[^"\n]*+)?+(?=\n)'
    r'|\n(\[|Switch|Ca|Rt)')
_DESCRIPTIONS = (itemgetter(5), itemgetter(10))  # a record's groups that can hold a line end
_UNREAD = 11  # the group of the last branch
_SLICE = 1 << 16  # characters the bulk reading reads at a time (then to the line's end): about 650 records
# `str.splitlines` ends lines at these too; text holding any is read line by line.
_OTHER_LINE_ENDS = ("\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
_RATE = re.compile(r"^([0-9]{1,9})x([A-Z0-9]+)$")
_NAME_MAP_LINE = r'^(?P<guid>\S+)\s+(?:"(?P<quoted>[^"]*)"|(?P<bare>[^"#\s][^#]*?))\s*(?:#.*)?$'

# A record: port, port GUID, remote id, remote port, remote port GUID, remote description, rate for a port line;
# node type, port count, id, description for a node line (the other kind's fields empty); then the start of a
# record line the bulk reading could not read (always empty when it is used).
Record = tuple[str, str, str, str, str, str, str, str, str, str, str, str]
_NUMBERS = {str(n): n for n in range(1, 1024)}  # port numbers as written: a lookup is a sixth of an int()


def parse_guid(text: str) -> int:
    """A GUID as an int from `0x0002c903...`, `0002c903...` or `/sys`'s `0002:c903:00a1:b2c3`."""
    digits = text.strip().lower().removeprefix("0x").replace(":", "")
    if not digits or len(digits) > 16 or not re.fullmatch(r"[0-9a-f]+", digits):
        raise InputError(f"{text!r} is not a GUID")
    return int(digits, 16)


@lru_cache(maxsize=256)
def parse_rate(token: str) -> Rate:
    """`4xNDR` -> (4, "NDR"); `??` / `???` parts (unknown to ibnetdiscover) -> None."""
    match = _RATE.match(token)
    if not match:
        return None, None
    speed = match.group(2)
    return int(match.group(1)), speed if speed in SPEEDS else None


@paused_gc()
def parse_ibnetdiscover(text: str, origin: str, names: dict[int, str] | None = None) -> Fabric:
    """The fabric from `ibnetdiscover` output; `names` (a node-name-map) renames nodes by GUID.

    Bad port or node lines are a `SourceError` naming `origin` and the line number; other lines (vendid=,
    Chassis headers, comments, ibwarn noise) carry nothing the topology needs."""
    try:
        return _build(_bulk_records(text), names or {})
    except _Refused:
        return _by_lines(text, origin, names)  # which says where (an unread record line is refused too)


@paused_gc()
def read_ibnetdiscover(path: str, names: dict[int, str] | None = None) -> Fabric:
    """The fabric from `ibnetdiscover` output saved in the file `path` ('-': stdin), as `parse_ibnetdiscover`
    reads it. A regular file is read a slice at a time (`text_slices`), never whole, unless the bulk reading
    refuses it: then it is read again, whole, line by line, so that an error names its line. Unreadable input
    is an `InputError` naming the file."""
    if path == "-" or not os.path.isfile(path):  # a pipe could not be read twice
        return parse_ibnetdiscover(read_text(path), path, names)
    try:
        return _build(chain.from_iterable(map(_slice_records, text_slices(path, _SLICE))), names or {})
    except _Refused:
        return _by_lines(read_text(path), path, names)


def _by_lines(text: str, origin: str, names: dict[int, str] | None) -> Fabric:
    """The line-by-line reading, whose errors name the line."""
    lines = _LineRecords(text, origin)
    try:
        return _build(lines, names or {})
    except _Empty:
        raise SourceError(f"{origin}: no Switch or Ca records; expected `ibnetdiscover` topology output "
                          "(plain, -g or --full)") from None
    except _Refused as exc:
        raise SourceError(f"{origin}:{lines.lineno}: {exc}") from None


class _Refused(Exception):
    """A record contradicting an earlier one; the caller says where."""


class _Empty(_Refused):
    """No records at all."""


class _Unread(_Refused):
    """A record line the bulk reading cannot read; the line-by-line reading says which."""


def _bulk_records(text: str) -> Iterator[Record]:
    """Every record by passes of `_RECORDS` over the text a slice at a time; a record line they cannot read is an
    `_Unread` when it is reached."""
    return chain.from_iterable(map(_slice_records, _text_slices(text)))


def _text_slices(text: str) -> Iterator[str]:
    """The text in slices of whole lines, each from the `\n` before its first line to the one after its last (a
    record is one line, from the `\n` before it to the one after it), as `text_slices` reads a file."""
    start, size = 0, len(text)
    while start < size:
        end = text.find("\n", start + _SLICE)
        if end < 0:
            end = size
        yield f"\n{text[start:end]}\n"
        start = end + 1


def _slice_records(piece: str) -> list[Record]:
    """The records of a slice of whole lines, or `_Unread` when the line-by-line reading must read it: a record
    line no branch read, a description that ran into the next line, or a line end other than `\n` or `\r\n`
    (`str.splitlines` ends lines there too)."""
    if "\r" in piece:
        piece = piece.replace("\r\n", "\n")
    if any(end in piece for end in _OTHER_LINE_ENDS):
        raise _Unread
    records = _RECORDS.findall(piece)
    if any(map(itemgetter(_UNREAD), records)) or any("\n" in "".join(map(g, records)) for g in _DESCRIPTIONS):
        raise _Unread
    return records


class _LineRecords:
    """The records line by line, each against the expressions of its kind; `lineno` is the line of the last."""

    def __init__(self, text: str, origin: str) -> None:
        self.text, self.origin, self.lineno = text, origin, 0

    def __iter__(self) -> Iterator[Record]:
        origin, port_line, node_line = self.origin, re.compile(_PORT), re.compile(_HEADER)
        for self.lineno, line in enumerate(self.text.splitlines(), start=1):
            first = line[:1]
            if first == "[":
                match = port_line.match(line)
                if match is None:
                    raise SourceError(f"{origin}:{self.lineno}: cannot read port line {line.strip()[:100]!r}")
                yield (*match.groups(default=""), "", "", "", "", "")  # type: ignore[misc]
            elif first in _NODE_INITIALS and line.startswith(_NODE_LINES):
                match = node_line.match(line.rstrip())
                if match is None:
                    raise SourceError(f"{origin}:{self.lineno}: cannot read node line {line.strip()[:100]!r}")
                yield ("", "", "", "", "", "", "", *match.groups(default=""), "")  # type: ignore[misc]


def _build(records: Iterable[Record], names: dict[int, str]) -> Fabric:
    """The fabric from its records in the order listed: nodes as first named, each cable at its first listing.

    A node is known by its id as written (`S-2c5e...`) and, the first time a spelling is seen, by its GUID,
    so the same GUID written two ways is one node. The work per record is inline (no calls per line)."""
    index: dict[str, int] = {}  # id as written -> node
    by_guid: dict[int, int] = {}
    guids: list[int] = []
    kinds: list[str] = []
    own_desc: list[str] = []
    nports: list[int | None] = []
    ports: list[dict[int, tuple[int, int, int]]] = []
    peer_desc: dict[int, str] = {}
    port_guids: dict[tuple[int, int], str] = {}
    cables: list[tuple[int, int, int, int, int]] = []
    rate_of: dict[str, int] = {}  # rate as written -> index into rates
    rates: list[Rate] = []
    number = _NUMBERS.get
    current, here = -1, {}
    for port_text, pguid, remote_id, rport_text, rpguid, rdesc, rate, kind_name, count, node_id, desc, _ in records:
        if kind_name:
            kind = KINDS[kind_name]
            node = index.get(node_id)
            if node is None:
                node = _node(node_id, kind, by_guid, guids, kinds, own_desc, nports, ports)
                if ID_KINDS[node_id[0]] == kind:  # else a port line naming this id says what it is, as it should
                    index[node_id] = node
            if kinds[node] != kind:
                raise _Refused(_both_kinds(guids[node], kinds[node], kind))
            if nports[node] is not None:
                raise _Refused(f"node {node_id} is listed twice")
            nports[node], own_desc[node] = int(count), desc.strip()
            current, here = node, ports[node]
            continue
        if current < 0:
            raise _Refused("port line before any Switch or Ca line")
        remote = index.get(remote_id)
        if remote is None:
            remote = index[remote_id] = _node(remote_id, ID_KINDS[remote_id[0]], by_guid, guids, kinds, own_desc,
                                              nports, ports)
            if kinds[remote] != ID_KINDS[remote_id[0]]:
                raise _Refused(_both_kinds(guids[remote], kinds[remote], ID_KINDS[remote_id[0]]))
        port = number(port_text) or int(port_text)
        rport = number(rport_text) or int(rport_text)
        if pguid:
            port_guids[(current, port)] = pguid
        if rpguid:
            port_guids[(remote, rport)] = rpguid
        if remote not in peer_desc:
            peer_desc[remote] = rdesc
        seen = here.get(port)
        if seen is not None:
            if seen[0] != remote or seen[1] != rport:
                raise _Refused(_cabled_twice(guids, (current, port), seen, (remote, rport)))
            continue  # the other end already listed this cable
        there = ports[remote]
        if rport in there:
            raise _Refused(_cabled_twice(guids, (remote, rport), there[rport], (current, port)))
        rate_index = rate_of.get(rate)
        if rate_index is None:
            rate_index = rate_of[rate] = _rate_index(rate, rates)
        cable = len(cables)
        here[port] = (remote, rport, cable)
        there[rport] = (current, port, cable)
        cables.append((current, port, remote, rport, rate_index))
    if not guids:
        raise _Empty
    descs = _settled_descriptions(guids, kinds, own_desc, peer_desc, names)
    return Fabric(guids, kinds, descs, nports, cables, rates,
                  dict(zip(port_guids, map(int, port_guids.values(), repeat(16)))), ports)


def _node(node_id: str, kind: str, by_guid: dict[int, int], guids: list[int], kinds: list[str],
          own_desc: list[str], nports: list[int | None], ports: list[dict]) -> int:
    """The node a newly seen id names: one already known by its GUID, else a new one."""
    guid = int(node_id[2:], 16)
    node = by_guid.get(guid)
    if node is None:
        node = by_guid[guid] = len(guids)
        guids.append(guid)
        kinds.append(kind)
        own_desc.append("")
        nports.append(None)
        ports.append({})
    return node


def _rate_index(rate: str, rates: list[Rate]) -> int:
    """The index of a rate's (width, speed) in `rates`, appended when new."""
    value = parse_rate(rate)
    if value not in rates:
        rates.append(value)
    return rates.index(value)


def _both_kinds(guid: int, was: str, now: str) -> str:
    return f"GUID {guid:#x} is both a {was} and a {now}"


def _cabled_twice(guids: list[int], end: tuple[int, int], seen: tuple[int, ...], other: tuple[int, int]) -> str:
    return (f"port {end[1]} of {guids[end[0]]:#x} is listed as cabled to both {guids[seen[0]]:#x}[{seen[1]}] and "
            f"{guids[other[0]]:#x}[{other[1]}]")


def _settled_descriptions(guids: list[int], kinds: list[str], own: list[str], peer_desc: dict[int, str],
                          names: dict[int, str]) -> list[str]:
    """One description per node: a node-name-map entry, else (a switch) its own record's, else what its peers
    print, else (a CA, a router) the other way round.

    `ibnetdiscover --node-name-map` renames switch headers and every remote name on port lines, but prints a
    CA's own header with its raw description; the peers' view is therefore the renamed one."""
    descs = []
    for node, (guid, kind, desc) in enumerate(zip(guids, kinds, own)):
        if guid in names:
            desc = names[guid]
        elif kind == "switch":
            desc = desc or peer_desc.get(node, "").strip()
        else:
            desc = peer_desc.get(node, "").strip() or desc
        descs.append(desc)
    return descs


def parse_node_name_map(text: str, origin: str) -> dict[int, str]:
    """An ibnetdiscover/OpenSM node-name-map: `0x<GUID> "name"` per line, `#` comments."""
    names: dict[int, str] = {}
    map_line = re.compile(_NAME_MAP_LINE)
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = map_line.match(line)
        if not match:
            raise SourceError(f"{origin}:{lineno}: not a node-name-map line: expected '0x<GUID> \"name\"'")
        try:
            guid = parse_guid(match["guid"])
        except InputError as exc:
            raise SourceError(f"{origin}:{lineno}: {exc}") from None
        names[guid] = (match["quoted"] if match["quoted"] is not None else match["bare"]).strip()
    return names
