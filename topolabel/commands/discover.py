"""`topolabel discover`: run a source and print the snapshot."""

from __future__ import annotations

import argparse

from ..output import emit, for_people, snapshot_table, view_of
from . import COMMANDS
from .common import config_of, snapshot_of

EXAMPLES = """examples:
  topolabel discover --source labels --preset gke --nodes examples/nodes.yaml -o json
  topolabel discover --source inventory --inventory racks.csv --kubeconfig ~/.kube/config
  topolabel discover --config topolabel.yaml -o yaml > snapshot.yaml
"""


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("discover", help=COMMANDS["discover"],
                            parents=[parents["config"], parents["output"], parents["cluster"], parents["source"]],
                            epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Without --config no config is built: its defaults are all discovery needs (start-up time)."""
    snap = snapshot_of(args, config_of(args) if args.config else None)
    if for_people(args):
        snapshot_table(snap, view_of(args))
    else:
        emit(snap.to_dict(), args.output)
    return 0
