"""`topolabel config`: the config file's JSON Schema, and a check of config files (topolabel.yaml or a
TopologyLabeler manifest) that lists every problem at its path."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from exporters.registry import option_models as export_models
from labeler.errors import InputError
from labeler.io.documents import kind_of, read_document
from labeler.settings.config import config_issues
from labeler.settings.validation import Issue
from providers.registry import option_models

from ..schemas import as_json, config_schema, crd_spec_schema, resource_schema

EXAMPLES = """examples:
  topolabel config schema > topolabel.schema.json           # what schemas/topolabel.schema.json holds
  topolabel config schema --resource                        # the TopologyLabeler manifest's schema
  topolabel config check topolabel.yaml examples/topologylabeler.yaml
exit status of check: 0 when every file is valid, 2 when one is not (each problem on its own line).
"""
RESOURCE_KIND = "TopologyLabeler"


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("config", help="the config file's JSON Schema; check config files",
                            epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    schema = actions.add_parser("schema", help="print the JSON Schema of topolabel.yaml (for editors)",
                                epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    which = schema.add_mutually_exclusive_group()
    which.add_argument("--resource", action="store_true", help="the TopologyLabeler manifest's schema instead")
    which.add_argument("--crd", action="store_true", help="the CRD's structural schema of the spec instead")
    schema.set_defaults(run=print_schema)
    check = actions.add_parser("check", help="validate config files: every problem, each at its path",
                               epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    check.add_argument("files", nargs="+", metavar="FILE", help="topolabel.yaml, or a TopologyLabeler manifest")
    check.set_defaults(run=check_files)


def print_schema(args: argparse.Namespace) -> int:
    schema = resource_schema() if args.resource else crd_spec_schema() if args.crd else config_schema()
    sys.stdout.write(as_json(schema))
    return 0


def check_files(args: argparse.Namespace) -> int:
    """Each file's problems on stderr, one a line in the order of the file; `valid` on stdout for the others."""
    bad, problems = 0, 0
    for path in args.files:
        found = file_issues(read_document(path))
        for issue in found:
            print(f"{path}: {issue}" if issue.loc else f"{path}: {issue.message}", file=sys.stderr)
        if found:
            bad, problems = bad + 1, problems + len(found)
        else:
            print(f"{path}: valid")
    if bad:
        raise InputError(f"{problems} problem(s) in {bad} of {len(args.files)} file(s)")
    return 0


def file_issues(data: Any) -> list[Issue]:
    """The problems of topolabel.yaml, or of a TopologyLabeler's spec (at paths under `spec`); a file that is
    empty or holds another kind of object is one problem, not a list of unknown keys."""
    if data is None:
        return [Issue((), "empty: neither a topolabel.yaml nor a TopologyLabeler")]
    if not isinstance(data, dict):
        return [Issue((), f"{kind_of(data)}: neither a topolabel.yaml nor a TopologyLabeler (both are mappings)")]
    kind = data.get("kind")
    if kind == RESOURCE_KIND:
        _, found = config_issues(data.get("spec") or {}, option_models(), export_models())
        return [Issue(("spec", *i.loc), i.message) for i in found]
    if kind is not None or "apiVersion" in data:
        what = f"a {kind}" if isinstance(kind, str) else "a Kubernetes object"
        return [Issue((), f"{what}, not a TopologyLabeler (nor a topolabel.yaml, which has no kind)")]
    _, found = config_issues(data, option_models(), export_models())
    return found
