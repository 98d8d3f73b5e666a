"""`topolabel verify`: labels against a fresh discovery, or one source against another."""

from __future__ import annotations

import argparse

from labeler.errors import TopologyError
from labeler.topology.model import Snapshot
from labeler.topology.verify import Report, compare_sources, label_drift

from ..output import emit, for_people, names, say, shown, title, view_of
from ..tables import Column, View, render
from ..pipeline import discover, read_config, read_snapshot, source_options
from . import COMMANDS
from .common import cluster_nodes, config_of, snapshot_of

EXAMPLES = """examples:
  topolabel verify --config topolabel.yaml --kubeconfig ~/.kube/config          # labels vs fresh discovery
  topolabel verify --snapshot aws.json --against ib.json                         # two sources
  topolabel verify --config aws.yaml --against-config ib.yaml --nodes nodes.yaml --pair layer-3=leafgroup
exit status: 0 when everything agrees, 1 when something differs, 2 on errors.
"""


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("verify", help=COMMANDS["verify"],
                            parents=[parents["config"], parents["output-nodes"], parents["cluster"], parents["snapshot"],
                                     parents["source"]],
                            epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", metavar="SNAPSHOT", help="compare with this snapshot instead of the labels")
    parser.add_argument("--against-config", metavar="FILE", help="compare with a discovery from this config")
    parser.add_argument("--pair", action="append", default=[], metavar="A=B",
                        help="compare level A with level B (repeatable; default: same names, else finest up)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    cfg = config_of(args)
    two_sources = args.against or args.against_config
    nodes = cluster_nodes(args, required=not (two_sources and args.snapshot))
    snap = snapshot_of(args, cfg, nodes)
    if two_sources:
        report = compare_sources(snap, _other(args, nodes), _pairs(args.pair), _names(args))
    else:
        report = label_drift(snap, nodes)
    if for_people(args):
        _table(report, view_of(args))
    elif args.output == "name":
        names("node", sorted({d.node for d in report.disagreements}))
    else:
        emit(report.to_dict(), args.output)
    return 1 if report.disagreements else 0


def _other(args: argparse.Namespace, nodes: list) -> Snapshot:
    if args.against:
        return read_snapshot(args.against)
    other = read_config(args.against_config)
    source, options = source_options(other, {})
    return discover(other, source, options, nodes, origin=args.against_config)


def _names(args: argparse.Namespace) -> tuple[str, str]:
    first = args.snapshot or args.config or "discovery"
    second = args.against or args.against_config
    return (first, second) if first != second else ("a", "b")


def _pairs(raw: list[str]) -> list[tuple[str, str]]:
    pairs = []
    for item in raw:
        a, sep, b = item.partition("=")
        if not sep or not a or not b:
            raise TopologyError(f"--pair {item!r}: expected LEVEL_A=LEVEL_B")
        pairs.append((a, b))
    return pairs


def _table(report: Report, view: View) -> None:
    lines = title(f"{report.compared} node(s) compared, {len(report.disagreements)} disagreement(s); only in "
                     f"{report.a}: {len(report.only_in_a)}, only in {report.b}: {len(report.only_in_b)}", view)
    if report.disagreements:
        rows, more = shown(report.disagreements, view)
        lines += [*render([Column("NODE", "name"), Column("LEVEL", "name"), Column(report.a),
                           Column(report.b)], [(d.node, d.level, d.a or "(none)", d.b or "(none)")
                                                       for d in rows], view), *more]
    say(lines)
