"""`topolabel apply`: write the label plan to the cluster."""

from __future__ import annotations

import argparse
import sys

from labeler.cluster.apply import apply_plan
from labeler.cluster.kube import patch_node

from labeler.errors import InputError

from ..output import emit, for_people, names, plan_table, problems_table, say, view_of
from ..progress import terminal
from . import COMMANDS
from .common import config_of, connect
from .plan import build, plan_parents

EXAMPLES = """examples:
  topolabel apply --source labels --preset gke --dry-run
  topolabel apply --snapshot snap.json --kubeconfig ~/.kube/config --concurrency 32
"""


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("apply", help=COMMANDS["apply"],
                            parents=plan_parents(parents), epilog=EXAMPLES,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true", help="send the patches with dryRun=All (nothing stored)")
    parser.add_argument("--concurrency", type=int, help="patches in flight (default: apply.concurrency, 16)")
    parser.add_argument("-v", "--verbose", action="store_true", help="after the result, the plan: a line per node")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.nodes:
        raise InputError("--nodes is a file; apply writes to a cluster (use --kubeconfig)")
    cfg = config_of(args)
    plan = build(args)
    api = connect(args)
    result = apply_plan(plan, lambda name, body: patch_node(api, name, body, args.dry_run),
                        concurrency=args.concurrency or cfg.apply.concurrency, retries=cfg.apply.retries,
                        progress=terminal(), budget=args.request_timeout)
    report = {**plan.report(), "result": result.to_dict(), "dryRun": args.dry_run}
    if for_people(args):
        verb = "would write" if args.dry_run else "wrote"
        say([f"{verb} {len(result.written)} node(s), {plan.unchanged} unchanged, {len(result.failed)} failed, "
             f"{result.retries} retried" + ("" if args.verbose or not plan.changes else " (-v: what changed)"),
             *(f"  {node}: {error}" for node, error in sorted(result.failed.items()))])
        if args.verbose:
            plan_table(plan, view_of(args))
        else:
            problems_table(plan.problems, view=view_of(args))
    elif args.output == "name":
        names("node", sorted(result.written))
    else:
        emit(report, args.output)
    if result.unreachable:  # no answer: whether those writes landed is unknown - an error, not a refusal
        first = sorted(result.unreachable)[0]
        print(f"topolabel apply: error: {len(result.unreachable)} node(s) got no answer (e.g. {first}: "
              f"{result.failed[first]}); the lines above say what was written", file=sys.stderr)
        return 2
    if result.failed:
        print(f"topolabel apply: {len(result.failed)} node(s) not written; the lines above say why", file=sys.stderr)
    return 1 if result.failed else 0
