"""Slurm's topology from a snapshot: `topology.conf` for topology/tree or topology/block, or `topology.yaml`.

Tree: every domain becomes a switch. A domain with a single child domain is the same group of nodes, so the
two merge (the coarser name stays); a domain whose children are all one-node leaves (a cloud "host" level)
lists those nodes itself. When the coarsest level has more than one domain, a root switch joins them, since
Slurm only lets a job span nodes that share a switch; `root=None` keeps separate fabrics apart.

Block: the domains of one level are the blocks, listed in tree order so that the consecutive runs Slurm
aggregates (2, 4, 8... blocks) fall inside the coarser domains wherever the counts allow. The default level
is the coarsest with more than one domain: it yields the fewest, largest and most even blocks, and Slurm
sizes every block as the base size (the smallest block), so small partial domains of a finer level would
shrink the planning unit for the whole cluster. Finer structure survives in the block order. Another level is
chosen by name (`block_level`), e.g. an NVLink domain level.

Rules from Slurm's own sources: switch names of at most 64 characters (switch_record.c), never both
Switches and Nodes on one line, every child switch defined; BlockSizes start with a base no larger than the
smallest block and continue with base * 2**k for rising k <= 15 (block_record.c); topology.yaml is a list of
entries with `topology` first, `cluster_default`, and exactly one of `tree`, `block`, `flat`.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import yaml

from labeler.config import Config
from labeler.errors import TopologyError
from labeler.labelvalues import short_hash
from labeler.model import ACCELERATOR_LEVELS, Level, Problem, Snapshot

from .base import Export, Exporter
from .domains import Domain, domain_forest, natural
from .hostlist import compress

FORMATS = ("tree", "block", "yaml")
MAX_SWITCH_NAME = 64
MAX_BLOCK_LEVEL = 15
SOURCE = "slurm-export"
_UNSAFE = re.compile(r'[\s,\[\]=#"\\]')  # breaks a hostlist or a key=value line
_TRAILING_DIGITS = re.compile(r"[0-9]+$")


@dataclass(frozen=True)
class NameRule:
    """How a Kubernetes node name becomes a Slurm NodeName: the first regex match replaced, then the domain cut."""

    pattern: str = ""
    replacement: str = ""
    strip_domain: bool = False

    @classmethod
    def parse(cls, spec: str | None, strip_domain: bool = False) -> "NameRule":
        """From `REGEX=REPLACEMENT` (split at the last '=', since node names never hold one)."""
        if not spec:
            return cls(strip_domain=strip_domain)
        pattern, sep, replacement = spec.rpartition("=")
        if not sep or not pattern:
            raise TopologyError(f"--slurm-name {spec!r}: expected REGEX=REPLACEMENT, e.g. '^(.*)-gpu$=\\1'")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise TopologyError(f"--slurm-name {spec!r}: bad regular expression: {exc}") from None
        return cls(pattern, replacement, strip_domain)

    def apply(self, node: str) -> str:
        name = node
        if self.pattern:
            try:
                name = re.sub(self.pattern, self.replacement, name, count=1)
            except (re.error, IndexError) as exc:
                raise TopologyError(f"--slurm-name {self.pattern}={self.replacement}: {exc}") from None
        return name.split(".", 1)[0] if self.strip_domain else name


@dataclass(frozen=True)
class SlurmOptions:
    format: str = "tree"
    names: NameRule = NameRule()
    block_level: str | None = None
    block_sizes: tuple[int, ...] = ()
    root: str | None = "root"
    yaml_default: str = "tree"


@dataclass
class Switch:
    name: str
    height: int
    switches: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)


@dataclass
class Block:
    name: str
    nodes: list[str]
    ancestors: tuple[str, ...]


# ---------------------------------------------------------------------------------------------------------
# Node names


def name_problem(name: str) -> str | None:
    """Why `name` cannot be a Slurm node name in a hostlist, or None."""
    if not name:
        return "is empty"
    if _UNSAFE.search(name):
        return "holds whitespace or one of , [ ] = # \" \\"
    digits = _TRAILING_DIGITS.search(name)
    if digits and int(digits.group()) >= 2**64:
        return "ends in a number too large for Slurm's hostlist (at most 2^64-1)"
    return None


def slurm_names(nodes: Iterable[str], rule: NameRule) -> tuple[dict[str, str], list[Problem]]:
    """Kubernetes node name -> Slurm name; unusable names become problems, two nodes on one name an error."""
    names: dict[str, str] = {}
    owner: dict[str, str] = {}
    problems = []
    for node in sorted(nodes):
        name = rule.apply(node)
        bad = name_problem(name)
        if bad:
            problems.append(Problem(SOURCE, f"Slurm name {name!r} {bad}; the node is left out", node))
            continue
        if name in owner:
            raise TopologyError(f"nodes {owner[name]!r} and {node!r} both become Slurm node {name!r}; "
                                "change --slurm-name / --strip-domain")
        owner[name] = node
        names[node] = name
    return names, problems


# ---------------------------------------------------------------------------------------------------------
# topology/tree


def _simplify(domain: Domain) -> Domain:
    children = [_simplify(c) for c in domain.children]
    if len(children) == 1:
        return Domain(domain.depth, domain.value, domain.nodes, children[0].children)
    if all(not c.children and len(c.nodes) == 1 for c in children):
        children = []
    return Domain(domain.depth, domain.value, domain.nodes, children)


def switches(forest: list[Domain], levels: tuple[Level, ...], root: str | None = "root") -> list[Switch]:
    """Switches with children listed before their parents (so Slurm resolves them in one pass)."""
    tops = [_simplify(d) for d in forest]
    domains = [d for top in tops for d in top.walk()]
    seen = Counter(d.value for d in domains)
    names = {id(d): _switch_name(d, levels, seen[d.value] > 1) for d in domains}
    if root and len(tops) > 1:
        if _UNSAFE.search(root) or not 0 < len(root) <= MAX_SWITCH_NAME:
            raise TopologyError(f"root switch name {root!r} must be 1-{MAX_SWITCH_NAME} characters without "
                                "whitespace or , [ ] = # \" \\")
        top = Domain(-1, root, [n for t in tops for n in t.nodes], tops)
        domains.append(top)
        names[id(top)] = root
    taken = Counter(names.values())
    clash = sorted(n for n, count in taken.items() if count > 1)
    if clash:
        raise TopologyError(f"switch name(s) {', '.join(clash[:3])} would be defined twice (a value equals "
                            "another level's '<level>-<value>' name or the root); rename a level or --root-switch")
    out = [Switch(names[id(d)], _height(d), [names[id(c)] for c in d.children],
                  [] if d.children else list(d.nodes)) for d in domains]
    return sorted(out, key=lambda s: (s.height, natural(s.name)))


def _switch_name(domain: Domain, levels: tuple[Level, ...], qualify: bool) -> str:
    """The label value, prefixed with its level when another level uses the same value; 64 characters."""
    name = f"{levels[domain.depth].name}-{domain.value}" if qualify else domain.value
    if len(name) <= MAX_SWITCH_NAME:
        return name
    return f"{name[:MAX_SWITCH_NAME - 9].rstrip('-.')}-{short_hash(name)}"


def _height(domain: Domain) -> int:
    return 1 + max((_height(c) for c in domain.children), default=-1)


def tree_conf(switch_list: list[Switch]) -> str:
    lines = []
    for sw in switch_list:
        members = f"Switches={compress(sw.switches)}" if sw.switches else f"Nodes={compress(sw.nodes)}"
        lines.append(f"SwitchName={sw.name} {members}\n")
    return "".join(lines)


# ---------------------------------------------------------------------------------------------------------
# topology/block


def block_depth(forest: list[Domain], levels: tuple[Level, ...], requested: str | None = None) -> int:
    """The level whose domains become blocks: the one named, else an accelerator (NVLink) domain level,
    else the coarsest with more than one domain."""
    names = [lv.name for lv in levels]
    if requested:
        if requested not in names:
            raise TopologyError(f"--block-level {requested!r} is not a level of the snapshot "
                                f"(levels: {', '.join(names)})")
        return names.index(requested)
    accelerator = next((name for name in names if name in ACCELERATOR_LEVELS), None)
    if accelerator:
        return names.index(accelerator)
    counts = Counter(d.depth for top in forest for d in top.walk())
    return next((depth for depth in range(len(levels)) if counts[depth] > 1), len(levels) - 1)


def blocks(forest: list[Domain], depth: int) -> list[Block]:
    """The domains at `depth` in tree order: blocks that share a coarser domain are consecutive."""
    out: list[Block] = []

    def visit(domain: Domain, ancestors: tuple[str, ...]) -> None:
        if domain.depth == depth:
            out.append(Block(domain.value, list(domain.nodes), ancestors))
            return
        for child in domain.children:
            visit(child, ancestors + (domain.value,))

    for top in forest:
        visit(top, ())
    return out


def block_sizes(block_list: list[Block], requested: Iterable[int] = ()) -> list[int]:
    """BlockSizes: the requested ones once checked, else the smallest block times 1, 2, 4... up to the count."""
    smallest = min(len(b.nodes) for b in block_list)
    sizes = list(requested)
    if sizes:
        problem = block_sizes_problem(sizes, smallest)
        if problem:
            raise TopologyError(f"--block-sizes {','.join(map(str, sizes))}: {problem}")
        return sizes
    doublings = min(len(block_list).bit_length() - 1, MAX_BLOCK_LEVEL)
    return [smallest << k for k in range(doublings + 1)]


def block_sizes_problem(sizes: list[int], smallest: int) -> str | None:
    """Why Slurm would refuse these BlockSizes for blocks whose smallest holds `smallest` nodes, or None."""
    if not sizes or any(s <= 0 for s in sizes):
        return "sizes must be positive"
    base = sizes[0]
    if base > smallest:
        return f"the base size {base} is larger than the smallest block ({smallest} nodes)"
    exponents = []
    for size in sizes[1:]:
        ratio = size // base
        if size % base or ratio & (ratio - 1):
            return f"{size} is not the base {base} times a power of two"
        exponents.append(ratio.bit_length() - 1)
    if exponents != sorted(set(exponents)) or (exponents and exponents[0] == 0):
        return "sizes must rise"
    if exponents and exponents[-1] > MAX_BLOCK_LEVEL:
        return f"sizes may reach at most the base times 2^{MAX_BLOCK_LEVEL}"
    return None


def block_notes(block_list: list[Block], sizes: list[int], levels: tuple[Level, ...]) -> list[Problem]:
    """Notices a Slurm admin should see: uneven blocks, and aggregates that cut across a coarser domain."""
    notes = []
    counts = sorted({len(b.nodes) for b in block_list})
    if len(counts) > 1:
        notes.append(Problem(SOURCE, f"blocks hold {counts[0]} to {counts[-1]} nodes; Slurm plans in units of "
                                     f"the base block size {sizes[0]}, so larger blocks are used as if they "
                                     "were that size (set --block-sizes or another --block-level to change it)"))
    for size in sizes[1:]:
        span = size // sizes[0]
        groups = [block_list[i:i + span] for i in range(0, len(block_list), span)]
        cut = [(g, depth) for g in groups if len(g) == span and (depth := _cut_depth(g, block_list)) is not None]
        if cut:
            (first, depth), count = cut[0], len(cut)
            notes.append(Problem(SOURCE, f"BlockSizes {size}: {count} of {len(groups)} aggregates of {span} "
                                         f"consecutive blocks take part of a {levels[depth].name} domain "
                                         f"(e.g. {first[0].name}..{first[-1].name}), since those domains do "
                                         "not hold a power of two blocks each"))
    return notes


def _cut_depth(group: list[Block], block_list: list[Block]) -> int | None:
    """The coarsest level at which the group spans several domains without holding all of their blocks."""
    for depth in range(len(group[0].ancestors)):
        touched = {b.ancestors[depth] for b in group}
        if len(touched) > 1 and sum(b.ancestors[depth] in touched for b in block_list) != len(group):
            return depth
    return None


def block_conf(block_list: list[Block], sizes: list[int]) -> str:
    lines = [f"BlockName={b.name} Nodes={compress(b.nodes)}\n" for b in block_list]
    return "".join(lines) + f"BlockSizes={','.join(map(str, sizes))}\n"


# ---------------------------------------------------------------------------------------------------------
# topology.yaml and the whole export


def topology_yaml(switch_list: list[Switch], block_list: list[Block], sizes: list[int], default: str) -> str:
    """Both topologies as Slurm's topology.yaml; `default` (tree or block) is the cluster default."""
    if default not in ("tree", "block"):
        raise TopologyError(f"the default topology must be tree or block, not {default!r}")
    tree = [{"switch": s.name, **({"children": compress(s.switches)} if s.switches else {"nodes": compress(s.nodes)})}
            for s in switch_list]
    entries = [
        {"topology": "tree", "cluster_default": default == "tree", "tree": {"switches": tree}},
        {"topology": "block", "cluster_default": default == "block",
         "block": {"block_sizes": sizes, "blocks": [{"block": b.name, "nodes": compress(b.nodes)} for b in block_list]}},
    ]
    return yaml.safe_dump(entries, sort_keys=False, default_flow_style=False, width=1 << 20)


def export_slurm(snapshot: Snapshot, options: SlurmOptions = SlurmOptions()) -> Export:
    """The Slurm topology text in `options.format`, and the problems met (nodes left out, notices)."""
    if options.format not in FORMATS:
        raise TopologyError(f"unknown Slurm format {options.format!r}; choose {', '.join(FORMATS)}")
    names, problems = slurm_names(snapshot.nodes, options.names)
    if not names:
        raise TopologyError("no node of the snapshot can be written to a Slurm topology")
    forest = domain_forest(snapshot, names)
    levels = " > ".join(lv.name for lv in snapshot.levels)
    header = f"# Generated by topolabel from {len(names)} nodes (levels: {levels}); regenerate, do not edit.\n"
    depth = block_depth(forest, snapshot.levels, options.block_level)
    switch_list = switches(forest, snapshot.levels, options.root) if options.format != "block" else []
    if options.format == "tree":
        return Export(header + tree_conf(switch_list), problems=problems)
    block_list = blocks(forest, depth)
    sizes = block_sizes(block_list, options.block_sizes)
    problems += block_notes(block_list, sizes, snapshot.levels)
    header += f"# Blocks are {snapshot.levels[depth].name} domains, in tree order.\n"
    if options.format == "block":
        return Export(header + block_conf(block_list, sizes), problems=problems)
    return Export(header + topology_yaml(switch_list, block_list, sizes, options.yaml_default), problems=problems)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=FORMATS, default="tree",
                        help="tree or block: topology.conf for that plugin; yaml: topology.yaml with both")
    parser.add_argument("--block-level", metavar="LEVEL",
                        help="the level whose domains are blocks (default: the coarsest with more than one domain)")
    parser.add_argument("--block-sizes", metavar="N,N,...", type=_sizes,
                        help="BlockSizes (default: the smallest block's node count, doubled up to the block count)")
    parser.add_argument("--slurm-name", metavar="REGEX=REPL",
                        help="rewrite node names into Slurm NodeNames (Python re.sub; default: unchanged)")
    parser.add_argument("--strip-domain", action="store_true",
                        help="cut node names at the first '.' (after --slurm-name)")
    parser.add_argument("--root-switch", metavar="NAME", default="root",
                        help="the switch joining the coarsest domains in a tree (default: root)")
    parser.add_argument("--no-root-switch", action="store_true",
                        help="no joining switch: Slurm then never spans a job across coarsest domains")
    parser.add_argument("--yaml-default", choices=("tree", "block"), default="tree",
                        help="which topology in topology.yaml is the cluster default (default: tree)")


def _sizes(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of numbers") from None


def _export(snapshot: Snapshot, cfg: Config, flags: Mapping[str, Any]) -> Export:
    options = SlurmOptions(format=flags["format"], names=NameRule.parse(flags["slurm_name"], flags["strip_domain"]),
                           block_level=flags["block_level"], block_sizes=flags["block_sizes"] or (),
                           root=None if flags["no_root_switch"] else flags["root_switch"],
                           yaml_default=flags["yaml_default"])
    return export_slurm(snapshot, options)


EXPORTER = Exporter("slurm", "topology.conf (tree or block) or topology.yaml", False, add_arguments, _export)
