"""`topolabel why NAMESPACE/WORKLOAD`: why is this Workload pending, and what would let it in?

It reads the Workload and the live cluster (nodes, pods, Kueue objects, the other Workloads) and gives the
answer `fit` gives for a job: Kueue's own message as the Workload carries it, Kueue's decision as `fit`
works it out now, why in plain words, and changes that were checked to fit.
"""

from __future__ import annotations

import argparse
import sys

from rich.markup import escape

from kueue_config.tas.fit import FITS
from kueue_config.tas.gates import Gates
from kueue_config.tas.workloads import from_kueue_workload
from labeler.errors import InputError

from ..output import console, emit, for_people, view_of
from . import COMMANDS
from .common import cluster_nodes, config_of, connect
from .fit import answer, as_json, gates_flag, print_report
from .tas_common import admission_inputs, admission_parent, flavor_parent, tas_context, tas_parent

EXAMPLES = """examples:
  topolabel why team-a/job-train-5f2c1 --kubeconfig ~/.kube/config
  topolabel why team-a/job-train-5f2c1 --without team-b/job-big-9d3e0 -o json
exit status: 0 it is admitted (or would be now), 1 it would stay pending, 2 bad input or no such Workload
"""


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("why", help=COMMANDS["why"],
                            parents=[parents["config"], parents["output"], parents["cluster"], tas_parent(),
                                     flavor_parent(), admission_parent()],
                            epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload", metavar="NAMESPACE/WORKLOAD", help="a Workload, as `kubectl get workloads -A` "
                                                                      "lists it")
    gates_flag(parser)
    parser.add_argument("--no-advice", action="store_true", help="skip the search for changes that would fit")
    parser.set_defaults(run=run, snapshot=None)


def _condition(obj: dict, kind: str) -> dict | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def run(args: argparse.Namespace) -> int:
    namespace, sep, name = args.workload.partition("/")
    if not sep or not namespace or not name:
        raise InputError(f"{args.workload!r}: give NAMESPACE/WORKLOAD, as `kubectl get workloads -A` lists it")
    if args.nodes:
        raise InputError("why reads a Workload from the cluster: give --kubeconfig/--context, not --nodes")
    from kueue_config.tas.cluster import get_workload

    obj = get_workload(connect(args), namespace, name)
    reserved = _condition(obj, "QuotaReserved") or {}
    if reserved.get("status") == "True":
        admission = (obj.get("status") or {}).get("admission") or {}
        text = (f"Workload {args.workload} is admitted: quota reserved in ClusterQueue {admission.get('clusterQueue')}"
                f" ({reserved.get('message', '')})")
        if for_people(args):
            console().print(escape(text))
        else:
            emit({"workload": args.workload, "admitted": True, "admission": admission}, args.output)
        return 0
    cfg = config_of(args)
    workload = from_kueue_workload(obj, "cluster")
    nodes = cluster_nodes(args)
    ctx = tas_context(args, cfg, nodes)
    assert ctx.setup is not None
    inputs = admission_inputs(args, ctx, nodes)
    report, why, advice = answer(workload, inputs, args, Gates.parse(args.kueue_feature_gates), args.workload,
                                 not args.no_advice)
    kueue_says = str(reserved.get("message") or "")
    if kueue_says and kueue_says != report.kueue_message:
        report.problems.append(f"the Workload itself says: {kueue_says} (Kueue wrote it at its last scheduling "
                               "cycle; the cluster may have changed since, or it was another flavor's turn)")
    if for_people(args):
        print_report(workload, report, why, advice, view_of(args))
    else:
        emit({"workload": args.workload, "admitted": False, "condition": reserved,
              **as_json(report, why, advice)}, args.output)
    if report.outcome != FITS:
        print(f"topolabel why: {args.workload} would stay pending now", file=sys.stderr)
        return 1
    return 0
