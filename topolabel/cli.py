"""The `topolabel` command line: parse, dispatch to a subcommand, turn known errors into one clear line.

Start-up is part of every command's time, so only the chosen command's module is imported and only its flags
are built (the others are listed by name and help); each command imports what it uses when it runs.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
from typing import Any, NoReturn

from labeler.errors import TopolabelError

from . import version
from .commands import COMMANDS
from .parsing import Parser, Unprinted, chosen_command

DEBUG = "TOPOLABEL_DEBUG"
COMPLETE = "__complete"
# Write errors of stdout: every file topolabel writes reports its own as one line (labeler.io.files), so one of
# these that arrives unwrapped is the output stream's (a full disk, a quota, a file-size limit, a dead device).
OUTPUT_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})
HELP = frozenset({"-h", "--help"})

DESCRIPTION = """Discover where GPU nodes sit in the network, label them hierarchically, and generate
Kueue Topology-Aware Scheduling objects."""


class VersionAction(argparse.Action):
    """`--version`, reading the installed version only when asked."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"{parser.prog} {version.current()}")
        parser.exit()


class Parents(dict):
    """Flag groups several commands share, built when a command first asks for one; with `source`, the source
    group holds only that source's flags."""

    def __init__(self, source: str | None = None) -> None:
        super().__init__()
        self.source = source

    def __missing__(self, key: str) -> argparse.ArgumentParser:
        from .commands.common import PARENTS, source_parent

        value = self[key] = source_parent(self.source) if key == "source" else PARENTS[key]()
        return value


class Narrow(Exception):
    """The narrow parser met something it does not know: the whole parser reads the command line instead."""


class NarrowParser(Parser):
    """A parser with one source's flags, which raises instead of printing an error, and takes no abbreviations
    (one could be ambiguous among every source's flags). It prints no help (`parse` gives help to the whole
    parser), so its layout is `Unprinted`'s."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**{**kwargs, "formatter_class": Unprinted}, allow_abbrev=False)

    def error(self, message: str) -> NoReturn:
        raise Narrow(message)


def parser(prog: str = "topolabel", command: str | None = None, source: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with `command`, only that command's flags are built (completion needs them all); with
    `source` too, only that source's flags ("": none), in a parser that raises `Narrow` on anything else."""
    top = (Parser if source is None else NarrowParser)(prog=prog, description=DESCRIPTION)
    top.add_argument("--version", action=VersionAction)
    top.set_defaults(top_parser=top)  # for `completion`, which describes the whole parser
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parents = Parents(source)
    for name, summary in COMMANDS.items():
        if command in (None, name, "completion"):
            importlib.import_module(f"{__package__}.commands.{name}").register(sub, parents)
        elif source is None:  # the narrow parser reads one command; any other is the whole parser's to read
            sub.add_parser(name, help=summary)
    return top


def chosen_source(argv: list[str]) -> str | None:
    """The source named by the last `--source NAME` or `--source=NAME`, if it is one."""
    from providers.registry import SOURCES

    named = None
    for arg, following in zip(argv, [*argv[1:], ""]):
        if arg == "--source":
            named = following
        elif arg.startswith("--source="):
            named = arg.removeprefix("--source=")
    return named if named in SOURCES else None


def parse(argv: list[str], prog: str) -> argparse.Namespace:
    """The command line parsed. A command line naming its source is read first with that source's flags only,
    and one reading a snapshot (no source runs) with no source's flags at all: importing every source (and
    pydantic with their options) costs more than most discoveries. Anything that parser does not know (help,
    another source's flag, an abbreviation, an error) is read by the whole parser, so the result, help and
    errors are the same."""
    command = chosen_command(argv) or ""
    source = None
    if command != "completion" and not HELP.intersection(argv):
        source = chosen_source(argv) or ("" if reads_snapshot(argv) else None)
    if source is not None:
        try:
            return parser(prog, command, source).parse_args(argv)
        except Narrow:
            pass
    return parser(prog, command).parse_args(argv)


def reads_snapshot(argv: list[str]) -> bool:
    return any(arg == "--snapshot" or arg.startswith("--snapshot=") for arg in argv)


def main(argv: list[str] | None = None, prog: str = "topolabel") -> int:
    """Run one command. Exit status: 0 ok or up to date; 1 differs, does not fit, or writes failed; 2 bad
    input or an error, always with one line on stderr (README, "Exit status"). Output that cannot be written
    is an error too (a full disk: 2), except a reader that went away (a closed pipe: quietly 0)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == [COMPLETE]:  # the shells' and kubectl's completion asking (topolabel.completer)
        from .completer import answer

        return answer(argv[1:] or [""], parser)
    if argv[:1] == ["help"] and argv[1:] not in ([], ["sources"]):
        argv = [*argv[1:], "--help"]  # `help job check` is `job check --help`
    command = chosen_command(argv) or ""
    try:
        try:
            args = parse(argv, prog)
        except SystemExit:  # --help, --version or a usage error, printed by argparse: their output must arrive too
            sys.stdout.flush()
            raise
        code = run(args)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        silence_stdout()
        return 0
    except OSError as exc:
        if exc.errno not in OUTPUT_ERRORS:
            raise
        silence_stdout()
        report(command, f"error: cannot write the output: {exc.strerror or exc}")
        return 2


def run(args: argparse.Namespace) -> int:
    """The chosen command; its errors as one line on stderr and exit 2."""
    try:
        return args.run(args)
    except TopolabelError as exc:
        report(command_of(args), f"error: {exc}")
    except (BrokenPipeError, SystemExit):
        raise
    except OSError as exc:
        if exc.errno in OUTPUT_ERRORS:
            raise
        report_bug(command_of(args), exc)
    except Exception as exc:  # noqa: BLE001 - a bug still ends in one line and exit 2, never 1
        report_bug(command_of(args), exc)
    return 2


def report_bug(command: str, exc: Exception) -> None:
    """An unexpected exception as one line: a Kubernetes API error, or an internal error."""
    message = kube_error(exc)
    if message is not None:
        report(command, f"error: Kubernetes API: {message}")
        return
    report(command, f"internal error: {type(exc).__name__}: {exc} (a bug in topolabel; please report it, "
                    f"with the traceback that {DEBUG}=1 prints)")
    if os.environ.get(DEBUG):
        import traceback

        traceback.print_exc()


def silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush of the unwritten rest fails no more."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a file (a test's capture): nothing flushes it at exit
        pass


def command_of(args: argparse.Namespace) -> str:
    """The command as typed: `plan`, `job check`, `config check`, `export slurm`."""
    words = [args.command, *(getattr(args, dest, None) for dest in ("verb", "action", "target"))]
    return " ".join(w for w in words if isinstance(w, str))


def report(command: str, message: str) -> None:
    """One line on stderr, however many lines the message had (a node name may hold a newline)."""
    from .output import one_line

    print(f"{' '.join(filter(None, ('topolabel', command)))}: {one_line(message)}", file=sys.stderr)


def kube_error(exc: Exception) -> str | None:
    """The one-line reason of a Kubernetes API error; None for anything else. A command that talked to a
    cluster has the client loaded already, so other commands never import it just to check."""
    exceptions = sys.modules.get("kubernetes.client.exceptions")
    if exceptions is None or not isinstance(exc, exceptions.ApiException):
        return None
    from labeler.cluster.kube import api_error

    return api_error(exc)


def kubectl_main() -> int:
    """The `kubectl-topolabel` plugin: `kubectl topolabel plan ...` runs `topolabel plan ...`."""
    return main(prog="kubectl topolabel")


def kubectl_complete() -> int:
    """`kubectl_complete-topolabel WORDS...`: what kubectl (1.26 and later) runs to complete
    `kubectl topolabel WORDS...` (topolabel.completer)."""
    from .completer import answer

    return answer(sys.argv[1:] or [""], parser)


if __name__ == "__main__":
    sys.exit(main())
