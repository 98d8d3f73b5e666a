"""Completion answered by topolabel itself, in cobra's protocol: candidates one a line, then `:DIRECTIVE`.

kubectl (1.26 and later) completes `kubectl topolabel ...` by running `kubectl_complete-topolabel` with the
words after the plugin's name, the last one being the word to complete; `topolabel __complete ...` answers
the same way, and the bash and zsh scripts of `topolabel completion` call it for what a static script cannot
know: the level names of the Topology a command line names (`--within`, `--slice-within`, `--level`).
Everything else comes from the parser itself: commands, flags, choices (sources, presets, formats).
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Sequence

from .parsing import chosen_command

Builder = Callable[[str, "str | None"], argparse.ArgumentParser]  # cli.parser: (prog, command) -> the parser

# cobra's ShellCompDirective values
DEFAULT, NO_SPACE, NO_FILES, DIRECTORIES = 0, 2, 4, 16
LEVEL_METAVARS = frozenset({"LEVEL"})
LEVEL_SOURCES = ("--kueue-dir", "--snapshot", "--config")


def candidates(words: Sequence[str], build: Builder) -> tuple[list[str], int]:
    """What may come at the last of `words` (the arguments after `topolabel`; "" for a new word), and the
    directive for the shell (file names when a FILE is expected). `build` makes the command's parser."""
    done, current = list(words[:-1]), words[-1] if words else ""
    parser = build("topolabel", chosen_command(done))
    pending: argparse.Action | None = None
    for word in done:
        if pending is not None:
            pending = None
        elif word.startswith("-"):
            action = parser._option_string_actions.get(word.split("=", 1)[0])
            if action is not None and action.nargs != 0 and "=" not in word:
                pending = action
        else:
            parser = _subcommand(parser, word) or parser
    if pending is not None:
        return _values(pending, current, done)
    if current.startswith("-"):
        flags = sorted(f for a in parser._actions for f in a.option_strings if f.startswith("--"))
        return [f for f in flags if f.startswith(current)], NO_FILES
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if subs:
        return sorted(c for c in subs[0].choices if c.startswith(current)), NO_FILES
    positional = [a for a in parser._actions if not a.option_strings and a.dest != "help"]
    return [], DEFAULT if positional else NO_FILES


def _subcommand(parser: argparse.ArgumentParser, word: str) -> argparse.ArgumentParser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and word in action.choices:
            return action.choices[word]
    return None


def _values(action: argparse.Action, current: str, words: Sequence[str]) -> tuple[list[str], int]:
    if action.choices is not None:
        return sorted(str(c) for c in action.choices if str(c).startswith(current)), NO_FILES
    metavar = str(action.metavar or "")
    if metavar in LEVEL_METAVARS:
        return [name for name in level_names(words) if name.startswith(current)], NO_FILES
    if metavar == "DIR":
        return [], DIRECTORIES
    if metavar in ("FILE", "SNAPSHOT"):
        return [], DEFAULT
    return [], NO_FILES


def flag_value(words: Sequence[str], flag: str) -> str | None:
    """The value of the last `flag VALUE` or `flag=VALUE` among `words`."""
    found = None
    for word, following in zip(words, [*words[1:], None]):
        if word == flag and following is not None:
            found = following
        elif word.startswith(flag + "="):
            found = word.split("=", 1)[1]
    return found


def level_names(words: Sequence[str]) -> list[str]:
    """The level names (and label keys) the command line's Topology has: from --kueue-dir (the Topology
    objects `topolabel kueue` wrote), else --snapshot, else --config; none when it names none or cannot be read."""
    from labeler.errors import TopolabelError

    try:
        kueue_dir = flag_value(words, "--kueue-dir")
        if kueue_dir:
            from kueue_config.tas.setup import read_kueue_objects

            keys = [str(level.get("nodeLabel")) for obj in read_kueue_objects(kueue_dir) if obj.get("kind") == "Topology"
                    for level in (obj.get("spec") or {}).get("levels") or [] if isinstance(level, dict)]
            return _names_and_keys(keys)
        snapshot = flag_value(words, "--snapshot")
        if snapshot:
            from .pipeline import read_snapshot

            return _names_and_keys([level.label for level in read_snapshot(snapshot).levels])
        config = flag_value(words, "--config")
        if config:
            from .pipeline import read_config

            cfg = read_config(config)
            return _names_and_keys([level.label or f"{cfg.key_prefix}{level.name}" for level in cfg.levels])
    except (TopolabelError, OSError):
        pass
    return []


def _names_and_keys(keys: Sequence[str]) -> list[str]:
    """Short names first (`block`), then the keys (`topolabel.dev/block`), each once."""
    return list(dict.fromkeys([*(k.rsplit("/", 1)[-1] for k in keys), *keys]))


def answer(words: Sequence[str], build: Builder) -> int:
    """Print the candidates and the directive, as cobra's `__complete` does."""
    found, directive = candidates(words, build)
    sys.stdout.write("".join(f"{c}\n" for c in found) + f":{directive}\n")
    return 0
