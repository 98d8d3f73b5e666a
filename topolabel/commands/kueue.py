"""`topolabel kueue`: Kueue TAS objects as files for GitOps, or a stream."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kueue_config.files import diff, read_dir, render, stream
from kueue_config.objects import generate

from ..output import problems_table
from .common import cluster_nodes, config_of, snapshot_of

GENERATOR = "kueue"
EXAMPLES = """examples:
  topolabel kueue --snapshot snap.json --nodes examples/nodes.yaml --output-dir gitops/kueue
  topolabel kueue --source labels --preset gke --nodes nodes.yaml --output-dir -      # stream to stdout
  topolabel kueue --snapshot snap.json --nodes nodes.yaml --output-dir gitops/kueue --check   # in CI
"""


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("kueue", help="generate Topology, ResourceFlavor, ClusterQueue, LocalQueue YAML",
                            parents=[parents["config"], parents["cluster"], parents["snapshot"], parents["source"]],
                            epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", metavar="DIR", required=True, help="directory to write, or - for stdout")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 and show the diff when DIR differs from what would be generated")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    cfg = config_of(args)
    nodes = cluster_nodes(args)
    result = generate(snapshot_of(args, cfg, nodes), nodes, cfg)
    if result.problems:
        problems_table(result.problems, sys.stderr)
    if args.output_dir == "-":
        sys.stdout.write(stream(result.objects))
        return 0
    directory = read_dir(Path(args.output_dir), GENERATOR)
    new = render(result.objects, GENERATOR)
    if args.check:
        changes = diff(directory.current(), directory.target(new))
        if changes:
            sys.stdout.write(changes)
            print(f"{directory.path}: differs from what would be generated; run without --check", file=sys.stderr)
            return 1
        print(f"{directory.path}: up to date ({len(new) + 1} files)", file=sys.stderr)
        return 0
    gone = directory.write(new)
    print(f"{directory.path}: {len(new) + 1} files written", file=sys.stderr)
    for name in gone:
        print(f"  superseded and removed: {name} (a field Kueue cannot change in place changed; the "
              "ClusterQueue now points at the new object)", file=sys.stderr)
    return 0
