"""`topolabel completion bash|zsh|fish`: a completion script generated from the parser itself by shtab,
so it never falls behind the commands and flags."""

from __future__ import annotations

import argparse
import sys

from ..completer import LEVEL_METAVARS
from . import COMMANDS

SHELLS = ("bash", "zsh", "fish")
PATH_METAVARS = {"FILE": "FILE", "DIR": "DIRECTORY"}
LEVELS = "_topolabel_levels"
# Level names depend on the Topology the command line names, so the scripts ask `topolabel __complete`
# (topolabel.completer) with the words typed so far.
PREAMBLE = {
    "bash": f"""{LEVELS}() {{  # $1: the word being completed
  "${{COMP_WORDS[0]}}" __complete "${{COMP_WORDS[@]:1:COMP_CWORD-1}}" "$1" 2>/dev/null | grep -v '^:'
}}""",
    "zsh": f"""{LEVELS}() {{  # the words left of the cursor, the last one (maybe empty) being completed
  local -a typed levels
  typed=(${{(z)LBUFFER}})
  [[ $LBUFFER == *' ' ]] && typed+=("")
  levels=(${{(f)"$(${{typed[1]}} __complete "${{(@)typed[2,-1]}}" 2>/dev/null | grep -v '^:')"}})
  compadd -a levels
}}""",
}

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
    sys.stdout.write(shtab.complete(top, shell=args.shell, preamble=PREAMBLE.get(args.shell, "")))
    return 0


def _complete_paths(parser: argparse.ArgumentParser, shtab: object) -> None:
    """Options taking a FILE or DIR complete file or directory names, and a LEVEL the Topology's levels."""
    for action in parser._actions:
        kind = PATH_METAVARS.get(str(action.metavar or ""))
        if kind:
            action.complete = getattr(shtab, kind)  # type: ignore[attr-defined]  # shtab's attribute, not argparse's
        elif action.metavar in LEVEL_METAVARS:
            action.complete = {"bash": LEVELS, "zsh": LEVELS}  # type: ignore[attr-defined]  # as above
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _complete_paths(child, shtab)
