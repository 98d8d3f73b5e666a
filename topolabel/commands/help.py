"""`topolabel help [COMMAND...|sources]`: a command's help, or the sources and label presets in one table each."""

from __future__ import annotations

import argparse
import importlib

from ..output import headline, say
from ..tables import Column, View, render, terminal_width
from . import COMMANDS

TOPICS = ("sources",)


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("help", help=COMMANDS["help"],
                            description="`topolabel help plan` is `topolabel plan --help`; `topolabel help sources` "
                                        "lists the sources (--source) and the labels source's presets (--preset).")
    parser.add_argument("topic", nargs="?", choices=TOPICS, metavar="COMMAND|sources",
                        help="a command (and subcommand; `topolabel.cli` reads `help plan` as `plan --help`), or sources")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.topic == "sources":
        say(sources_help(View(width=terminal_width())))
    else:
        args.top_parser.print_help()
    return 0


def sources_help(view: View) -> list[str]:
    """Every source with what it reads and whether it needs the cluster's nodes, then the presets' keys."""
    from providers.labels.presets import PRESETS, TIERED
    from providers.registry import SOURCES, get_source

    rows = []
    for name in sorted(SOURCES):
        module = importlib.import_module(SOURCES[name])
        summary = (module.__doc__ or "").strip().split("\n\n", 1)[0].replace("\n", " ")
        rows.append((name, "yes" if get_source(name).needs_nodes else "no", summary))
    presets = []
    for name, preset in PRESETS.items():
        levels = [*preset.levels, *([preset.accelerator] if preset.accelerator else [])]
        presets.append((name, [level.name for level in levels],
                        [level.keys[0] + "*" * (len(level.keys) > 1) for level in levels]))
    for name, family in TIERED.items():
        first = family.generations[0]
        chain = f"{first.prefix}N (closest first)" if first.prefix else ", ".join(first.fixed)
        presets.append((name, ["tier-N", family.accelerator], [chain + "*" * (len(family.generations) > 1),
                                                              family.domain_keys[0] + "*" * (len(family.domain_keys) > 1)]))
    return [*headline("sources (--source NAME; each one's flags: topolabel discover --help):", view),
            *render([Column("SOURCE", "name"), Column("NODES", "name"), Column("READS", "prose")], rows, view), "",
            *headline("label presets (--source labels --preset NAME; or --keys K1,K2,... coarsest first):", view),
            *render([Column("PRESET", "name"), Column("LEVELS", "name"), Column("KEYS (COARSEST FIRST)", "name")],
                    sorted(presets), view),
            *headline("* or the key older releases wrote (docs/labels.md)", view)]
