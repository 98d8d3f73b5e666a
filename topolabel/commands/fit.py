"""`topolabel fit`: would Kueue's Topology-Aware Scheduling admit this job now, and where?"""

from __future__ import annotations

import argparse
import sys

from rich.table import Table

from kueue_config.tas import jobfile
from kueue_config.tas.capacity import free_capacity
from kueue_config.tas.fit import FitReport, fit
from kueue_config.tas.setup import Flavor, TASSetup
from kueue_config.tas.workloads import QUEUE_LABEL, Workload, workloads_in
from labeler.errors import TopologyError
from labeler.files import read_text

from ..output import console, emit
from .common import cluster_nodes, config_of
from .tas_common import flavor_parent, placed_nodes, running_pods, tas_context, tas_parent

EXAMPLES = """examples:
  topolabel fit job.yaml --kubeconfig ~/.kube/config
  topolabel fit job.yaml --nodes nodes.yaml --pods pods.yaml --kueue-dir gitops/kueue -o json
  topolabel fit examples/jobs/pytorchjob.yaml --config examples/topolabel.yaml --snapshot snap.json \\
      --nodes examples/nodes.yaml
exit status: 0 fits, 1 does not fit, 2 bad input
"""


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("fit", help="would Kueue TAS admit this job now, in which domains",
                            parents=[parents["config"], parents["cluster"], parents["snapshot"], tas_parent(),
                                     flavor_parent()],
                            epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", metavar="FILE", help="job YAML, annotated for TAS (- for stdin)")
    parser.set_defaults(run=run)


def _flavors(setup: TASSetup, queue: str | None, namespace: str, topology: str, only: str | None) -> list[Flavor]:
    flavors = [f for f in setup.flavors_for(queue, namespace) if f.topology == topology]
    if only:
        flavors = [f for f in setup.flavors.values() if f.name == only]
        if not flavors:
            raise TopologyError(f"no ResourceFlavor {only!r}; known: {', '.join(sorted(setup.flavors)) or 'none'}")
    return flavors


def fit_one(args: argparse.Namespace, workload: Workload, setup: TASSetup, nodes, free) -> FitReport:
    queue = ((workload.obj.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)
    namespace = workload.namespace or "default"
    name, keys = setup.topology_for(queue, namespace, args.topology)
    flavors = _flavors(setup, queue, namespace, name, args.flavor)
    return fit(workload, nodes, free, name, keys, flavors, setup.tas_only(queue, namespace))


def print_report(workload: Workload, report: FitReport) -> None:
    con = console()
    data = report.to_dict()
    verdict = "[green]fits[/]" if report.fits else "[red]does not fit[/]"
    con.print(f"{workload.ref}: {verdict} - {data['pods']} pod(s), Topology {report.topology}"
              + (f", flavor {report.flavor}" if report.flavor else "") + f", {report.nodes_counted} node(s) counted")
    table = Table()
    for col in ("podset", "pods", "request", "placed in", "most pods in one domain", "nodes / message"):
        table.add_column(col, overflow="fold")
    for p in report.podsets:
        request = f"{p.mode} {p.level or ''}".strip()
        where = ", ".join("/".join(d["values"]) + f" ({d['pods']})" for d in p.domains) or "-"
        detail = ", ".join(f"{n.get('node') or n.get('domain')}:{n['pods']}" for n in p.nodes[:3])
        if len(p.nodes) > 3:
            detail += f" and {len(p.nodes) - 3} more (-o json lists all)"
        prefix = f"{p.workload}/" if workload.workloads > 1 else ""
        table.add_row(prefix + p.podset, str(p.pods), request, where if p.fits else "-",
                      str(p.max_pods_in_one_domain), detail if p.fits else f"[red]{p.message}[/]")
    con.print(table)
    excluded = {k: v for k, v in data["nodes_excluded"].items() if v}
    if excluded:
        con.print("not counted: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in excluded.items()))
    for note in report.problems:
        con.print(f"[yellow]note:[/] {note}")


def run(args: argparse.Namespace) -> int:
    cfg = config_of(args)
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
    reports = [fit_one(args, w, ctx.setup, nodes, free) for w in workloads]
    for report in reports:
        report.problems += notes
    if args.output == "table":
        for workload, report in zip(workloads, reports):
            print_report(workload, report)
    else:
        data = [r.to_dict() for r in reports]
        emit(data[0] if len(data) == 1 else data, args.output)
    if not all(r.fits for r in reports):
        print(f"topolabel fit: {sum(not r.fits for r in reports)} workload(s) would stay pending", file=sys.stderr)
        return 1
    return 0
