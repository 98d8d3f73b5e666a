"""`topolabel fit`: would Kueue's Topology-Aware Scheduling admit this job now, and where?"""

from __future__ import annotations

import argparse
import sys

from rich.markup import escape

from kueue_config.tas import jobfile
from kueue_config.tas.capacity import free_capacity
from kueue_config.tas.fit import FitReport, PodSetFit, fit
from kueue_config.tas.gates import Gates
from kueue_config.tas.lint import LintContext, lint, rejections
from kueue_config.tas.render_tree import short_names
from kueue_config.tas.setup import Queue, TASSetup
from kueue_config.tas.workloads import QUEUE_LABEL, Workload, workloads_in
from labeler.errors import TopologyError
from labeler.files import read_text

from ..output import console, emit, for_people, view_of
from ..tables import Column, View, render
from . import COMMANDS
from .common import cluster_nodes, config_of
from .tas_common import flavor_parent, placed_nodes, running_pods, tas_context, tas_parent

EXAMPLES = """examples:
  topolabel fit job.yaml --kubeconfig ~/.kube/config
  topolabel fit job.yaml --nodes nodes.yaml --pods pods.yaml --kueue-dir gitops/kueue -o json
  topolabel fit examples/jobs/pytorchjob.yaml --config examples/topolabel.yaml --snapshot snap.json \\
      --nodes examples/nodes.yaml
exit status: 0 fits, 1 does not fit, 2 bad input or a job Kueue rejects, or one fit cannot judge
"""
SHOWN_NODES = 3


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("fit", help=COMMANDS["fit"],
                            parents=[parents["config"], parents["output"], parents["cluster"], parents["snapshot"], tas_parent(),
                                     flavor_parent()],
                            epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", metavar="FILE", help="job YAML, annotated for TAS (- for stdin)")
    parser.add_argument("--kueue-feature-gates", metavar="GATES",
                        help="Kueue's feature gates when not the v0.19.2 defaults, e.g. TASBalancedPlacement=true; "
                             "fit refuses (exit 2) where a gate it does not model would change the answer")
    parser.set_defaults(run=run)


def queue_of(setup: TASSetup, workload: Workload, flavor: str | None, topology: str | None) -> Queue:
    """The flavors Kueue would try for this workload, narrowed by --flavor / --topology."""
    name = ((workload.obj.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)
    queue = setup.queue(str(name) if name else None, workload.namespace or "default")
    if flavor and flavor not in setup.flavors:
        raise TopologyError(f"no ResourceFlavor {flavor!r}; known: {', '.join(sorted(setup.flavors)) or 'none'}")
    if topology and topology not in setup.topologies:
        raise TopologyError(f"no Topology {topology!r}; known: {', '.join(sorted(setup.topologies)) or 'none'}")
    narrowed = queue.only(flavor, topology)
    if flavor and not narrowed.flavors:
        narrowed = Queue(queue.cluster_queue, (setup.flavors[flavor],), queue.covered)
    return narrowed


def check_accepted(workload: Workload, queue: Queue, gates: Gates, origin: str) -> None:
    """Refuse (exit 2) a job Kueue or the API server would reject: there is nothing to place."""
    keys = tuple(f.levels for f in queue.flavors if f.levels) or None
    refused = rejections(lint([workload], LintContext(keys, queue.tas_only, gates)))
    if refused:
        first = refused[0]
        more = f" (and {len(refused) - 1} more; `topolabel job check` lists them)" if len(refused) > 1 else ""
        verb = "rejects" if first.effect == "rejected" else "cannot create the Workload of"
        raise TopologyError(f"{origin}: Kueue {verb} {first.object}: {first.path}: {first.message}{more}")


def _request(p: PodSetFit) -> str:
    return f"{p.mode} {p.level.rsplit('/', 1)[-1] if p.level else ''}".strip()


def _where(p: PodSetFit) -> list[str]:
    """The domains at the placement level, by short name (hash values cut), with their pods."""
    names = short_names([d["values"][-1] for d in p.domains])
    return [f"{names[d['values'][-1]]} ({d['pods']})" for d in p.domains] or ["-"]


def _nodes(p: PodSetFit) -> list[str]:
    if not p.fits:
        return ["no place"]
    lines = [f"{n.get('node') or n.get('domain')}: {n['pods']}" for n in p.nodes[:SHOWN_NODES]]
    if len(p.nodes) > SHOWN_NODES:
        lines.append(f"+{len(p.nodes) - SHOWN_NODES} more (-o json)")
    return lines or ["-"]


def print_report(workload: Workload, report: FitReport, view: View) -> None:
    con = console()
    where = []
    if report.flavor:
        where.append(f"flavor {report.flavor}")
    if report.topology:
        where.append(f"Topology {report.topology}, {report.nodes_counted} node(s) counted")
    verdict = "[green]fits[/]" if report.fits else "[red]does not fit[/]"
    pods = sum(p.pods for p in report.podsets)
    con.print(f"{escape(workload.ref)}: {verdict} - {pods} pod(s) in {len(report.podsets)} PodSet(s)"
              + (f"; {escape(', '.join(where))}" if where else ""))
    if report.kueue_message:
        con.print(f"Kueue: {escape(report.kueue_message)}")
    several = workload.workloads > 1
    rows = [((f"{p.workload}/" if several else "") + p.podset, str(p.pods), _request(p), _where(p), _nodes(p))
            for p in report.podsets]
    for line in render([Column("PODSET", "name"), Column("PODS", right=True), Column("REQUEST", "prose"),
                        Column("PLACED IN"), Column("NODES: PODS")], rows, view):
        con.print(line, markup=False)
    for p in report.podsets:
        if p.note:
            con.print(f"[yellow]note:[/] PodSet {escape(p.podset)}: {escape(p.note)}")
    excluded = report.excluded.text(report.flavor, report.flavor_labels)
    if excluded:
        con.print(f"nodes left out: {escape(excluded)}")
    failed = [a for a in report.attempts if not a.fits]
    if len(report.attempts) > 1 and failed:
        con.print("Kueue tries the flavors in turn, one scheduling cycle each (and again whenever the cluster "
                  "changes, so a pending Workload shows each message in turn):")
        for a in report.attempts:
            outcome = "admits it" if a.fits else escape(a.message)
            con.print(f"  {escape('+'.join(a.flavors) or '(no flavor)')}: {outcome}")
    for note in report.problems:
        con.print(f"[yellow]note:[/] {escape(note)}")


def run(args: argparse.Namespace) -> int:
    cfg = config_of(args)
    gates = Gates.parse(args.kueue_feature_gates)
    docs = jobfile.load(read_text(args.file), args.file)
    workloads = workloads_in(docs, args.file)
    nodes = cluster_nodes(args)
    ctx = tas_context(args, cfg, nodes)
    if ctx.setup is None:
        raise TopologyError("no Kueue set-up: give --kueue-dir, --snapshot, or --kubeconfig for a cluster with Kueue")
    nodes, notes = placed_nodes(nodes, ctx.snapshot)
    if args.nodes and not args.pods:
        notes.append("no --pods given: every node counts as empty")
    free = free_capacity(nodes, running_pods(args))
    reports = []
    for workload in workloads:
        queue = queue_of(ctx.setup, workload, args.flavor, args.topology)
        check_accepted(workload, queue, gates, args.file)
        report = fit(workload, nodes, free, queue, gates)
        if queue.cluster_queue is None:
            report.problems.append("the job's queue does not resolve to a ClusterQueue here; every flavor was tried")
        report.problems += notes
        reports.append(report)
    if for_people(args):
        for workload, report in zip(workloads, reports):
            print_report(workload, report, view_of(args))
    else:
        data = [r.to_dict() for r in reports]
        emit(data[0] if len(data) == 1 else data, args.output)
    if not all(r.fits for r in reports):
        print(f"topolabel fit: {sum(not r.fits for r in reports)} workload(s) would stay pending", file=sys.stderr)
        return 1
    return 0
