"""`topolabel export slurm|volcano|kai`: the discovered topology in another scheduler's terms."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from exporters.base import Exporter
from exporters.registry import all_exporters
from kueue_config.files import read_dir, render, stream

from ..output import problems_table
from ..progress import terminal
from . import COMMANDS
from .common import cluster_nodes, config_of, snapshot_of

EXAMPLES = """examples:
  topolabel export slurm --snapshot snap.json > topology.conf
  topolabel export slurm --snapshot snap.json --format block --block-level rack --strip-domain
  topolabel export slurm --snapshot snap.json --format yaml --slurm-name '^gke-(.*)$=\\1' > topology.yaml
  topolabel export slurm --snapshot snap.json --nodes nodes.yaml --no-topology --trim-tiers 1
  topolabel export slurm --snapshot snap.json --config topolabel.yaml --kubeconfig ~/.kube/config --format yaml
  topolabel export volcano --snapshot snap.json | kubectl apply -f -
  topolabel export kai --snapshot snap.json --output-dir gitops/kai
"""


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("export", help=COMMANDS["export"],
                            epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    config = argparse.ArgumentParser(add_help=False)
    config.add_argument("--config", metavar="FILE", help="topolabel.yaml (levels, key prefix, kueue.topologyName)")
    shared = [config, parents["cluster"], parents["snapshot"], parents["source"]]
    targets = parser.add_subparsers(dest="target", required=True, metavar="SCHEDULER")
    for exporter in all_exporters():
        target = targets.add_parser(exporter.name, parents=shared, help=exporter.help, epilog=EXAMPLES,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
        exporter.add_arguments(target)
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
    nodes = cluster_nodes(args, required=False)  # only when named: for the exporter and the source alike
    snap = snapshot_of(args, cfg, nodes or None)
    result = exporter.export(snap, cfg, options, nodes)
    if result.problems:
        problems_table(result.problems, sys.stderr)
    if not exporter.objects:
        sys.stdout.write(result.text)
        return 0
    if not args.output_dir:
        sys.stdout.write(stream(result.objects, terminal()))
        return 0
    generator = f"export {exporter.name}"
    directory = read_dir(Path(args.output_dir), generator)
    changes = directory.write(render(result.objects, generator, prefix=f"{exporter.name}-", progress=terminal()))
    print(f"{directory.path}: {len(result.objects)} object(s), {changes.summary()}", file=sys.stderr)
    return 0
