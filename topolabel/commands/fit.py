"""`topolabel fit`: would Kueue admit this job now - queue, quota, topology, preemption - and if not, what would?"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rich.markup import escape

from kueue_config.tas import jobfile
from kueue_config.tas.advice import Advice, advise, explain
from kueue_config.tas.fit import BLOCKED, FITS, PREEMPTS, FitReport, PodSetFit
from kueue_config.tas.gates import Gates
from kueue_config.tas.judge import Inputs, judge, resolved_queue
from kueue_config.tas.lint import LintContext, lint, rejections
from kueue_config.tas.render_tree import short_names
from kueue_config.tas.setup import Queue
from kueue_config.tas.workloads import Workload, workloads_in
from labeler.errors import TopologyError
from labeler.io.files import read_text

from ..output import console, emit, for_people, view_of
from ..tables import Column, View, render
from . import COMMANDS
from .tas_common import admission_parent, flavor_parent, read_admission, tas_parent

EXAMPLES = """examples:
  topolabel fit job.yaml --kubeconfig ~/.kube/config
  topolabel fit job.yaml --kubeconfig ~/.kube/config --drain b01 --without team-a/job-big-1a2b3
  topolabel fit job.yaml --nodes nodes.yaml --pods pods.yaml --workloads workloads.yaml --kueue-dir gitops/kueue -o json
  topolabel fit examples/jobs/pytorchjob.yaml --config examples/topolabel.yaml --snapshot snap.json \\
      --nodes examples/nodes.yaml
exit status: 0 fits, 1 does not fit (or only by preempting), 2 bad input or a job Kueue rejects, or one fit
cannot judge
"""
SHOWN_NODES = 3
NOTHING_FITS = ("none of the changes fit tries makes it fit now (fewer pods in whole slices, `preferred` or a "
                "coarser level, another LocalQueue or namespace, waiting for admitted workloads, fewer pods once "
                "they finish); what stops it is above")
VERDICTS = {FITS: "[green]fits[/]", PREEMPTS: "[yellow]fits only by preempting[/]",
            BLOCKED: "[red]stopped by its queue[/]"}


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("fit", help=COMMANDS["fit"],
                            parents=[parents["config"], parents["output"], parents["cluster"], parents["snapshot"],
                                     tas_parent(), flavor_parent(), admission_parent()],
                            epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", metavar="FILE", help="job YAML, annotated for TAS (- for stdin)")
    gates_flag(parser)
    parser.add_argument("--no-advice", action="store_true",
                        help="only Kueue's answer: skip the search for changes that would fit")
    parser.set_defaults(run=run)


def gates_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kueue-feature-gates", metavar="GATES",
                        help="Kueue's feature gates when not the v0.19.2 defaults, e.g. TASBalancedPlacement=true; "
                             "fit refuses (exit 2) where a gate it does not model would change the answer")


def queue_of(inputs: Inputs, workload: Workload, flavor: str | None, topology: str | None) -> Queue:
    """The flavors Kueue would try for this workload, narrowed by --flavor / --topology."""
    return resolved_queue(workload, inputs, flavor, topology).queue


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


def print_report(workload: Workload, report: FitReport, why: list[str], advice: list[Advice] | None,
                 view: View) -> None:
    """The answer for people: the verdict, Kueue's own message once, why in plain words, what would fit."""
    con = console()
    where = []
    if report.local_queue:
        where.append(f"LocalQueue {report.local_queue}" + (f" -> ClusterQueue {report.cluster_queue}"
                                                             if report.cluster_queue else ""))
    if report.flavor:
        where.append(f"flavor {report.flavor}")
    if report.topology:
        where.append(f"Topology {report.topology}, {report.nodes_counted} node(s) counted")
    verdict = VERDICTS.get(report.outcome, "[red]does not fit[/]")
    pods = sum(p.pods for p in report.podsets)
    con.print(f"{escape(workload.ref)}: {verdict}" + (f" - {pods} pod(s) in {len(report.podsets)} PodSet(s)"
                                                        if report.podsets else "")
              + (f"; {escape(', '.join(where))}" if where else ""))
    if report.kueue_message:
        con.print(f"Kueue: {escape(report.kueue_message)}")
    for line in why:
        con.print(f"Why: {escape(line)}")
    if advice:
        con.print("What would fit (each change judged again as Kueue would):")
        for tip in advice:
            con.print(f"  - {escape(tip.text)}")
    elif advice is not None and report.outcome != FITS:
        con.print(f"What would fit: {NOTHING_FITS}")
    if report.podsets:
        _podset_table(workload, report, view)
    excluded = report.excluded.text(report.flavor, report.flavor_labels)
    if excluded:
        con.print(f"nodes left out: {escape(excluded)}")
    earlier = [a for a in report.attempts if not a.fits and a.message != report.kueue_message]
    if earlier:
        con.print("Earlier scheduling cycles (Kueue tries the flavors in turn and again whenever the cluster "
                  "changes, so a pending Workload may show these too):")
        for a in earlier:
            con.print(f"  {escape('+'.join(a.flavors) or '(no flavor)')}: {escape(a.message)}")
    for note in report.problems:
        con.print(f"[yellow]note:[/] {escape(note)}")


def _podset_table(workload: Workload, report: FitReport, view: View) -> None:
    several = workload.workloads > 1
    rows = [((f"{p.workload}/" if several else "") + p.podset, str(p.pods), _request(p), _where(p), _nodes(p))
            for p in report.podsets]
    con = console()
    for line in render([Column("PODSET", "name"), Column("PODS", right=True), Column("REQUEST", "prose"),
                        Column("PLACED IN"), Column("NODES: PODS")], rows, view):
        con.print(line, markup=False)
    for p in report.podsets:
        if p.note:
            con.print(f"[yellow]note:[/] PodSet {escape(p.podset)}: {escape(p.note)}")


def answer(workload: Workload, inputs: Inputs, args: argparse.Namespace, gates: Gates, origin: str,
           with_advice: bool) -> tuple[FitReport, list[str], list[Advice] | None]:
    """Kueue's answer for one job, the plain words, and the checked advice (None: not searched)."""
    resolved = resolved_queue(workload, inputs, args.flavor, args.topology)
    check_accepted(workload, resolved.queue, gates, origin)
    report = judge(workload, inputs, gates, resolved=resolved)
    if report.outcome == FITS or not with_advice:
        return report, [], None
    return report, explain(workload, report, inputs, gates), advise(workload, report, inputs, gates)


def as_json(report: FitReport, why: list[str], advice: list[Advice] | None) -> dict[str, Any]:
    return {**report.to_dict(), "why": why, "advice": [a.to_dict() for a in advice or ()]}


def run(args: argparse.Namespace) -> int:
    gates = Gates.parse(args.kueue_feature_gates)
    docs = jobfile.load(read_text(args.file), args.file)
    workloads = workloads_in(docs, args.file)
    _, inputs, notes = read_admission(args)
    if args.nodes and not args.pods:
        notes.append("no --pods given: every node counts as empty")
    answers = []
    for workload in workloads:
        report, why, advice = answer(workload, inputs, args, gates, args.file, not args.no_advice)
        report.problems += notes
        answers.append((workload, report, why, advice))
    if for_people(args):
        for workload, report, why, advice in answers:
            print_report(workload, report, why, advice, view_of(args))
    else:
        data = [as_json(r, w, a) for _, r, w, a in answers]
        emit(data[0] if len(data) == 1 else data, args.output)
    pending = sum(r.outcome != FITS for _, r, _, _ in answers)
    if pending:
        print(f"topolabel fit: {pending} workload(s) would not be admitted now", file=sys.stderr)
        return 1
    return 0
