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

As Topograph users expect: `trim_tiers` drops the coarsest levels, `no_topology` puts the nodes without
topology under a `no-topology` switch of the tree (off by default, see docs/exports.md), and topology.yaml may
hold several named topologies, each over the nodes its node selector picks (`export.slurm.topologies`).
Modules: names (NodeNames), tree, block, topologies (topology.yaml and the choices above).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from labeler.errors import TopologyError
from labeler.io.nodes import Node
from labeler.settings.config import Config
from labeler.topology.model import Problem, Snapshot

from ..base import Export, Exporter
from ..domains import Domain, domain_forest, natural
from .block import Block, block_conf, block_depth, block_notes, block_sizes, block_sizes_problem, blocks
from .names import SOURCE, NameRule, slurm_names
from .options import SlurmExportOptions, SlurmLayout
from .topologies import (NO_TOPOLOGY, Topology, TopologySpec, check_specs, default_name, node_labels, selects,
                         topology_yaml, trim, without_topology)
from .tree import Switch, switches, tree_conf

__all__ = ["EXPORTER", "FORMATS", "NameRule", "SlurmExportOptions", "SlurmLayout", "SlurmOptions", "SlurmTopologies",
           "Topology", "TopologySpec", "add_arguments", "block_sizes_problem", "export_slurm", "slurm_options",
           "slurm_topologies"]

FORMATS = ("tree", "block", "yaml")


@dataclass(frozen=True)
class SlurmOptions:
    format: str = "tree"
    names: NameRule = NameRule()
    block_level: str | None = None
    block_sizes: tuple[int, ...] = ()
    root: str | None = "root"
    yaml_default: str = "tree"
    trim_tiers: int = 0
    no_topology: bool = False
    topologies: tuple[TopologySpec, ...] = ()
    stable: bool = False  # switches that do not depend on node counts (`tree.switches`)


@dataclass
class SlurmTopologies:
    """topology.yaml's entries, the header to put above them, the Slurm name of each node written, and the
    problems met."""

    header: str
    topologies: list[Topology]
    names: dict[str, str]
    problems: list[Problem]


@dataclass
class _Input:
    """The snapshot once trimmed, Slurm names of the nodes written, and the nodes placed under `no-topology`."""

    snapshot: Snapshot
    names: dict[str, str]
    unplaced: list[str]


def export_slurm(snapshot: Snapshot, options: SlurmOptions = SlurmOptions(), nodes: Sequence[Node] = ()) -> Export:
    """The Slurm topology text in `options.format`, and the problems met (nodes left out, notices).

    `nodes`: the cluster's nodes when known, for nodes without topology and for node selectors.
    """
    if options.format not in FORMATS:
        raise TopologyError(f"unknown Slurm format {options.format!r}; choose {', '.join(FORMATS)}")
    if options.format == "yaml":
        found = slurm_topologies(snapshot, options, nodes)
        return Export(found.header + topology_yaml([t.entry() for t in found.topologies]), problems=found.problems)
    given, header, problems = _prepare(snapshot, options, nodes)
    if options.topologies:
        problems.append(Problem(SOURCE, "export.slurm.topologies are written only with --format yaml; "
                                        f"this {options.format} topology covers every node"))
    every = list(given.names)
    if options.format == "tree":
        return Export(header + tree_conf(_switches(given, every, options.root, options.stable)), problems=problems)
    block_list, sizes, depth, notes = _blocks(given, every, options.block_level, options.block_sizes)
    header += f"# Blocks are {given.snapshot.levels[depth].name} domains, in tree order.\n"
    return Export(header + block_conf(block_list, sizes), problems=problems + notes)


def slurm_topologies(snapshot: Snapshot, options: SlurmOptions = SlurmOptions(),
                     nodes: Sequence[Node] = ()) -> SlurmTopologies:
    """topology.yaml's entries: the named topologies of `options.topologies`, each over the nodes its selector
    picks, else a tree and a block topology over every node (`options.yaml_default` the cluster default)."""
    given, header, problems = _prepare(snapshot, options, nodes)
    if options.topologies:
        topologies, notes = _named(given, options, {n.name: n.labels for n in nodes})
        return SlurmTopologies(header, topologies, given.names, problems + notes)
    if options.yaml_default not in ("tree", "block"):
        raise TopologyError(f"the default topology must be tree or block, not {options.yaml_default!r}")
    every = list(given.names)
    block_list, sizes, depth, notes = _blocks(given, every, options.block_level, options.block_sizes, options.stable)
    header += f"# Blocks are {given.snapshot.levels[depth].name} domains, in tree order.\n"
    topologies = [Topology("tree", options.yaml_default == "tree", "tree",
                           switches=_switches(given, every, options.root, options.stable)),
                  Topology("block", options.yaml_default == "block", "block", blocks=block_list, sizes=sizes)]
    return SlurmTopologies(header, topologies, given.names, problems + notes)


def _prepare(snapshot: Snapshot, options: SlurmOptions, nodes: Sequence[Node]) -> tuple[_Input, str, list[Problem]]:
    """The trimmed snapshot, the Slurm names of the nodes written and of those without topology, the header."""
    if options.no_topology and options.format == "block":
        raise TopologyError("--no-topology puts nodes under a switch of topology/tree; a block topology has no place "
                            "for them (use --format tree or yaml)")
    snapshot = trim(snapshot, options.trim_tiers)
    if options.block_level:
        block_depth([], snapshot.levels, options.block_level)  # a level that is not there is an error in any format
    unplaced = without_topology(snapshot, (n.name for n in nodes)) if options.no_topology else []
    names, problems = slurm_names([*snapshot.nodes, *unplaced], options.names)
    if not set(names) & set(snapshot.nodes):
        raise TopologyError("no node of the snapshot can be written to a Slurm topology")
    given = _Input(snapshot, names, [n for n in unplaced if n in names])
    levels = " > ".join(lv.name for lv in snapshot.levels)
    counted = "" if options.stable else f" from {len(names)} nodes"  # stable: nothing that node churn changes
    header = f"# Generated by topolabel{counted} (levels: {levels}); regenerate, do not edit.\n"
    if given.unplaced:
        many = "" if options.stable else f"{len(given.unplaced)} "
        header += f"# {many}node(s) without topology are under the switch {NO_TOPOLOGY}.\n"
    return given, header, problems


def _forest(given: _Input, members: Sequence[str]) -> list[Domain]:
    placed = {n: given.names[n] for n in members if n in given.snapshot.nodes}
    return domain_forest(given.snapshot, placed) if placed else []


def _switches(given: _Input, members: Sequence[str], root: str | None, stable: bool = False) -> list[Switch]:
    """The tree's switches over `members`; their nodes without topology under one more leaf switch."""
    forest = _forest(given, members)
    loose = sorted((given.names[n] for n in given.unplaced if n in members), key=natural)
    if loose:
        forest.append(Domain(len(given.snapshot.levels) - 1, NO_TOPOLOGY, loose))
    return switches(forest, given.snapshot.levels, root, stable)


def _blocks(given: _Input, members: Sequence[str], level: str | None, requested: Sequence[int],
            stable: bool = False) -> tuple[list[Block], list[int], int, list[Problem]]:
    forest = _forest(given, members)
    depth = block_depth(forest, given.snapshot.levels, level)
    block_list = blocks(forest, depth)
    sizes = block_sizes(block_list, requested, counted=not stable)
    return block_list, sizes, depth, block_notes(block_list, sizes, given.snapshot.levels)


def _named(given: _Input, options: SlurmOptions,
           cluster: Mapping[str, Mapping[str, str]]) -> tuple[list[Topology], list[Problem]]:
    """The configured topologies, each over the nodes its selector picks."""
    specs = options.topologies
    check_specs(specs)
    default = default_name(specs)
    labels = node_labels(given.snapshot, cluster)
    entries, notes = [], []
    for spec in specs:
        if spec.plugin == "flat":
            entries.append(Topology(spec.name, spec.name == default, "flat"))
            continue
        members = [n for n in given.names if selects(spec, labels.get(n, {}))
                   and (n in given.snapshot.nodes or spec.plugin == "tree")]  # blocks hold placed nodes only
        if not members:
            hint = "" if cluster else " (without --nodes or --kubeconfig only the snapshot's topology labels are known)"
            raise TopologyError(f"export.slurm.topologies: {spec.name}: nodeSelector {dict(spec.selector)} selects no "
                                f"node{' with topology' if spec.plugin == 'block' else ''}{hint}")
        if spec.plugin == "tree":
            entries.append(Topology(spec.name, spec.name == default, "tree",
                                    switches=_switches(given, members, options.root, options.stable)))
            continue
        block_list, sizes, _, found = _blocks(given, members, spec.block_level or options.block_level,
                                              spec.block_sizes or options.block_sizes, options.stable)
        notes += [Problem(p.source, f"topology {spec.name}: {p.message}", p.node) for p in found]
        entries.append(Topology(spec.name, spec.name == default, "block", blocks=block_list, sizes=sizes))
    return entries, notes


def add_arguments(parser: argparse.ArgumentParser, formats: bool = True) -> None:
    """The Slurm export's flags, named as `SlurmExportOptions`' fields and None when not given; without
    `formats` (an export that always writes topology.yaml) no --format."""
    if formats:
        parser.add_argument("--format", choices=FORMATS,
                            help="tree or block: topology.conf for that plugin; yaml: topology.yaml with both, or "
                                 "with the named topologies of export.slurm.topologies in the config")
    parser.add_argument("--block-level", metavar="LEVEL",
                        help="the level whose domains are blocks (default: the coarsest with more than one domain)")
    parser.add_argument("--block-sizes", metavar="N,N,...", type=_sizes,
                        help="BlockSizes (default: the smallest block's node count, doubled up to the block count)")
    parser.add_argument("--slurm-name", metavar="REGEX=REPL",
                        help="rewrite node names into Slurm NodeNames (Python re.sub; default: unchanged)")
    parser.add_argument("--strip-domain", action="store_true", default=None,
                        help="cut node names at the first '.' (after --slurm-name)")
    parser.add_argument("--root-switch", metavar="NAME",
                        help="the switch joining the coarsest domains in a tree (default: root)")
    parser.add_argument("--no-root-switch", action="store_true", default=None,
                        help="no joining switch: Slurm then never spans a job across coarsest domains")
    parser.add_argument("--yaml-default", choices=("tree", "block"),
                        help="which topology in topology.yaml is the cluster default (default: tree)")
    parser.add_argument("--trim-tiers", metavar="N", type=int,
                        help="drop the N coarsest levels first, as Topograph's trimTiers (default: 0)")
    parser.add_argument("--no-topology", action="store_true", default=None,
                        help=f"put nodes without topology under a switch {NO_TOPOLOGY!r} so Slurm can use them "
                             "(tree only; default: leave them out, reported as problems)")


def _sizes(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of numbers") from None


def slurm_options(given: SlurmLayout, **overrides: Any) -> SlurmOptions:
    """The exporter's options (a config section and flags, checked) as `export_slurm` takes them."""
    topologies = tuple(TopologySpec(t.name, t.plugin, dict(t.node_selector), t.cluster_default, t.block_level,
                                    tuple(t.block_sizes)) for t in given.topologies)
    fields = dict(names=NameRule.parse(given.slurm_name, given.strip_domain), block_level=given.block_level,
                  block_sizes=tuple(given.block_sizes), root=None if given.no_root_switch else given.root_switch,
                  yaml_default=given.yaml_default,
                  trim_tiers=given.trim_tiers, no_topology=given.no_topology, topologies=topologies)
    return SlurmOptions(**{**fields, **overrides})


def _export(snapshot: Snapshot, cfg: Config, given: SlurmExportOptions, nodes: Sequence[Node]) -> Export:
    return export_slurm(snapshot, slurm_options(given, format=given.format), nodes)


EXPORTER = Exporter("slurm", "topology.conf (tree or block) or topology.yaml", False, add_arguments, _export,
                    SlurmExportOptions)
