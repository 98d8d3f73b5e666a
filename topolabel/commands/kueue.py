"""`topolabel kueue`: Kueue objects as files for GitOps, or a stream in YAML or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kueue_config.files import diff, read_dir, render, stream
from kueue_config.objects import generate, reads
from labeler.errors import InputError
from labeler.gcpause import paused_gc

from ..output import problems_table
from . import COMMANDS
from .common import config_of, snapshot_and_nodes

GENERATOR = "kueue"
EXAMPLES = """examples:
  topolabel kueue --snapshot snap.json --nodes examples/nodes.yaml --output-dir gitops/kueue
  topolabel kueue --source labels --preset gke --nodes nodes.yaml -o yaml | kubectl apply -f -
  topolabel kueue --snapshot snap.json --nodes nodes.yaml -o json | jq '.items[].metadata.name'
  topolabel kueue --snapshot snap.json --nodes nodes.yaml --output-dir gitops/kueue --check   # in CI
exit status: 0 written or up to date, 1 with --check when DIR differs, 2 on errors.
"""
STREAMS = ("yaml", "json", "name")


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("kueue", help=COMMANDS["kueue"],
                            parents=[parents["config"], parents["cluster"], parents["snapshot"], parents["source"]],
                            epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    out = parser.add_argument_group("output (one of)")
    out.add_argument("--output-dir", metavar="DIR", help="write one file per object and a kustomization.yaml "
                                                         "(- streams YAML to stdout, as -o yaml)")
    out.add_argument("-o", "--output", choices=STREAMS,
                     help="stream the objects to stdout: YAML documents, a JSON List as kubectl prints one, or "
                          "one kind.group/name line each")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 and show the diff when DIR differs from what would be generated")
    parser.set_defaults(run=run)


def output_mode(args: argparse.Namespace) -> str:
    """`dir`, `yaml` or `json`; a combination that would leave a flag unused is refused."""
    if args.output and args.output_dir:
        raise InputError(f"-o {args.output} streams to stdout and --output-dir writes files: give one of them")
    if args.check and (args.output or args.output_dir in (None, "-")):
        raise InputError("--check compares a directory: give --output-dir DIR (and no -o)")
    if args.output:
        return args.output
    if args.output_dir == "-":
        return "yaml"
    if not args.output_dir:
        raise InputError("give --output-dir DIR (files for Git) or -o yaml|json (a stream to stdout)")
    return "dir"


@paused_gc()  # node records and snapshot: no cycles, yet the collector would walk them after every step
def run(args: argparse.Namespace) -> int:
    mode = output_mode(args)
    cfg = config_of(args)
    snapshot, nodes = snapshot_and_nodes(args, cfg, needed_for="which pool each node is in and what it holds "
                                         "(ResourceFlavors need the pool labels and taints, ClusterQueue quotas "
                                         "the allocatable)", reads=lambda snapshot: reads(snapshot, cfg.pools))
    result = generate(snapshot, nodes, cfg)
    if result.problems:
        problems_table(result.problems, sys.stderr)
    if mode == "yaml":
        sys.stdout.write(stream(result.objects))
        return 0
    if mode == "name":
        names_of(result.objects)
        return 0
    if mode == "json":
        json.dump({"apiVersion": "v1", "kind": "List", "items": result.objects}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    directory = read_dir(Path(args.output_dir), GENERATOR)
    new = render(result.objects, GENERATOR)
    if args.check:
        differences = diff(directory.current(), directory.target(new))
        if differences:
            sys.stdout.write(differences)
            print(f"{directory.path}: differs from what would be generated; run without --check", file=sys.stderr)
            return 1
        print(f"{directory.path}: up to date ({len(new) + 1} files)", file=sys.stderr)
        return 0
    changes = directory.write(new)
    print(f"{directory.path}: {changes.summary()}", file=sys.stderr)
    for verb, files in (("created", changes.created), ("updated", changes.updated)):
        for name in files:
            print(f"  {verb}: {name}", file=sys.stderr)
    for name, successor in sorted(changes.removed.items()):
        print(f"  removed: {name} ({removal_reason(name, successor)})", file=sys.stderr)
    return 0


def names_of(objects: list[dict]) -> None:
    """`-o name`: `topology.kueue.x-k8s.io/gke-0fed95`, as `kubectl apply -o name` prints each object."""
    for obj in objects:
        group = str(obj["apiVersion"]).rpartition("/")[0]
        kind = str(obj["kind"]).lower()
        print(f"{kind}.{group}/{obj['metadata']['name']}" if group else f"{kind}/{obj['metadata']['name']}")


def removal_reason(name: str, successor: str | None) -> str:
    """Why a file `kueue` wrote before is gone: replaced (an immutable field changed), or no longer generated."""
    if successor:
        return f"replaced by {successor}: a field Kueue cannot change in place changed"
    kind = name.split("-", 1)[0]
    if kind == "resourceflavor":
        return "no pool of that name now: its nodes left, or pools.label changed"
    if kind == "topology":
        return "no longer generated"
    return "no longer in the config"
