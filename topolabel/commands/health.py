"""`topolabel health`: fabric health from files, as the operator would judge it (docs/health.md)."""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

from labeler.errors import InputError, SourceError
from labeler.io.documents import read_document
from labeler.io.files import read_text, write_atomic
from labeler.topology.isolation import HEALTHY, History

from ..fabrichealth import Assessment, Evidence, assess, records_from_sysfs
from ..output import emit, for_people, headline, say, shown, title, view_of
from ..tables import Column, View, render
from . import COMMANDS
from .common import cluster_nodes, config_of

EXAMPLES = """examples:
  topolabel health --config topolabel.yaml --nodes nodes.yaml --ibnetdiscover fabric.txt
  topolabel health --nodes nodes.yaml --ibnetdiscover fabric.txt --ibqueryerrors errors.txt --state health.json
  topolabel health --nodes nodes.yaml --sysfs gpu-001=/mnt/gpu-001/sys --sysfs gpu-002=/mnt/gpu-002/sys -o json
  topolabel health --kubeconfig ~/.kube/config          # the agents' port records and the nodes' conditions
Without --state every finding counts as if it had persisted (what the operator does once it has); with it,
the counts, the counters read and the hosts seen carry over from run to run, as the operator keeps them.
exit status: 0 when nothing would be isolated, 1 when something would be (or the brake refused), 2 on errors.
"""


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("health", help=COMMANDS["health"], parents=[parents["config"], parents["output"],
                                                                        parents["cluster"]],
                            epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ibnetdiscover", metavar="FILE", help="an `ibnetdiscover` capture of the fabric")
    parser.add_argument("--ibqueryerrors", metavar="FILE", help="`ibqueryerrors` output: the ports' error counters")
    parser.add_argument("--sysfs", action="append", default=[], metavar="NODE=DIR",
                        help="a node's sysfs tree (its /sys), for its HCA ports; repeat per node")
    parser.add_argument("--hca-pattern", metavar="REGEX", type=pattern,
                        help="count only HCAs whose device name matches")
    parser.add_argument("--state", metavar="FILE", help="read and write the history between runs (JSON)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    cfg = config_of(args)
    nodes = cluster_nodes(args)
    now = time.time()
    history = _read_state(args.state) if args.state else History()
    evidence = Evidence(nodes, hca_pattern=args.hca_pattern)
    trees = dict(_pair(item) for item in args.sysfs)
    unknown = sorted(set(trees) - {n.name for n in nodes})
    if unknown:
        raise InputError(f"--sysfs: no node {unknown[0]!r} in the node list")
    if trees:
        evidence.records = records_from_sysfs(trees, list(cfg.health.counters), history, now)
    if args.ibnetdiscover:
        from providers.infiniband.parse import parse_ibnetdiscover

        evidence.fabric = parse_ibnetdiscover(read_text(args.ibnetdiscover), args.ibnetdiscover)
        evidence.fabric_origin = args.ibnetdiscover
    if args.ibqueryerrors:
        if evidence.fabric is None:
            raise InputError("--ibqueryerrors needs --ibnetdiscover: the fabric says whose ports they are")
        from providers.infiniband.queryerrors import parse_queryerrors

        evidence.errors = parse_queryerrors(read_text(args.ibqueryerrors), args.ibqueryerrors)
    found = assess(cfg, evidence, history, now, sustained=not args.state)
    if args.state:
        write_atomic(args.state, json.dumps(found.history.to_dict(), indent=1) + "\n")
    if for_people(args):
        _table(found, view_of(args))
    else:
        emit(found.to_dict(), args.output)
    return 1 if found.decision.isolated or found.decision.names("held") else 0


def pattern(text: str) -> str:
    """A regular expression (an argparse type)."""
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a regular expression: {exc}") from None
    return text


def _pair(item: str) -> tuple[str, str]:
    node, sep, path = item.partition("=")
    if not sep or not node or not path:
        raise InputError(f"--sysfs {item!r}: expected NODE=DIR")
    if not Path(path).is_dir():
        raise InputError(f"--sysfs {item!r}: {path} is not a directory")
    return node, path


def _read_state(path: str) -> History:
    if not Path(path).exists():
        return History()  # the first run writes it
    try:
        return History.from_dict(read_document(path))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        if isinstance(exc, (InputError, SourceError)):
            raise
        raise InputError(f"{path}: not a topolabel health state: {str(exc)[:200]}") from None


def _table(found: Assessment, view: View) -> None:
    d = found.decision
    states: dict[str, int] = {}
    for v in d.verdicts.values():
        states[v.state] = states.get(v.state, 0) + 1
    lines = title(f"{len(d.verdicts)} node(s): " + ", ".join(f"{n} {s}" for s, n in sorted(states.items())), view)
    for q in d.quarantined:
        lines += headline(f"domain {q.level}={q.value} quarantined: {q.degraded} of {q.size} nodes degraded", view)
    if d.refused:
        lines += headline(d.refused, view)
    rows, more = shown([v for _, v in sorted(d.verdicts.items()) if v.state != HEALTHY], view)
    if rows:
        lines += [*render([Column("NODE", "name"), Column("STATE"), Column("SCOPE", "name"),
                           Column("REASONS", "prose")], [(v.node, v.state, v.scope, "; ".join(v.reasons))
                                                         for v in rows], view), *more]
    for notice in found.notices[:20]:
        lines += headline(f"notice: {notice}", view)
    say(lines)
