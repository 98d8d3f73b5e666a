"""`topolabel capacity`: how many jobs of one shape Kueue would admit now, where, and the room at every level.

"How many 64-GPU slots are free?" is asked of a shape - pods x resources per pod, a level, slices - in a
queue. The count is Kueue's: copies of the job admitted one after another through the queue (quota,
cohort, TAS), each holding what it took for the next, until one is not admitted, whose message is shown.
Per TAS flavor, the room is Kueue's first placement phase: at each level the roomiest domain, in pods of
the shape, and how many domains hold a whole job.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.markup import escape

from kueue_config.tas.gates import Gates
from kueue_config.tas.render_tree import short_names
from kueue_config.tas.setup import resolve_level
from kueue_config.tas.slots import Capacity, Shape, capacity
from labeler.errors import InputError, TopologyError

from ..output import console, emit, for_people, view_of
from ..tables import Column, View, render
from . import COMMANDS
from .fit import gates_flag
from .tas_common import TASContext, admission_parent, flavor_parent, read_admission, tas_parent

EXAMPLES = """examples:
  topolabel capacity --size 8 --gpus 8 --within block --queue gpu --namespace team-a --kubeconfig ~/.kube/config
  topolabel capacity --size 16 --gpus 4 --within rack --preferred --queue gpu --namespace team-a -o json
  topolabel capacity --size 8 --gpus 8 --within block --queue gpu --namespace team-a --drain b01
"""


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("capacity", help=COMMANDS["capacity"],
                            parents=[parents["config"], parents["output"], parents["cluster"], parents["snapshot"],
                                     tas_parent(), flavor_parent(), admission_parent()],
                            epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    shape = parser.add_argument_group("the job's shape")
    shape.add_argument("--size", type=int, required=True, metavar="N", help="pods per job")
    shape.add_argument("--gpus", type=int, metavar="N", help="nvidia.com/gpu per pod (same as --request nvidia.com/gpu=N)")
    shape.add_argument("--request", action="append", default=[], metavar="RESOURCE=QUANTITY",
                       help="a resource per pod, e.g. cpu=16, memory=200Gi; repeatable")
    shape.add_argument("--within", metavar="LEVEL", help="level (name or label key) the pods must share")
    shape.add_argument("--preferred", action="store_true", help="prefer LEVEL, let Kueue climb or spread")
    shape.add_argument("--slice-size", type=int, metavar="N", help="pods per slice")
    shape.add_argument("--slice-within", metavar="LEVEL", help="level each slice must fit in")
    shape.add_argument("--queue", default="gpu", help="LocalQueue (default: gpu)")
    shape.add_argument("--namespace", default="default", help="the LocalQueue's namespace (default: default)")
    gates_flag(parser)
    parser.set_defaults(run=run)


def _requests(args: argparse.Namespace) -> dict[str, str]:
    out = {}
    if args.gpus is not None:
        out["nvidia.com/gpu"] = str(args.gpus)
    for item in args.request:
        name, sep, quantity = item.partition("=")
        if not sep or not name or not quantity:
            raise InputError(f"--request {item!r}: give RESOURCE=QUANTITY, e.g. cpu=16")
        out[name] = quantity
    if not out:
        raise InputError("the shape has no resources: give --gpus N or --request RESOURCE=QUANTITY")
    if args.size < 1:
        raise InputError(f"--size {args.size}: a job has at least one pod")
    return out


def _level(name: str | None, ctx: TASContext, args: argparse.Namespace) -> str | None:
    if name is None:
        return None
    assert ctx.setup is not None
    keys = ctx.setup.level_keys(args.queue, args.namespace, args.topology)
    found = {resolve_level(name, k, ctx.known_levels) for k in keys}
    if len(found) > 1:
        raise TopologyError(f"level {name!r} means {' or '.join(sorted(found))} in the queue's Topologies; give the "
                            "label key, or --topology NAME")
    return found.pop()


def as_json(cap: Capacity) -> dict[str, Any]:
    s = cap.shape
    return {"shape": {"pods": s.pods, "requests": dict(s.requests), "level": s.level, "preferred": s.preferred,
                      "sliceSize": s.slice_size, "sliceLevel": s.slice_level, "queue": s.queue,
                      "namespace": s.namespace},
            "clusterQueue": cap.cluster_queue, "jobs": cap.jobs, "placements": cap.placements,
            "next": cap.stopped_by,
            "flavors": [{"flavor": f.flavor, "topology": f.topology, "jobs": f.jobs, "levels": [
                {"level": lv.level, "domains": lv.domains, "largestSlot": lv.largest,
                 "largestDomain": lv.largest_domain, "domainsHoldingJob": lv.holding_job} for lv in f.levels]}
                for f in cap.flavors]}


def _describe(s: Shape) -> str:
    each = ", ".join(f"{q} {r}" for r, q in s.requests.items())
    text = f"jobs of {s.pods} pod(s) x {each}"
    if s.level:
        text += f", {'preferred' if s.preferred else 'required'} {s.level.rsplit('/', 1)[-1]}"
    if s.slice_size:
        text += f", slices of {s.slice_size} in one {str(s.slice_level).rsplit('/', 1)[-1]}"
    return text + f", LocalQueue {s.namespace}/{s.queue}"


def print_capacity(cap: Capacity, view: View) -> None:
    con = console()
    con.print(f"{escape(_describe(cap.shape))}: [bold]{cap.jobs}[/] would be admitted now"
              + (f" (ClusterQueue {escape(cap.cluster_queue)})" if cap.cluster_queue else ""))
    names = short_names([d["values"][-1] for p in cap.placements for d in p["domains"]]
                        + [lv.largest_domain for f in cap.flavors for lv in f.levels])
    for i, p in enumerate(cap.placements, 1):
        where = ", ".join(f"{names[d['values'][-1]]} ({d['pods']})" for d in p["domains"]) or "kube-scheduler places it"
        con.print(f"  {i}: flavor {escape(str(p['flavor']))} - {escape(where)}")
    if cap.stopped_by:
        con.print(f"The next one: Kueue: {escape(cap.stopped_by)}")
    if cap.flavors:
        con.print("Room per level (pods of this shape the roomiest domain holds; domains holding a whole job):")
    for f in cap.flavors:
        con.print(f"flavor {escape(f.flavor)} (Topology {escape(f.topology)}): {f.jobs} job(s) in it alone")
        rows = [(lv.level.rsplit("/", 1)[-1], str(lv.domains), names.get(lv.largest_domain) or "-", str(lv.largest),
                 str(lv.holding_job)) for lv in f.levels]
        for line in render([Column("LEVEL", "name"), Column("DOMAINS", right=True), Column("ROOMIEST"),
                            Column("PODS", right=True), Column("HOLD A JOB", right=True)], rows, view):
            con.print(line, markup=False)


def run(args: argparse.Namespace) -> int:
    ctx, inputs, notes = read_admission(args)
    shape = Shape(args.size, _requests(args), _level(args.within, ctx, args), args.preferred, args.slice_size,
                  _level(args.slice_within, ctx, args), args.queue, args.namespace)
    cap = capacity(shape, inputs, Gates.parse(args.kueue_feature_gates))
    if for_people(args):
        print_capacity(cap, view_of(args))
        for note in notes:
            console().print(f"[yellow]note:[/] {escape(note)}")
    else:
        emit({**as_json(cap), "notes": notes}, args.output)
    return 0
