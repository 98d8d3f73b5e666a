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
MAX_MESSAGE = 2000


def one_line(message: str) -> str:
    """A message as one line: control characters (newlines in a node name) escaped, length bounded."""
    text = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in message)
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + f"... ({len(text) - MAX_MESSAGE} more characters)"


def emit(data: Any, fmt: str, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    if fmt == "json":
        # Indented for a person at a terminal; compact (and several times faster) into a pipe or file.
        indent = 2 if out.isatty() else None
        out.write(json.dumps(data, indent=indent) + "\n")
    else:
        out.write(yaml.safe_dump(data, sort_keys=False, default_flow_style=False))


def console(out: TextIO | None = None) -> Console:
    """A rich console on `out` (stdout when None, looked up now so redirection works)."""
    out = out or sys.stdout
    return Console(file=out, width=max(100, Console(file=out).width), highlight=False)


def problems_table(problems: Iterable[Problem], out: TextIO | None = None, limit: int = 50) -> None:
    problems = list(problems)
    if not problems:
        return
    table = Table(title=f"{len(problems)} problem(s)", title_justify="left")
    for col in ("node", "source", "message"):
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
        for col in ("node", "set", "remove"):
            table.add_column(col, overflow="fold")
        for change in plan.changes[:limit]:
            table.add_row(change.node, "\n".join(f"{k}={v}" for k, v in change.set.items()) or "-",
                          "\n".join(change.remove) or "-")
        con.print(table)
        if len(plan.changes) > limit:
            con.print(f"... and {len(plan.changes) - limit} more (use -o json for all)")
    problems_table(plan.problems, out)
