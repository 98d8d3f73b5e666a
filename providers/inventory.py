"""Topology from an inventory file (a DCIM export): node name or host name pattern -> path.

YAML form::

    levels: [room, row, rack]          # coarsest first
    localNames: false                  # true when rack names repeat across rows
    hosts:
      - node: gpu-001                  # an exact node name ...
        room: dc1
        row: r3
        rack: r3-12
      - pattern: "gpu-1[0-3]?"         # ... or a shell-style pattern; the first match wins
        room: dc1
        row: r4
        rack: r4-01

CSV form: a header `node,room,row,rack` (the first column may hold patterns), one host per row.
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
import io
from dataclasses import dataclass
from typing import Any, Mapping

from labeler.errors import InputError, SourceError
from labeler.io.documents import load
from labeler.io.files import read_text
from labeler.topology.model import Discovery

from .base import Options, Source, SourceContext, parse_options

NAME = "inventory"


class InventoryOptions(Options):
    inventory: str


@dataclass(frozen=True)
class Entry:
    match: str
    is_pattern: bool
    path: tuple[str, ...]


@dataclass
class Inventory:
    levels: tuple[str, ...]
    entries: list[Entry]
    local_names: bool = False


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("inventory source")
    group.add_argument("--inventory", metavar="FILE", help="YAML or CSV inventory: node or pattern -> path")


def discover(ctx: SourceContext) -> Discovery:
    opts = parse_options(InventoryOptions, ctx)
    inv = read_inventory(opts.inventory)
    discovery = Discovery(NAME, inv.levels, local_names=inv.local_names)
    exact = {e.match: e for e in inv.entries if not e.is_pattern}
    patterns = [e for e in inv.entries if e.is_pattern]
    names = [n.name for n in ctx.nodes] if ctx.nodes else sorted(exact)
    for name in names:
        entry = exact.get(name) or next((e for e in patterns if fnmatch.fnmatchcase(name, e.match)), None)
        if entry is None:
            discovery.problem(f"not in inventory {opts.inventory}", name)
        else:
            discovery.paths[name] = entry.path
    return discovery


def read_inventory(path: str) -> Inventory:
    """The inventory file; every value is read as the string it is (`012`, `1:30`, `0x1F` are racks, not
    YAML 1.1 numbers), so only `true`/`false` are booleans."""
    try:
        text = read_text(path)
        if path.lower().endswith(".csv"):
            return _from_csv(text, path)
        return _from_yaml(load(text, path, strings=True), path)
    except InputError as exc:
        raise SourceError(str(exc)) from None


def _from_yaml(data: Any, origin: str) -> Inventory:
    if not isinstance(data, Mapping):
        raise SourceError(f"{origin}: expected a mapping with 'levels' and 'hosts'")
    levels = data.get("levels")
    if not isinstance(levels, list) or not levels or not all(isinstance(x, str) and x for x in levels):
        raise SourceError(f"{origin}: 'levels' must be a non-empty list of level names, coarsest first")
    hosts = data.get("hosts")
    if not isinstance(hosts, list):
        raise SourceError(f"{origin}: 'hosts' must be a list")
    local_names = data.get("localNames", False)
    if not isinstance(local_names, bool):
        raise SourceError(f"{origin}: 'localNames' must be true or false, not {local_names!r}"[:200])
    entries = []
    for i, host in enumerate(hosts):
        if not isinstance(host, Mapping) or ("node" in host) == ("pattern" in host):
            raise SourceError(f"{origin}: hosts[{i}] needs exactly one of 'node' or 'pattern'")
        match: Any = host.get("node", host.get("pattern"))  # document data, checked below
        values: list[Any] = [host.get(lv) for lv in levels]
        bad = [lv for lv, v in zip(["node" if "node" in host else "pattern", *levels], [match, *values])
               if not isinstance(v, str) or not v.strip()]
        if bad:
            raise SourceError(f"{origin}: hosts[{i}] has no value for level(s) {', '.join(bad)}")
        entries.append(Entry(match.strip(), "pattern" in host, tuple(v.strip() for v in values)))
    return Inventory(tuple(levels), entries, local_names)


def _from_csv(text: str, origin: str) -> Inventory:
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        raise SourceError(f"{origin}: not valid CSV: {exc}") from None
    rows = [r for r in rows if any(cell.strip() for cell in r) and not r[0].lstrip().startswith("#")]
    if not rows or len(rows[0]) < 2:
        raise SourceError(f"{origin}: expected a header 'node,<level>,...' with at least one level")
    header = [h.strip() for h in rows[0]]
    levels = tuple(header[1:])
    entries = []
    for line, row in enumerate(rows[1:], start=2):
        cells = [c.strip() for c in row]
        if len(cells) != len(header) or not all(cells):
            raise SourceError(f"{origin}: row {line} must have {len(header)} non-empty cells, like the header")
        entries.append(Entry(cells[0], any(ch in cells[0] for ch in "*?["), tuple(cells[1:])))
    return Inventory(levels, entries)


# Without nodes, every exact name in the file is placed; asking about a few nodes is cheap, so the
# operator places joining nodes at once.
SOURCE = Source(NAME, InventoryOptions, add_arguments, discover, needs_nodes=False, reads_provider_id=False)
