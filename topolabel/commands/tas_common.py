"""What `job`, `fit` and `show` share: the Kueue TAS set-up in force, nodes as Kueue sees them, pods.

The set-up comes from `--kueue-dir` (what `topolabel kueue` wrote), else from `--snapshot` (generated in
memory the same way), else from the cluster. With `--snapshot`, nodes are also placed by the snapshot,
as if `topolabel apply` had run; nodes whose labels differ are reported, since Kueue reads the labels.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, replace
from typing import Any

from kueue_config.objects import generate
from kueue_config.tas.capacity import PodUsage, parse_pods, pods_from_items
from kueue_config.tas.judge import Inputs
from kueue_config.tas.setup import TASSetup, read_kueue_objects
from labeler.errors import TopologyError
from labeler.io.nodes import Node, read_items
from labeler.settings.config import Config
from labeler.topology.model import Level, Snapshot

from ..parsing import flags
from ..pipeline import read_config, read_snapshot
from .common import cluster_nodes, connect


def tas_parent() -> argparse.ArgumentParser:
    parser = flags()
    group = parser.add_argument_group("Kueue TAS set-up (default: the snapshot's, else the cluster's)")
    group.add_argument("--kueue-dir", metavar="DIR", help="directory (or stream file) `topolabel kueue` wrote")
    group.add_argument("--topology", metavar="NAME", help="Topology to use when several apply")
    return parser


def flavor_parent() -> argparse.ArgumentParser:
    parser = flags()
    parser.add_argument("--flavor", metavar="NAME", help="only this ResourceFlavor (default: the queue's, in order)")
    parser.add_argument("--pods", metavar="FILE",
                        help="`kubectl get pods -A -o yaml` output (with --nodes); without it no pod holds capacity")
    return parser


def admission_parent() -> argparse.ArgumentParser:
    """What admission reads besides nodes and pods, and the what-ifs."""
    parser = flags()
    group = parser.add_argument_group("admission (quota in use, what-ifs)")
    group.add_argument("--workloads", metavar="FILE",
                       help="`kubectl get workloads -A -o yaml` output (with --nodes): the quota and topology "
                            "assignments admitted workloads hold; a cluster's are read from it")
    group.add_argument("--drain", metavar="DOMAIN|NODE", action="append", default=[],
                       help="as if this node, or every node of this domain (a level's label value, or KEY=VALUE), "
                            "were cordoned; repeatable")
    group.add_argument("--without", metavar="NAMESPACE/WORKLOAD", action="append", default=[],
                       help="as if this Workload had finished (its quota, placement and pods freed); repeatable")
    return parser


def _uses_cluster(args: argparse.Namespace) -> bool:
    """A cluster was named, or nodes come from the default kubeconfig (fit and show without --nodes)."""
    if getattr(args, "kubeconfig", None) or getattr(args, "context", None):
        return True
    return hasattr(args, "nodes") and not args.nodes


@dataclass
class TASContext:
    """The set-up in force and the names people may use for its levels."""

    setup: TASSetup | None
    known_levels: list[Level] = field(default_factory=list)
    snapshot: Snapshot | None = None


def tas_context(args: argparse.Namespace, cfg: Config, nodes: list[Node] | None = None) -> TASContext:
    """Kueue objects from --kueue-dir, else --snapshot (+ nodes for flavors), else the cluster, else none."""
    snapshot = read_snapshot(args.snapshot) if getattr(args, "snapshot", None) else None
    objects: list[dict[str, Any]] | None = None
    if args.kueue_dir:
        objects = read_kueue_objects(args.kueue_dir)
    elif snapshot is not None:
        objects = generate(snapshot, nodes or [], cfg).objects
    elif _uses_cluster(args):
        from kueue_config.tas.cluster import list_kueue_objects

        objects = list_kueue_objects(connect(args))
    origin = args.kueue_dir or args.snapshot or "cluster"
    setup = TASSetup.from_objects(objects, origin) if objects is not None else None
    known = list(snapshot.levels) if snapshot else []
    known += [Level(lv.name, lv.label or f"{cfg.key_prefix}{lv.name}") for lv in cfg.levels]
    return TASContext(setup, known, snapshot)


def placed_nodes(nodes: list[Node], snapshot: Snapshot | None) -> tuple[list[Node], list[str]]:
    """Nodes with the snapshot's labels applied, and a note about nodes that do not carry them yet."""
    if snapshot is None:
        return nodes, []
    out, stale = [], []
    for node in nodes:
        if node.name in snapshot.nodes:
            labels = snapshot.labels_for(node.name)
            if any(node.labels.get(k) != v for k, v in labels.items()):
                stale.append(node.name)
            node = replace(node, labels={**node.labels, **labels})
        out.append(node)
    notes = [f"{len(stale)} node(s) do not carry the snapshot's labels yet (e.g. {', '.join(stale[:3])}); the "
             "answer assumes `topolabel apply` has run - Kueue cannot place pods there until it has"] if stale else []
    return out, notes


def admission_inputs(args: argparse.Namespace, ctx: TASContext, nodes: list[Node]) -> Inputs:
    """Everything Kueue's admission reads, from the cluster or the files given, with the what-ifs applied."""
    assert ctx.setup is not None
    inputs = Inputs(ctx.setup, nodes, running_pods(args), origin=args.workloads or "cluster")
    if getattr(args, "workloads", None):
        inputs.workloads = list(read_items(args.workloads, "Workload"))
    elif not args.nodes:
        from kueue_config.tas.cluster import list_namespaces, list_priority_classes, list_workloads

        api = connect(args)
        inputs.workloads = list_workloads(api)
        inputs.namespaces = list_namespaces(api)
        inputs.priority_classes, inputs.default_priority = list_priority_classes(api)
    return inputs.drained(args.drain).without(args.without)


def read_admission(args: argparse.Namespace) -> tuple[TASContext, Inputs, list[str]]:
    """What `fit`, `show` and `capacity` read: the Kueue set-up, the nodes (placed by --snapshot), and
    everything admission reads, with the what-ifs; and notes on what was assumed."""
    nodes = cluster_nodes(args)
    ctx = tas_context(args, read_config(args.config), nodes)
    if ctx.setup is None:
        raise TopologyError("no Kueue set-up: give --kueue-dir, --snapshot, or --kubeconfig for a cluster with Kueue")
    nodes, notes = placed_nodes(nodes, ctx.snapshot)
    return ctx, admission_inputs(args, ctx, nodes), notes


def running_pods(args: argparse.Namespace) -> list[PodUsage]:
    """Pods holding capacity: from --pods, from the cluster when nodes came from it, else none."""
    if args.pods:
        return pods_from_items(read_items(args.pods, "Pod"), args.pods)
    if args.nodes:
        return []
    from kueue_config.tas.cluster import list_pods  # the Kubernetes client, only for a cluster

    return parse_pods(list_pods(connect(args)), "cluster")
