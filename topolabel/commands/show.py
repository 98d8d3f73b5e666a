"""`topolabel show`: per flavor, the topology as a tree with free and total accelerators per domain (or an SVG)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from typing import Any

from kueue_config.tas import jobfile
from kueue_config.tas.capacity import allocatable, free_capacity, untolerated_taint
from kueue_config.tas.fit import FITS, FitReport
from kueue_config.tas.gates import Gates
from kueue_config.tas.judge import Inputs
from kueue_config.tas.render_tree import FlavorView, Marks, flavor_view, short_level, text_tree
from kueue_config.tas.setup import Flavor, TASSetup
from kueue_config.tas.svg import render_svg
from kueue_config.tas.tree import build_tree
from kueue_config.tas.workloads import workloads_in
from labeler.errors import TopologyError
from labeler.io.files import read_text, write_atomic
from labeler.topology.isolation import CONDITION as FABRIC_CONDITION

from ..output import emit, for_people, headline, say, view_of
from . import COMMANDS
from .fit import answer, gates_flag
from .tas_common import admission_parent, flavor_parent, read_admission, tas_parent

EXAMPLES = """examples:
  topolabel show --kubeconfig ~/.kube/config
  topolabel show --snapshot snap.json --nodes examples/nodes.yaml --config examples/topolabel.yaml --svg topo.svg
  topolabel show --kueue-dir gitops/kueue --nodes nodes.yaml --pods pods.yaml --job job.yaml --svg where.svg
"""


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("show", help=COMMANDS["show"],
                            parents=[parents["config"], parents["output"], parents["cluster"], parents["snapshot"],
                                     tas_parent(), flavor_parent(), admission_parent()],
                            epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--resource", default="nvidia.com/gpu", help="resource to count (default: nvidia.com/gpu)")
    depth = parser.add_mutually_exclusive_group()
    depth.add_argument("--depth", type=int, metavar="N",
                       help="levels to draw (default: down to the last level above single nodes)")
    depth.add_argument("--level", metavar="LEVEL",
                       help="draw down to this level (its name, block, or its label key), in the terminal and the SVG")
    parser.add_argument("--job", metavar="FILE", help="also show where `topolabel fit` would place this job")
    parser.add_argument("--svg", metavar="FILE", help="also write the picture as one static SVG file")
    gates_flag(parser)
    parser.set_defaults(run=run)


def _flavors(setup: TASSetup, flavor: str | None, topology: str | None) -> list[Flavor]:
    """The TAS flavors to draw, in name order (or the one named)."""
    if flavor:
        if flavor not in setup.flavors:
            raise TopologyError(f"no ResourceFlavor {flavor!r}; known: {', '.join(sorted(setup.flavors)) or 'none'}")
        chosen = [setup.flavors[flavor]]
    else:
        chosen = [f for _, f in sorted(setup.flavors.items()) if topology in (None, f.topology)]
    tas = [f for f in chosen if f.tas]
    if not tas:
        raise TopologyError("no TAS flavor to draw (a ResourceFlavor whose topologyName names a Topology)"
                            + (f": {flavor} has none" if flavor else ""))
    return tas


def _job(args: argparse.Namespace, inputs: Inputs) -> tuple[FitReport | None, str]:
    """`fit`'s answer for --job, and one line that says it."""
    if not args.job:
        return None, ""
    docs = jobfile.load(read_text(args.job), args.job)
    workload = workloads_in(docs, args.job)[0]
    report, _, _ = answer(workload, inputs, args, Gates.parse(args.kueue_feature_gates), args.job, False)
    pods = sum(p.placed_pods for p in report.podsets)
    if report.outcome == FITS:
        line = f"job {workload.ref}: fits, {pods} pod(s) placed" + (f" in flavor {report.flavor}" if report.flavor else "")
    else:
        line = f"job {workload.ref}: does not fit: {report.kueue_message}"
    return report, line


def _placed(report: FitReport | None, flavor: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in report.podsets if report else []:
        if p.flavor == flavor:
            for n in p.nodes:
                key = n["node"] if "node" in n else n["domain"]  # fit names one of the two
                out[key] = out.get(key, 0) + n["pods"]
    return out


def _json(views: list[FlavorView]) -> list[dict[str, Any]]:
    return [{"flavor": v.flavor, "topology": v.topology, "levels": list(v.keys), "depth": v.depth,
             "nodes_excluded": asdict(v.excluded), "domains": [d.to_dict() for d in v.domains]} for v in views]


def level_depth(level: str, keys: tuple[str, ...]) -> int:
    """How many levels `--level` draws: down to the level named by its short name or label key."""
    for i, key in enumerate(keys):
        if level in (key, short_level(key)):
            return i + 1
    known = ", ".join(short_level(k) for k in keys)
    raise TopologyError(f"--level {level!r}: the Topology has no such level; its levels: {known}")


def run(args: argparse.Namespace) -> int:
    ctx, inputs, notes = read_admission(args)
    assert ctx.setup is not None
    flavors = _flavors(ctx.setup, args.flavor, args.topology)
    nodes = list(inputs.nodes)
    free = free_capacity(nodes, inputs.pods)
    totals = allocatable(nodes)
    report, job_line = _job(args, inputs)
    views = []
    isolated = frozenset(n.name for n in nodes if (n.condition(FABRIC_CONDITION) or ("",))[0] == "False")
    for flavor in flavors:
        tree = build_tree(flavor.levels or (), nodes, free, flavor.node_labels, totals)
        depth = level_depth(args.level, tree.keys) if args.level else args.depth
        tainted = frozenset(n.name for n in nodes if n.taints and untolerated_taint(n.taints, flavor.tolerations))
        views.append(flavor_view(flavor.name, str(flavor.topology), tree, args.resource, depth,
                                 _placed(report, flavor.name), Marks(tainted, isolated)))
    title = "Kueue TAS: " + ", ".join(sorted({str(f.topology) for f in flavors}, key=str)) + \
        f" - {len(flavors)} flavor(s)"
    if args.svg:
        write_atomic(args.svg, render_svg(views, title, args.resource, job_line))
        print(f"{args.svg}: written", file=sys.stderr)
    if for_people(args):
        shape = view_of(args)
        lines = headline(job_line, shape) if job_line else []
        for view in views:
            drawn = text_tree(view, shape.width, shape.wide)
            lines += [*headline(drawn[0], shape), *drawn[1:]]
            excluded = view.excluded.text(view.flavor, ctx.setup.flavors[view.flavor].node_labels)
            if excluded:
                lines += headline(f"nodes left out: {excluded}", shape)
        for note in notes:
            lines += headline(f"note: {note}", shape)
        say(lines)
    else:
        emit({"flavors": _json(views), "job": report.to_dict() if report else None, "notes": notes}, args.output)
    return 0
