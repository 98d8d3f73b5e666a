"""`topolabel job annotate|check`: put the Kueue queue label and TAS annotations where Kueue reads them."""

from __future__ import annotations

import argparse
import sys

from kueue_config.tas import jobfile
from kueue_config.tas.annotate import TASRequest, annotate
from kueue_config.tas.gates import Gates
from kueue_config.tas.lint import ERROR, PENDING, WARNING, Finding, LintContext, lint, summary
from kueue_config.tas.queueing import queue_warning
from kueue_config.tas.setup import resolve_level
from kueue_config.tas.workloads import QUEUE_LABEL, Workload, workloads_in
from labeler.errors import InputError, TopologyError
from labeler.io.files import read_text, write_atomic
from labeler.topology.names import name_problem

from ..output import emit, for_people, say, title, view_of
from ..tables import Column, render
from ..pipeline import read_config
from ..parsing import common_group
from . import COMMANDS
from .common import add_timeouts
from .tas_common import TASContext, tas_context, tas_parent

ANNOTATE_EXAMPLES = """examples:
  topolabel job annotate job.yaml --queue gpu --within block --kueue-dir gitops/kueue > job.tas.yaml
  topolabel job annotate job.yaml --queue gpu --within block --preferred --snapshot snap.json -i
  topolabel job annotate jobset.yaml --queue gpu --within block --slice-size 4 --slice-within hostname \\
      --kubeconfig ~/.kube/config
"""
CHECK_EXAMPLES = """examples:
  topolabel job check job.tas.yaml --kueue-dir gitops/kueue
  topolabel job check job.tas.yaml --kubeconfig ~/.kube/config --strict -o json
exit status: 0 no errors, 1 errors (with --strict: or warnings), 2 an unreadable file or set-up.
"""
EXAMPLES = ANNOTATE_EXAMPLES + CHECK_EXAMPLES.removeprefix("examples:\n")


def _source_flags(parser: argparse.ArgumentParser) -> None:
    group = common_group(parser)
    group.add_argument("--config", metavar="FILE", help="topolabel.yaml (level names, key prefix)")
    group.add_argument("--kubeconfig", metavar="FILE", help="read the Kueue set-up from this cluster")
    group.add_argument("--context", help="kubeconfig context")
    add_timeouts(group)


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    job = sub.add_parser("job", help=COMMANDS["job"],
                         epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = job.add_subparsers(dest="verb", required=True, metavar="VERB")
    common = [parents["snapshot"], tas_parent()]

    ann = verbs.add_parser("annotate", help="write the queue label and TAS annotations (stdout unless -i)",
                           parents=common, epilog=ANNOTATE_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    ann.add_argument("file", metavar="FILE", help="job YAML (Job, JobSet, PyTorchJob, LeaderWorkerSet, RayJob, "
                                                  "RayCluster; several documents allowed; - for stdin)")
    ann.add_argument("--queue", required=True, help="LocalQueue name (the kueue.x-k8s.io/queue-name label)")
    where = ann.add_mutually_exclusive_group(required=True)
    where.add_argument("--within", metavar="LEVEL", help="level name (block) or node label key")
    where.add_argument("--required", metavar="LEVEL",
                       help="--within LEVEL, named as Kueue's podset-required-topology (not with --preferred)")
    ann.add_argument("--preferred", action="store_true",
                     help="prefer LEVEL but let Kueue climb to a larger domain or spread when it does not fit")
    ann.add_argument("--slice-size", type=int, metavar="N", help="pods per slice (a divisor of the pod count)")
    ann.add_argument("--slice-within", metavar="LEVEL", help="level each slice must fit in")
    ann.add_argument("-i", "--in-place", action="store_true", help="rewrite FILE instead of printing")
    _source_flags(ann)
    ann.set_defaults(run=run_annotate)

    chk = verbs.add_parser("check", help="list what Kueue would reject or silently ignore; exit 1 on errors",
                           parents=[*common, parents["output"]], epilog=CHECK_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    chk.add_argument("file", metavar="FILE", help="job YAML (- for stdin)")
    chk.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    _source_flags(chk)
    chk.set_defaults(run=run_check)


def _keys(ctx: TASContext, workload: Workload, queue: str | None,
          topology: str | None) -> tuple[tuple[str, ...], ...] | None:
    """The level keys of each Topology this workload's queue reaches, or None without a set-up to ask."""
    if ctx.setup is None:
        return None
    return tuple(ctx.setup.level_keys(queue, workload.namespace or "default", topology))


def _context(ctx: TASContext, workload: Workload, queue: str | None, args: argparse.Namespace) -> LintContext:
    keys = _keys(ctx, workload, queue, args.topology)
    tas_only = ctx.setup.queue(queue, workload.namespace or "default").tas_only if ctx.setup else None
    return LintContext(keys, tas_only, Gates.parse(getattr(args, "kueue_feature_gates", None)))


def _resolve(level: str, keys: tuple[tuple[str, ...], ...] | None, ctx: TASContext) -> str:
    """A level name or key resolved in every Topology the queue reaches; they must agree."""
    if keys is None:
        return resolve_level(level, None, ctx.known_levels)
    found = {resolve_level(level, k, ctx.known_levels) for k in keys}
    if len(found) > 1:
        raise TopologyError(f"level {level!r} means {' or '.join(sorted(found))} in the queue's Topologies; "
                            "give the label key, or --topology NAME")
    return found.pop()


def run_annotate(args: argparse.Namespace) -> int:
    if args.required and args.preferred:
        raise TopologyError("--required and --preferred contradict each other: use --within LEVEL --preferred")
    problem = name_problem(args.queue, limit=63)  # a LocalQueue's name, carried in a label value (63 at most)
    if problem:
        raise InputError(f"--queue: {problem}")
    text = read_text(args.file)
    docs = jobfile.load(text, args.file)
    workloads = workloads_in(docs, args.file)
    ctx = tas_context(args, read_config(args.config))
    notes: list[str] = []
    for workload in workloads:
        keys = _keys(ctx, workload, args.queue, args.topology)
        level = _resolve(args.within or args.required, keys, ctx)
        slice_level = _resolve(args.slice_within, keys, ctx) if args.slice_within else None
        request = TASRequest(args.queue, level, args.preferred, args.slice_size, slice_level)
        notes += annotate(workload, request, keys[0] if keys and len(keys) == 1 else None)
        warning = queue_warning(ctx.setup, args.queue, workload.namespace) if ctx.setup else None
        if warning:
            notes.append(f"warning: {workload.ref}: {warning}")
        if keys is None:
            notes.append(f"{workload.ref}: level {level} not checked against a Topology (no --kueue-dir, "
                         "--snapshot or --kubeconfig)")
    out = jobfile.dump(docs, explicit_start=text.lstrip().startswith("---"), indent=jobfile.guess_indent(text))
    if args.in_place and args.file != "-":
        write_atomic(args.file, out)
    else:
        sys.stdout.write(out)
    for note in notes:
        print(note, file=sys.stderr)
    return 0


def run_check(args: argparse.Namespace) -> int:
    docs = jobfile.load(read_text(args.file), args.file)
    workloads = workloads_in(docs, args.file)
    ctx = tas_context(args, read_config(args.config))
    findings = []
    for workload in workloads:
        queue = str(((workload.obj.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL) or "") or None
        findings += lint([workload], _context(ctx, workload, queue, args))
        warning = queue_warning(ctx.setup, queue, workload.namespace) if ctx.setup and queue else None
        if warning:
            findings.append(Finding(WARNING, workload.ref, f'metadata.labels["{QUEUE_LABEL}"]', warning,
                                    "create the LocalQueue in the job's namespace, or use one that exists there "
                                    "(`topolabel job annotate --queue NAME`)", PENDING))
    counts = summary(findings)
    if for_people(args):
        if findings:
            view = view_of(args)
            say([*title(f"{args.file}: {counts[ERROR]} error(s), {counts[WARNING]} warning(s)", view),
                 *render([Column("OBJECT", "name"), Column("SEVERITY"), Column("PATH", "name"),
                          Column("PROBLEM", "prose"), Column("FIX", "prose")],
                         [(f.object, f.severity, f.path, f.message, f.fix) for f in findings], view)])
        else:
            checked = "" if ctx.setup else " (levels not checked against a Topology)"
            print(f"{args.file}: {len(workloads)} workload(s), no problems found{checked}")
    else:
        emit({"file": args.file, "findings": [f.to_dict() for f in findings], **counts}, args.output)
    return 1 if counts[ERROR] or (args.strict and counts[WARNING]) else 0
