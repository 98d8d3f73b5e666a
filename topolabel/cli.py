"""The `topolabel` command line: parse, dispatch to a subcommand, turn known errors into one clear line."""

from __future__ import annotations

import argparse
import importlib
import sys

from kubernetes.client.exceptions import ApiException

from labeler.errors import TopolabelError
from labeler.kube import api_error

from . import version
from .commands import COMMANDS
from .commands.common import cluster_parent, config_parent, output_parent, snapshot_parent, source_parent

DESCRIPTION = """Discover where GPU nodes sit in the network, label them hierarchically, and generate
Kueue Topology-Aware Scheduling objects."""


def parser(prog: str = "topolabel") -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    top.add_argument("--version", action="version", version=f"%(prog)s {version.current()}")
    top.set_defaults(top_parser=top)  # for `completion`, which describes the whole parser
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parents = {"config": config_parent(), "output": output_parent(), "cluster": cluster_parent(),
               "snapshot": snapshot_parent(), "source": source_parent()}
    for name in COMMANDS:
        importlib.import_module(f"{__package__}.commands.{name}").register(sub, parents)
    return top


def main(argv: list[str] | None = None, prog: str = "topolabel") -> int:
    args = parser(prog).parse_args(argv)
    try:
        return args.run(args)
    except TopolabelError as exc:
        print(f"topolabel {args.command}: error: {exc}", file=sys.stderr)
    except ApiException as exc:
        print(f"topolabel {args.command}: Kubernetes API error: {api_error(exc)}", file=sys.stderr)
    except BrokenPipeError:
        return 0
    return 2


def kubectl_main() -> int:
    """The `kubectl-topolabel` plugin: `kubectl topolabel plan ...` runs `topolabel plan ...`."""
    return main(prog="kubectl topolabel")


if __name__ == "__main__":
    sys.exit(main())
