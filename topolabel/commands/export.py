"""`topolabel export slurm|volcano|kai`: the discovered topology in another scheduler's terms."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from exporters.base import Export, Exporter
from exporters.registry import all_exporters
from kueue_config.files import read_dir, render, stream
from labeler.errors import InputError
from labeler.io.nodes import Node

from ..output import problems_table
from ..parsing import flags
from ..progress import terminal
from . import COMMANDS
from .common import cluster_nodes, config_of, connect, snapshot_of

EXAMPLES = """examples:
  topolabel export slurm --snapshot snap.json > topology.conf
  topolabel export slurm --snapshot snap.json --format block --block-level rack --strip-domain
  topolabel export slurm --snapshot snap.json --format yaml --slurm-name '^gke-(.*)$=\\1' > topology.yaml
  topolabel export slurm --snapshot snap.json --nodes nodes.yaml --no-topology --trim-tiers 1
  topolabel export slurm --snapshot snap.json --config topolabel.yaml --kubeconfig ~/.kube/config --format yaml
  topolabel export volcano --snapshot snap.json | kubectl apply -f -
  topolabel export kai --snapshot snap.json --output-dir gitops/kai
  topolabel export nfd --snapshot snap.json --namespace node-feature-discovery | kubectl apply -f -
  topolabel export slinky --snapshot snap.json --skeleton --block-sizes 18 --kubeconfig ~/.kube/config --annotate-nodes
"""


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("export", help=COMMANDS["export"],
                            epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    config = flags()
    config.add_argument("--config", metavar="FILE", help="topolabel.yaml (levels, key prefix, kueue.topologyName)")
    shared = [config, parents["cluster"], parents["snapshot"], parents["source"]]
    targets = parser.add_subparsers(dest="target", required=True, metavar="SCHEDULER")
    for exporter in all_exporters():
        target = targets.add_parser(exporter.name, parents=shared, help=exporter.help, epilog=EXAMPLES,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
        exporter.add_arguments(target)
        if exporter.annotates:
            target.add_argument("--annotate-nodes", action="store_true",
                                help="write the node annotations the export makes to the cluster (--kubeconfig), "
                                     "only where they differ; without it they are counted, not written")
        if exporter.objects:
            target.add_argument("--output-dir", metavar="DIR",
                                help="write one file per object and add them to the kustomization (default: YAML "
                                     "on stdout); files this export wrote before and no longer generates are removed, "
                                     "no other file is touched")
        target.set_defaults(run=run, exporter=exporter)


def run(args: argparse.Namespace) -> int:
    cfg = config_of(args)
    exporter: Exporter[Any] = args.exporter
    options = exporter.read_options(cfg, vars(args))
    annotate = getattr(args, "annotate_nodes", False)
    if annotate and args.nodes:
        raise InputError("--annotate-nodes writes to a cluster: give --kubeconfig (or run in one), not --nodes")
    nodes = cluster_nodes(args, required=annotate)  # else only when named: for the exporter and the source alike
    snap = snapshot_of(args, cfg, nodes or None)
    result = exporter.export(snap, cfg, options, nodes)
    if result.problems:
        problems_table(result.problems, sys.stderr)
    if not exporter.objects:
        sys.stdout.write(result.text)
    elif not args.output_dir:
        sys.stdout.write(stream(result.objects, terminal()))
    else:
        generator = f"export {exporter.name}"
        directory = read_dir(Path(args.output_dir), generator)
        changes = directory.write(render(result.objects, generator, prefix=f"{exporter.name}-", progress=terminal()))
        print(f"{directory.path}: {len(result.objects)} object(s), {changes.summary()}", file=sys.stderr)
    return 0 if not result.annotations or _annotated(args, result, nodes) else 1


def _annotated(args: argparse.Namespace, result: Export, nodes: list[Node]) -> bool:
    """Write the export's node annotations with --annotate-nodes (only those that differ, on nodes that exist;
    none is ever removed), or say how many there are; False when some could not be written."""
    from labeler.cluster.apply import annotation_changes, apply_changes
    from labeler.cluster.kube import patch_node

    if not getattr(args, "annotate_nodes", False):
        print(f"{len(result.annotations)} node annotation(s) not written (give --annotate-nodes and a cluster)",
              file=sys.stderr)
        return True
    changes = annotation_changes({n.name: n.annotations for n in nodes}, result.annotations)
    missing = sorted(set(result.annotations) - {n.name for n in nodes})
    api = connect(args)
    written = apply_changes(changes, lambda name, body: patch_node(api, name, body), progress=terminal(),
                            what="writing annotations")
    print(f"annotations: {len(written.written)} node(s) written, {len(result.annotations) - len(changes)} already "
          f"current, {len(missing)} not in the cluster, {len(written.failed)} failed", file=sys.stderr)
    for node, error in sorted(written.failed.items()):
        print(f"  {node}: {error}", file=sys.stderr)
    return not written.failed
