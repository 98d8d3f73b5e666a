"""`topolabel plan`: what `apply` would change, without writing."""

from __future__ import annotations

import argparse

from labeler.gcpause import paused_gc
from labeler.topology.model import Ownership
from labeler.topology.plan import MAX_CHANGE_FRACTION, Plan, check_share, make_plan, reads

from ..output import emit, for_people, names, plan_table, view_of
from ..parsing import flags
from . import COMMANDS
from .common import config_of, snapshot_and_nodes

EXAMPLES = """examples:
  topolabel plan --snapshot snap.json --nodes examples/nodes.yaml
  topolabel plan --source labels --preset gke --kubeconfig ~/.kube/config -o json
  topolabel plan --config topolabel.yaml --snapshot snap.json --exit-code   # in CI: 1 when labels would change
exit status: 0, or with --exit-code 0 when nothing would change and 1 when something would; 2 on errors.
"""


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("plan", help=COMMANDS["plan"],
                            parents=plan_parents(parents), epilog=EXAMPLES,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exit-code", action="store_true",
                        help="exit 1 when there are changes, 0 when there are none (2 on errors), like kubectl diff")
    parser.set_defaults(run=run)


def plan_parents(parents: dict[str, argparse.ArgumentParser]) -> list[argparse.ArgumentParser]:
    force = flags()
    force.add_argument("--force", action="store_true",
                       help="accept a plan that rewrites labels on more nodes than plan.maxChangeFraction")
    return [parents["config"], parents["output-nodes"], parents["cluster"], parents["snapshot"], parents["source"], force]


def build(args: argparse.Namespace) -> Plan:
    """Discover (or read the snapshot), plan against the nodes, refuse too large a disturbance."""
    cfg = config_of(args) if args.config else None  # without one, no config models to build (start-up)
    ownership = cfg.ownership() if cfg else Ownership()
    snapshot, nodes = snapshot_and_nodes(args, cfg, needed_for="which labels the nodes carry now",
                                         reads=lambda snapshot: reads(snapshot, ownership))
    plan = make_plan(snapshot, nodes, ownership, consume=True)  # the snapshot is not read again
    check_share(plan, cfg.plan.max_change_fraction if cfg else MAX_CHANGE_FRACTION, args.force)
    return plan


@paused_gc()  # node records, snapshot, changes: no cycles, yet each paused step's objects were walked after it
def run(args: argparse.Namespace) -> int:
    plan = build(args)
    if for_people(args):
        plan_table(plan, view_of(args))
    elif args.output == "name":
        names("node", (c.node for c in plan.changes))
    else:
        emit(plan.report(), args.output)
    return 1 if args.exit_code and plan.changes else 0
