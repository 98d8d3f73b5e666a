"""The argument parser every command uses: errors on one line with a "did you mean", and help laid out for
reading - the command's own flags first, then the flags every command shares, then the examples, then each
source's flags under its own heading.

Groups named `COMMON` (config, output, cluster access) merge into one, since argparse joins parent groups
by title; groups titled `<source> source...` are a source's flags (providers' `add_arguments`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn, Sequence

COMMON = "common flags"
SOURCES_HEADING = "source flags (--source NAME takes those under its heading; `topolabel help sources` lists them):"


class Unprinted(argparse.HelpFormatter):
    """A help layout of a set width, for parsers that print no help: argparse's own asks shutil for the
    terminal's width, and a discovery that writes to a pipe or a file needs neither shutil nor bz2 and lzma,
    which it imports (5M instructions, half a percent of an 8,192-HCA discovery)."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=80)


def flags() -> argparse.ArgumentParser:
    """A parser whose flags others take (`parents=`); it prints no help itself."""
    return argparse.ArgumentParser(add_help=False, formatter_class=Unprinted)


class Parser(argparse.ArgumentParser):
    """argparse with the house's errors and help layout."""

    def error(self, message: str) -> NoReturn:
        """`topolabel plan: error: ... (see topolabel plan --help)`, one line, exit 2 (argparse's exit code)."""
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)

    # argparse's overloads also take a namespace of another class, which these parsers never do (the ignore)
    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        """As argparse's, but an unknown flag is reported by the command it was given to, with the closest
        flag that command knows."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            chosen = chosen_parser(self, parsed)
            chosen.error(f"unrecognized arguments: {' '.join(extras)}{suggest_flag(extras, chosen)}")
        return parsed

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """An invalid choice (a command, a source, a format) with the closest valid one."""
        if action.choices is not None and value not in action.choices:
            from labeler.settings.validation import did_you_mean

            raise argparse.ArgumentError(action, f"invalid choice: {value!r}"
                                                 + did_you_mean(str(value), [str(c) for c in action.choices]))

    def format_help(self) -> str:
        """usage, description, the command's flags, the common flags, the epilog (examples), the sources'."""
        sources = [g for g in self._action_groups if is_source_group(g)]
        shared = [a for g in sources for a in g._group_actions]
        formatter = self._get_formatter()
        usage_actions = [a for a in self._actions if a not in shared]
        formatter.add_usage(self.usage, usage_actions, self._mutually_exclusive_groups)
        formatter.add_text(self.description)
        for group in sorted((g for g in self._action_groups if g not in sources), key=lambda g: g.title == COMMON):
            if group._group_actions:
                formatter.start_section(group.title)
                formatter.add_text(group.description)
                formatter.add_arguments(group._group_actions)
                formatter.end_section()
        formatter.add_text(self.epilog)
        if sources:
            formatter.add_text(SOURCES_HEADING)
            for group in sources:
                formatter.start_section(group.title)
                formatter.add_arguments(group._group_actions)
                formatter.end_section()
        return formatter.format_help()


def chosen_command(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line (the top level takes no option with a value)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def common_group(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """The parser's group of common flags (one, whichever parent or command adds to it first)."""
    found = next((g for g in parser._action_groups if g.title == COMMON), None)
    return found or parser.add_argument_group(COMMON)


def is_source_group(group: argparse._ArgumentGroup) -> bool:
    """A source's flags: its group is titled `<name> source` (maybe with more words)."""
    from providers.registry import SOURCES

    words = (group.title or "").split()
    return len(words) >= 2 and words[1] == "source" and words[0] in SOURCES


def chosen_parser(top: argparse.ArgumentParser, parsed: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)command's parser the namespace was filled by: follow each subparsers action's chosen name."""
    parser = top
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        chosen = next((a.choices[getattr(parsed, a.dest)] for a in subs
                       if getattr(parsed, a.dest, None) in (a.choices or {})), None)
        if chosen is None:
            return parser
        parser = chosen


def suggest_flag(extras: Sequence[str], parser: argparse.ArgumentParser) -> str:
    """`; did you mean --output?` for the first unknown flag close to one the command takes."""
    import difflib

    known = [flag for action in parser._actions for flag in action.option_strings if flag.startswith("--")]
    for extra in extras:
        if extra.startswith("--"):
            close = difflib.get_close_matches(extra.split("=", 1)[0], known, n=1, cutoff=0.6)
            if close:
                return f"; did you mean {close[0]}?"
    return ""
