"""The `topolabel` command line: parse, dispatch to a subcommand, turn known errors into one clear line."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback

from kubernetes.client.exceptions import ApiException

from labeler.errors import TopolabelError
from labeler.kube import api_error

from .commands import COMMANDS
from .commands.common import cluster_parent, config_parent, snapshot_parent, source_parent
from .output import one_line

DEBUG = "TOPOLABEL_DEBUG"

DESCRIPTION = """Discover where GPU nodes sit in the network, label them hierarchically, and generate
Kueue Topology-Aware Scheduling objects."""


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="topolabel", description=DESCRIPTION)
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parents = {"config": config_parent(), "cluster": cluster_parent(), "snapshot": snapshot_parent(),
               "source": source_parent()}
    for name in COMMANDS:
        importlib.import_module(f"{__package__}.commands.{name}").register(sub, parents)
    return top


def main(argv: list[str] | None = None) -> int:
    """Run one command. Exit status: 0 ok or up to date; 1 differs, does not fit, or writes failed; 2 bad
    input or an error, always with one line on stderr (README, "Exit status")."""
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except TopolabelError as exc:
        report(args.command, f"error: {exc}")
    except ApiException as exc:
        report(args.command, f"Kubernetes API error: {api_error(exc)}")
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - a bug still ends in one line and exit 2, never 1
        report(args.command, f"internal error: {type(exc).__name__}: {exc} (a bug in topolabel; please report it, "
                             f"with the traceback that {DEBUG}=1 prints)")
        if os.environ.get(DEBUG):
            traceback.print_exc()
    return 2


def report(command: str, message: str) -> None:
    """One line on stderr, however many lines the message had (a node name may hold a newline)."""
    print(f"topolabel {command}: {one_line(message)}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
