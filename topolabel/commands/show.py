"""`topolabel show`: the topology as a tree with free and total accelerators per domain (or an SVG)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict

from kueue_config.tas.capacity import allocatable, free_capacity
from kueue_config.tas.fit import build_tree
from kueue_config.tas.render_tree import domain_views, rich_tree
from kueue_config.tas.svg import render_svg
from labeler.errors import TopologyError
from labeler.files import write_atomic

from ..output import console, emit
from .common import cluster_nodes, config_of
from .tas_common import flavor_parent, placed_nodes, running_pods, tas_context, tas_parent

EXAMPLES = """examples:
  topolabel show --kubeconfig ~/.kube/config
  topolabel show --snapshot snap.json --nodes examples/nodes.yaml --config examples/topolabel.yaml --svg topo.svg
  topolabel show --kueue-dir gitops/kueue --nodes nodes.yaml --pods pods.yaml --depth 3 -o json
"""


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("show", help="draw the topology with free/total GPUs per domain (terminal or SVG)",
                            parents=[parents["config"], parents["cluster"], parents["snapshot"], tas_parent(),
                                     flavor_parent()],
                            epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--resource", default="nvidia.com/gpu", help="resource to count (default: nvidia.com/gpu)")
    parser.add_argument("--depth", type=int, metavar="N",
                        help="levels to draw (default: all but the per-node hostname level)")
    parser.add_argument("--svg", metavar="FILE", help="also write the picture as SVG")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    cfg = config_of(args)
    nodes = cluster_nodes(args)
    ctx = tas_context(args, cfg, nodes)
    if ctx.setup is None:
        raise TopologyError("no Kueue set-up: give --kueue-dir, --snapshot, or --kubeconfig for a cluster with Kueue")
    name, keys = ctx.setup.topology_for(None, "default", args.topology)
    labels = None
    if args.flavor:
        if args.flavor not in ctx.setup.flavors:
            raise TopologyError(f"no ResourceFlavor {args.flavor!r}; known: {', '.join(sorted(ctx.setup.flavors))}")
        labels = ctx.setup.flavors[args.flavor].node_labels
    nodes, notes = placed_nodes(nodes, ctx.snapshot)
    tree = build_tree(keys, nodes, free_capacity(nodes, running_pods(args)), labels, allocatable(nodes))
    views = domain_views(tree, args.resource, args.depth)
    title = f"Topology {name}" + (f", flavor {args.flavor}" if args.flavor else "")
    if args.svg:
        write_atomic(args.svg, render_svg(views, title, args.resource))
        print(f"{args.svg}: written", file=sys.stderr)
    if args.output == "table":
        console().print(rich_tree(views, title, args.resource))
        for note in notes:
            console().print(f"[yellow]note:[/] {note}")
    else:
        emit({"topology": name, "levels": list(keys), "resource": args.resource,
              "domains": [asdict(v) for v in views], "notes": notes}, args.output)
    return 0
