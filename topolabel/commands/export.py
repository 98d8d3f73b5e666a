"""`topolabel export slurm|volcano|kai`: the discovered topology in another scheduler's terms."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from exporters.kai import kai_topology
from exporters.slurm import FORMATS, NameRule, SlurmOptions, export_slurm
from exporters.volcano import hypernodes
from kueue_config.files import read_dir, render, stream, write_dir
from labeler.config import Config
from labeler.model import Snapshot

from ..output import problems_table
from .common import cluster_nodes, config_of, snapshot_of, source_needs_nodes

EXAMPLES = """examples:
  topolabel export slurm --snapshot snap.json > topology.conf
  topolabel export slurm --snapshot snap.json --format block --block-level rack --strip-domain
  topolabel export slurm --snapshot snap.json --format yaml --slurm-name '^gke-(.*)$=\\1' > topology.yaml
  topolabel export volcano --snapshot snap.json | kubectl apply -f -
  topolabel export kai --snapshot snap.json --output-dir gitops/kai
"""


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("export", help="the topology for Slurm (topology.conf/.yaml), Volcano or KAI",
                            epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    config = argparse.ArgumentParser(add_help=False)
    config.add_argument("--config", metavar="FILE", help="topolabel.yaml (levels, key prefix, kueue.topologyName)")
    shared = [config, parents["cluster"], parents["snapshot"], parents["source"]]
    targets = parser.add_subparsers(dest="target", required=True, metavar="SCHEDULER")

    slurm = targets.add_parser("slurm", parents=shared, help="topology.conf (tree or block) or topology.yaml",
                               epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    slurm.add_argument("--format", choices=FORMATS, default="tree",
                       help="tree or block: topology.conf for that plugin; yaml: topology.yaml with both")
    slurm.add_argument("--block-level", metavar="LEVEL",
                       help="the level whose domains are blocks (default: the coarsest with more than one domain)")
    slurm.add_argument("--block-sizes", metavar="N,N,...", type=_sizes,
                       help="BlockSizes (default: the smallest block's node count, doubled up to the block count)")
    slurm.add_argument("--slurm-name", metavar="REGEX=REPL",
                       help="rewrite node names into Slurm NodeNames (Python re.sub; default: unchanged)")
    slurm.add_argument("--strip-domain", action="store_true",
                       help="cut node names at the first '.' (after --slurm-name)")
    slurm.add_argument("--root-switch", metavar="NAME", default="root",
                       help="the switch joining the coarsest domains in a tree (default: root)")
    slurm.add_argument("--no-root-switch", action="store_true",
                       help="no joining switch: Slurm then never spans a job across coarsest domains")
    slurm.add_argument("--yaml-default", choices=("tree", "block"), default="tree",
                       help="which topology in topology.yaml is the cluster default (default: tree)")
    slurm.set_defaults(run=run_slurm)

    for name, text in (("volcano", "Volcano HyperNodes, one per domain"), ("kai", "the KAI scheduler Topology")):
        objects = targets.add_parser(name, parents=shared, help=text, epilog=EXAMPLES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
        objects.add_argument("--output-dir", metavar="DIR",
                             help="write one file per object and a kustomization (default: YAML on stdout); "
                                  "use a directory of its own, since files topolabel wrote there before and "
                                  "no longer generates are removed")
        objects.set_defaults(run=run_objects)


def _sizes(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of numbers") from None


def _snapshot(args: argparse.Namespace) -> tuple[Config, Snapshot]:
    cfg = config_of(args)
    return cfg, snapshot_of(args, cfg, cluster_nodes(args, required=source_needs_nodes(args, cfg)))


def run_slurm(args: argparse.Namespace) -> int:
    _, snap = _snapshot(args)
    options = SlurmOptions(format=args.format, names=NameRule.parse(args.slurm_name, args.strip_domain),
                           block_level=args.block_level, block_sizes=args.block_sizes or (),
                           root=None if args.no_root_switch else args.root_switch, yaml_default=args.yaml_default)
    result = export_slurm(snap, options)
    if result.problems:
        problems_table(result.problems, sys.stderr)
    sys.stdout.write(result.text)
    return 0


def run_objects(args: argparse.Namespace) -> int:
    cfg, snap = _snapshot(args)
    objects = hypernodes(snap) if args.target == "volcano" else [kai_topology(snap, cfg.kueue)]
    if not args.output_dir:
        sys.stdout.write(stream(objects))
        return 0
    directory = Path(args.output_dir)
    write_dir(directory, render(objects), read_dir(directory))
    print(f"{directory}: {len(objects)} object(s) written", file=sys.stderr)
    return 0
