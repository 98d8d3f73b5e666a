"""`topolabel completion bash|zsh|fish`: a completion script generated from the parser itself by shtab,
so it never falls behind the commands and flags."""

from __future__ import annotations

import argparse
import sys

from . import COMMANDS

SHELLS = ("bash", "zsh", "fish")
PATH_METAVARS = {"FILE": "FILE", "DIR": "DIRECTORY"}

EXAMPLES = """install:
  bash:  topolabel completion bash > ~/.local/share/bash-completion/completions/topolabel
  zsh:   topolabel completion zsh > "${fpath[1]}/_topolabel"
  fish:  topolabel completion fish > ~/.config/fish/completions/topolabel.fish
"""


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("completion", help=COMMANDS["completion"], epilog=EXAMPLES,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("shell", choices=SHELLS)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import shtab  # only this command needs it

    top: argparse.ArgumentParser = args.top_parser
    _complete_paths(top, shtab)
    sys.stdout.write(shtab.complete(top, shell=args.shell))
    return 0


def _complete_paths(parser: argparse.ArgumentParser, shtab: object) -> None:
    """Options taking a FILE or DIR complete file or directory names."""
    for action in parser._actions:
        kind = PATH_METAVARS.get(str(action.metavar or ""))
        if kind:
            action.complete = getattr(shtab, kind)  # type: ignore[attr-defined]
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _complete_paths(child, shtab)
