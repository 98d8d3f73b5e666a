"""Printing results: JSON and YAML for tools, rich tables for people."""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Any, Iterable, TextIO

import yaml
from rich.console import Console
from rich.table import Table

from labeler.model import Problem, Snapshot
from labeler.plan import Plan

FORMATS = ("table", "json", "yaml")


def emit(data: Any, fmt: str, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    if fmt == "json":
        # Indented for a person at a terminal; compact (and several times faster) into a pipe or file.
        indent = 2 if out.isatty() else None
        out.write(json.dumps(data, indent=indent) + "\n")
    else:
        out.write(yaml.safe_dump(data, sort_keys=False, default_flow_style=False))


def console(out: TextIO | None = None) -> Console:
    """A rich console on `out` (stdout when None, looked up now so redirection works), as wide as the terminal.

    Not a terminal: $COLUMNS, else 80 columns, the width every table is laid out to read well at.
    """
    return Console(file=out or sys.stdout, highlight=False)


def name_column(table: Table, header: str, names: Iterable[str], cap: int = 63) -> None:
    """A column of names (nodes, domains, PodSets) as wide as the longest, so no name is broken in the middle.

    Names longer than `cap` (longer than any label value) fold rather than push every other column out.
    """
    width = max([len(header), *(len(line) for n in names for line in str(n).splitlines())])
    if width <= cap:
        table.add_column(header, no_wrap=True, min_width=width)
    else:
        table.add_column(header, overflow="fold", min_width=cap)


def problems_table(problems: Iterable[Problem], out: TextIO | None = None, limit: int = 50) -> None:
    problems = list(problems)
    if not problems:
        return
    table = Table(title=f"{len(problems)} problem(s)", title_justify="left")
    name_column(table, "node", (p.node or "-" for p in problems[:limit]))
    for col in ("source", "message"):
        table.add_column(col, overflow="fold")
    for p in problems[:limit]:
        table.add_row(p.node or "-", p.source, p.message)
    console(out).print(table)
    if len(problems) > limit:
        console(out).print(f"... and {len(problems) - limit} more (use -o json for all)")


def snapshot_table(snap: Snapshot, out: TextIO | None = None) -> None:
    """Domains per level with their node counts, then the problems."""
    con = console(out)
    con.print(f"{len(snap.nodes)} node(s) placed in {len(snap.levels)} level(s): "
              + " > ".join(f"{lv.name} ({lv.label})" for lv in snap.levels))
    table = Table()
    table.add_column("level")
    table.add_column("domains", justify="right")
    table.add_column("nodes per domain (min / max)", justify="right")
    for lv in snap.levels:
        sizes = Counter(values[lv.name] for values in snap.nodes.values())
        span = f"{min(sizes.values())} / {max(sizes.values())}" if sizes else "-"
        table.add_row(lv.name, str(len(sizes)), span)
    con.print(table)
    problems_table(snap.problems, out)


def plan_table(plan: Plan, out: TextIO | None = None, limit: int = 50) -> None:
    con = console(out)
    con.print(f"{len(plan.changes)} node(s) to change ({plan.disruptive} rewriting or removing labels), "
              f"{plan.unchanged} unchanged")
    if plan.changes:
        table = Table()
        name_column(table, "node", (c.node for c in plan.changes[:limit]))
        for col in ("set", "remove"):
            table.add_column(col, overflow="fold")
        for change in plan.changes[:limit]:
            table.add_row(change.node, "\n".join(f"{k}={v}" for k, v in change.set.items()) or "-",
                          "\n".join(change.remove) or "-")
        con.print(table)
        if len(plan.changes) > limit:
            con.print(f"... and {len(plan.changes) - limit} more (use -o json for all)")
    problems_table(plan.problems, out)
