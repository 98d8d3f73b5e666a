"""Slurm's own parsing and validation rules for topology.conf and topology.yaml, to check exports against.

Written from Slurm's man pages (topology.conf(5), topology.yaml(5)) and sources, independently of the
exporter: `src/common/hostlist.c` (hostlist expressions), `src/common/parse_config.c` (key=value lines,
`#` comments, case-insensitive keys), `src/plugins/topology/tree/switch_record.c` (switch names of at most
64 characters, Nodes and Switches exclusive, children defined and resolved within 20 passes, nodes on several
leaf switches), `src/plugins/topology/block/block_record.c` (unique block names, BlockSizes a base times
powers of two up to 2^15, aggregation of consecutive blocks) and the topology.yaml data parser (a list of
entries, `topology` first, exactly one of tree/block/flat).

Each check returns messages; an empty list means Slurm would load the file without error or warning. Where
Slurm only warns (nodes on two leaf switches, nodes no switch reaches, no switch reaching every node, blocks
smaller than the base size), the checker reports an error too, because a generated file should be clean.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

import yaml

MAX_SWITCH_NAME = 64  # HOST_NAME_MAX
MAX_BLOCK_LEVEL = 15
RESOLVE_PASSES = 20

_KEYVALUE = re.compile(r'\s*([A-Za-z0-9_.]+)\s*([-*+/]?)=\s*(?:"([^"]*)"|(\S+))(?:\s|$)')


# ---------------------------------------------------------------------------------------------------------
# hostlist expressions


class HostlistError(ValueError):
    pass


def _tokens(expr: str) -> list[str]:
    """Split at commas and whitespace outside brackets."""
    tokens, depth, current = [], 0, ""
    for ch in expr:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if depth == 0 and (ch == "," or ch.isspace()):
            if current:
                tokens.append(current)
            current = ""
        else:
            current += ch
    if depth:
        raise HostlistError(f"unbalanced brackets in {expr!r}")
    return tokens + ([current] if current else [])


def _ranges(text: str) -> list[tuple[int, int, int]]:
    """`001-004,7` -> [(1, 4, 3), (7, 7, 1)]: lo, hi and width (the length of lo as written)."""
    out = []
    for part in text.split(","):
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise HostlistError(f"invalid range {part!r}")
        low, high = int(lo), int(hi) if sep else int(lo)
        if low > high:
            raise HostlistError(f"invalid range {part!r}: start above end")
        out.append((low, high, len(lo)))
    return out


def _expand_token(token: str) -> list[str]:
    open_at = token.rfind("[")
    if open_at < 0:
        return [token]
    close_at = token.find("]", open_at)
    if close_at < 0:
        raise HostlistError(f"'[' without ']' in {token!r}")
    prefix, suffix = token[:open_at], token[close_at + 1:]
    prefixes = _expand_token(prefix) if "[" in prefix else [prefix]
    return [f"{p}{n:0{width}d}{suffix}" for p in prefixes
            for lo, hi, width in _ranges(token[open_at + 1:close_at]) for n in range(lo, hi + 1)]


def expand(expr: str) -> list[str]:
    """The names in a hostlist expression, in order, as Slurm's hostlist_create reads them."""
    return [name for token in _tokens(expr) for name in _expand_token(token)]


# ---------------------------------------------------------------------------------------------------------
# topology.conf lines


def parse_conf(text: str, first_keys: set[str], other_keys: set[str]) -> tuple[list[dict[str, str]], list[str]]:
    """Records from key=value lines (keys lower-cased), comments and blank lines skipped, and errors."""
    records, errors = [], []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        record: dict[str, str] = {}
        pos = 0
        while pos < len(line):
            match = _KEYVALUE.match(line, pos)
            if not match:
                errors.append(f"line {number}: cannot parse {line[pos:]!r}")
                break
            key = match.group(1).lower()
            allowed = first_keys if not record else other_keys
            if key not in allowed:
                errors.append(f"line {number}: unexpected key {match.group(1)!r}")
            if key in record:
                errors.append(f"line {number}: {match.group(1)} given twice")
            record[key] = match.group(3) if match.group(3) is not None else match.group(4)
            pos = match.end()
        records.append(record)
    return records, errors


@dataclass
class SwitchRecord:
    name: str
    switches: str | None = None
    nodes: str | None = None


@dataclass
class BlockRecord:
    name: str
    nodes: str | None = None


@dataclass
class Checked:
    """What a check learned, for tests that look further: node sets per switch or per (aggregated) block."""

    errors: list[str] = field(default_factory=list)
    members: dict[str, set[str]] = field(default_factory=dict)
    parents: dict[str, str] = field(default_factory=dict)
    aggregates: list[list[str]] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)


def _hostlist(expr: str, where: str, errors: list[str]) -> list[str]:
    try:
        return expand(expr)
    except HostlistError as exc:
        errors.append(f"{where}: {exc}")
        return []


def _coverage(found: Iterable[str], nodes: Iterable[str] | None, what: str) -> list[str]:
    if nodes is None:
        return []
    found, nodes = set(found), set(nodes)
    errors = []
    if found - nodes:
        errors.append(f"{what} name unknown nodes: {sorted(found - nodes)[:5]}")
    if nodes - found:
        errors.append(f"{what} lack access to {len(nodes - found)} nodes: {sorted(nodes - found)[:5]}")
    return errors


# ---------------------------------------------------------------------------------------------------------
# topology/tree


def check_switches(records: list[SwitchRecord], nodes: Iterable[str] | None = None) -> Checked:
    out = Checked()
    errors = out.errors
    names = [r.name for r in records]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        errors.append(f"switch {dup} has already been defined")
    leaf_of: dict[str, str] = {}
    children: dict[str, list[str]] = {}
    for rec in records:
        if not rec.name:
            errors.append("a switch without a name")
        if len(rec.name) > MAX_SWITCH_NAME:
            errors.append(f"SwitchName {rec.name[:20]}... is {len(rec.name)} characters (at most {MAX_SWITCH_NAME})")
        if rec.nodes is not None and rec.switches is not None:
            errors.append(f"switch {rec.name} has both child switches and nodes")
        if rec.nodes is not None:
            out.members[rec.name] = set()
            for node in _hostlist(rec.nodes, f"switch {rec.name} Nodes", errors):
                if node in leaf_of:
                    errors.append(f"node {node} is on leaf switches {leaf_of[node]} and {rec.name}")
                leaf_of[node] = rec.name
                out.members[rec.name].add(node)
        elif rec.switches is not None:
            children[rec.name] = _hostlist(rec.switches, f"switch {rec.name} Switches", errors)
        else:
            out.members[rec.name] = set()  # an empty leaf switch
    known = set(names)
    for parent, kids in children.items():
        for kid in kids:
            if kid not in known or kid == parent:
                errors.append(f"switch {parent} has invalid child {kid}")
            elif kid in out.parents and out.parents[kid] != parent:
                errors.append(f"switch {kid} is a child of both {out.parents[kid]} and {parent}")
            out.parents[kid] = parent
    _resolve(records, children, out)
    everything = set(nodes) if nodes is not None else set(leaf_of)
    if everything and not any(m == everything for m in out.members.values()):
        errors.append("no switch can reach all nodes through its descendants")
    errors.extend(_coverage(leaf_of, nodes, "switches"))
    return out


def _resolve(records: list[SwitchRecord], children: dict[str, list[str]], out: Checked) -> None:
    """Slurm's passes over the switch table: a switch resolves once all its children have; 20 passes at most."""
    for _ in range(RESOLVE_PASSES + 1):
        pending = False
        for rec in records:
            if rec.name in out.members or rec.name not in children:
                continue
            kids = [k for k in children[rec.name] if k != rec.name]
            if all(k in out.members for k in kids):
                out.members[rec.name] = set().union(*(out.members[k] for k in kids))
            else:
                pending = True
        if not pending:
            return
    out.errors.append("switch configuration is not a tree (unresolved after 20 passes)")


def check_tree_conf(text: str, nodes: Iterable[str] | None = None) -> Checked:
    rows, errors = parse_conf(text, {"switchname"}, {"switches", "nodes", "linkspeed"})
    records = [SwitchRecord(r.get("switchname", ""), r.get("switches"), r.get("nodes")) for r in rows]
    if not records:
        errors.append("no switches configured")
    for r in rows:
        if "linkspeed" in r and not r["linkspeed"].isdigit():
            errors.append(f"switch {r.get('switchname')}: LinkSpeed {r['linkspeed']!r} is not a number")
    out = check_switches(records, nodes)
    out.errors[:0] = errors
    return out


# ---------------------------------------------------------------------------------------------------------
# topology/block


def block_sizes_errors(sizes: list[int]) -> list[str]:
    """Slurm's BlockSizes parsing: positive, multiples of the first by a power of two, at most 2^15."""
    if not sizes:
        return []
    base = sizes[0]
    errors = []
    for size in sizes:
        if size <= 0:
            errors.append(f"invalid BlockSizes value {size}")
            continue
        ratio, rest = divmod(size, base)
        if rest or ratio & (ratio - 1):
            errors.append(f"invalid BlockSizes value {size}: not {base} times a power of two")
        elif ratio.bit_length() - 1 > MAX_BLOCK_LEVEL:
            errors.append(f"invalid BlockSizes value {size}: more than {base} * 2^{MAX_BLOCK_LEVEL}")
    if sizes != sorted(set(sizes)):
        errors.append(f"BlockSizes {sizes} must rise (each a power of two larger than the prior values)")
    return errors


def check_blocks(records: list[BlockRecord], sizes: list[int], nodes: Iterable[str] | None = None) -> Checked:
    out = Checked(sizes=list(sizes))
    errors = out.errors
    if not records:
        errors.append("no blocks configured")
        return out
    owner: dict[str, str] = {}
    for rec in records:
        if not rec.name:
            errors.append("can't create a block without a name")
        if rec.name in out.members:
            errors.append(f"block {rec.name} has already been defined")
        if re.search(r"[\s,\[\]]", rec.name):
            errors.append(f"block name {rec.name!r} breaks the hostlist of aggregated block names")
        members = _hostlist(rec.nodes, f"block {rec.name}", errors) if rec.nodes is not None else []
        for node in members:
            if node in owner:
                errors.append(f"node {node} is in blocks {owner[node]} and {rec.name}")
            owner[node] = rec.name
        out.members[rec.name] = set(members)
    errors.extend(block_sizes_errors(sizes))
    base = sizes[0] if sizes else len(out.members[records[0].name])
    if not base:
        errors.append("blocks do not contain any nodes and the BlockSizes are not set")
    small = [r.name for r in records if len(out.members[r.name]) < base]
    if small:
        errors.append(f"blocks smaller than the base block size {base}: {small[:5]}")
    errors.extend(_coverage(owner, nodes, "blocks"))
    out.aggregates = aggregate_blocks([r.name for r in records], sizes, base)
    return out


def aggregate_blocks(names: list[str], sizes: list[int], base: int) -> list[list[str]]:
    """The higher-level blocks Slurm forms: aligned runs of 2^k consecutive blocks for each enforced size."""
    levels = sorted({(s // base).bit_length() - 1 for s in sizes if s > 0 and s % base == 0}) if sizes \
        else [0, 1, 2, 3, 4]  # Slurm's default without BlockSizes: 1 to 16 blocks
    spans = []
    for level in levels:
        spans.append(1 << level)
        if spans[-1] >= len(names):
            break
    out = []
    for j, span in enumerate(spans[1:], 1):
        for start in range(0, len(names), span):
            remaining = len(names) - start
            if span > remaining and spans[j - 1] >= remaining:
                continue
            out.append(names[start:start + span])
    return out


def check_block_conf(text: str, nodes: Iterable[str] | None = None) -> Checked:
    rows, errors = parse_conf(text, {"blockname", "blocksizes"}, {"nodes"})
    records = [BlockRecord(r["blockname"], r.get("nodes")) for r in rows if "blockname" in r]
    size_rows = [r["blocksizes"] for r in rows if "blocksizes" in r]
    if len(size_rows) > 1:
        errors.append("BlockSizes given more than once")
    sizes: list[int] = []
    for part in (size_rows[-1].split(",") if size_rows else []):
        if not part.strip().isdigit():
            errors.append(f"invalid BlockSizes value {part!r}")
        else:
            sizes.append(int(part))
    out = check_blocks(records, sizes, nodes)
    out.errors[:0] = errors
    return out


# ---------------------------------------------------------------------------------------------------------
# topology.yaml


def _keys(obj: Any, allowed: set[str], where: str, errors: list[str]) -> dict[str, Any]:
    if not isinstance(obj, dict):
        errors.append(f"{where}: expected a mapping, got {type(obj).__name__}")
        return {}
    for key in obj:
        if key not in allowed:
            errors.append(f"{where}: unknown field {key!r}")
    return obj


def _string(value: Any, where: str, errors: list[str]) -> str:
    if not isinstance(value, str):
        errors.append(f"{where}: expected a string, got {value!r}")
        return str(value)
    return value


def _optional_string(obj: dict[str, Any], key: str, where: str, errors: list[str]) -> str | None:
    return _string(obj[key], f"{where}.{key}", errors) if obj.get(key) is not None else None


def check_topology_yaml(text: str, nodes: Iterable[str] | None = None) -> dict[str, Checked]:
    """Checks per topology name; the key '' collects errors about the file as a whole."""
    results: dict[str, Checked] = {"": Checked()}
    errors = results[""].errors
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        errors.append(f"not YAML: {exc}")
        return results
    entries = [data] if isinstance(data, dict) else data
    if not isinstance(entries, list) or not entries:
        errors.append("expected a list of topologies")
        return results
    node_list = list(nodes) if nodes is not None else None
    for i, raw in enumerate(entries):
        entry = _keys(raw, {"topology", "cluster_default", "tree", "block", "flat"}, f"[{i}]", errors)
        if not entry:
            continue
        if next(iter(entry)) != "topology":
            errors.append(f"[{i}]: 'topology' must be the first attribute")
        name = _string(entry.get("topology"), f"[{i}].topology", errors)
        if name in results:
            errors.append(f"[{i}]: topology {name!r} defined twice")
        if not isinstance(entry.get("cluster_default", False), bool):
            errors.append(f"[{i}].cluster_default: expected a boolean")
        kinds = [k for k in ("tree", "block", "flat") if k in entry and entry[k] not in (None, {}, False)]
        if len(kinds) != 1:
            errors.append(f"topology {name!r}: needs exactly one of tree, block, flat (found {kinds or 'none'})")
            continue
        results[name] = _check_entry(kinds[0], entry[kinds[0]], name, node_list)
    return results


def _check_entry(kind: str, body: Any, name: str, nodes: list[str] | None) -> Checked:
    errors: list[str] = []
    if kind == "flat":
        if body is not True:
            errors.append(f"topology {name!r}: flat must be true")
        return Checked(errors)
    if kind == "tree":
        tree = _keys(body, {"switches"}, f"{name}.tree", errors)
        items = tree.get("switches") or []
        records = []
        for j, raw in enumerate(items if isinstance(items, list) else [items]):
            sw = _keys(raw, {"switch", "children", "nodes"}, f"{name}.tree.switches[{j}]", errors)
            where = f"{name}.tree.switches[{j}]"
            records.append(SwitchRecord(_string(sw.get("switch", ""), f"{where}.switch", errors),
                                        _optional_string(sw, "children", where, errors),
                                        _optional_string(sw, "nodes", where, errors)))
        if not records:
            errors.append(f"{name}: no switches configured")
        out = check_switches(records, nodes)
    else:
        block = _keys(body, {"block_sizes", "blocks"}, f"{name}.block", errors)
        sizes = block.get("block_sizes") or []
        if not isinstance(sizes, list) or not all(isinstance(s, int) and not isinstance(s, bool) for s in sizes):
            errors.append(f"{name}.block.block_sizes: expected a list of integers")
            sizes = []
        items = block.get("blocks") or []
        records = []
        for j, raw in enumerate(items if isinstance(items, list) else [items]):
            b = _keys(raw, {"block", "nodes"}, f"{name}.block.blocks[{j}]", errors)
            where = f"{name}.block.blocks[{j}]"
            records.append(BlockRecord(_string(b.get("block", ""), f"{where}.block", errors),
                                       _optional_string(b, "nodes", where, errors)))
        out = check_blocks(records, sizes, nodes)
    out.errors[:0] = errors
    return out
