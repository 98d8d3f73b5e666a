"""Printing results: JSON and YAML for tools, rich tables for people.

rich and PyYAML are imported by the functions that print with them: a command printing JSON never loads rich."""

from __future__ import annotations

import errno
import functools
import os
import sys
from collections import Counter
from typing import TYPE_CHECKING, Any, Iterable, Iterator, TextIO

from labeler.model import Problem, Snapshot

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from labeler.plan import Plan

FORMATS = ("table", "json", "yaml")
MAX_MESSAGE = 2000
JSON_SLICE = 5000  # list items per orjson call when writing compact JSON


def one_line(message: str) -> str:
    """A message as one line: control characters (newlines in a node name) escaped, length bounded.

    Cut before escaping: a message may quote hundreds of MB (a parser's error on a huge document), and only
    the first MAX_MESSAGE characters are ever shown."""
    pieces, size = [], 0
    for shown, ch in enumerate(message[:MAX_MESSAGE]):
        piece = ch if ch.isprintable() else repr(ch)[1:-1]
        if size + len(piece) > MAX_MESSAGE:
            break
        pieces.append(piece)
        size += len(piece)
    else:
        shown = min(len(message), MAX_MESSAGE)
    more = len(message) - shown
    return "".join(pieces) + (f"... ({more} more characters)" if more else "")


def emit(data: Any, fmt: str, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    if fmt == "json":
        # Indented for a person at a terminal; compact into a pipe or file, a slice at a time. orjson writes a
        # 100,000-node plan in a fifth of json's time, without json's list of small pieces (30 MB at that size).
        import orjson

        pieces = [_json(data, orjson.OPT_INDENT_2)] if out.isatty() else _json_pieces(data)
        if hasattr(out, "buffer"):
            out.flush()
            out.buffer.writelines(pieces)
            out.buffer.write(b"\n")
        else:
            out.write(b"".join(pieces).decode() + "\n")
    else:
        import yaml

        out.write(yaml.safe_dump(data, sort_keys=False, default_flow_style=False))


def _json_pieces(data: Any) -> Iterator[bytes]:
    """`data` as compact JSON, byte for byte what one orjson call writes, in pieces: a list at the top or as a
    value of the top mapping goes JSON_SLICE items at a time (a 100,000-node plan is never one 22 MB buffer)."""
    if isinstance(data, dict):
        yield b"{"
        for i, (key, value) in enumerate(data.items()):
            yield (b"," if i else b"") + _json({key: 0})[1:-2]  # '"key":'
            yield from _list_pieces(value) if isinstance(value, list) else [_json(value)]
        yield b"}"
    else:
        yield from _list_pieces(data) if isinstance(data, list) else [_json(data)]


def _list_pieces(items: list[Any]) -> Iterator[bytes]:
    yield b"["
    for start in range(0, len(items), JSON_SLICE):
        yield (b"," if start else b"") + _json(items[start:start + JSON_SLICE])[1:-1]
    yield b"]"


def _json(data: Any, option: int = 0) -> bytes:
    """JSON by orjson; mapping keys that are not strings are written as strings (as json writes them)."""
    import orjson

    return orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS | option)


def console(out: TextIO | None = None) -> Console:
    """A rich console on `out` (stdout when None, looked up now so redirection works), as wide as the terminal.

    Not a terminal: $COLUMNS, else 80 columns, the width every table is laid out to read well at.
    """
    return _console_class()(file=out or sys.stdout, highlight=False)


@functools.cache
def _console_class() -> type[Console]:
    """rich's Console, except that a closed pipe raises BrokenPipeError for the CLI to end quietly with 0 (rich
    itself exits with 1, which would read as "differs" or "does not fit")."""
    from rich.console import Console

    class PipeConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    return PipeConsole


def name_column(table: Table, header: str, names: Iterable[str], cap: int = 63) -> None:
    """A column of names (nodes, domains, PodSets) as wide as the longest, so no name is broken in the middle.

    Names longer than `cap` (longer than any label value) fold rather than push every other column out.
    """
    width = max([len(header), *(len(line) for n in names for line in str(n).splitlines())])
    if width <= cap:
        table.add_column(header, no_wrap=True, min_width=width)
    else:
        table.add_column(header, overflow="fold", min_width=cap)


def table(**options: Any) -> Table:
    from rich.table import Table

    return Table(**options)


def problems_table(problems: Iterable[Problem], out: TextIO | None = None, limit: int = 50) -> None:
    problems = list(problems)
    if not problems:
        return
    grid = table(title=f"{len(problems)} problem(s)", title_justify="left")
    name_column(grid, "node", (p.node or "-" for p in problems[:limit]))
    for col in ("source", "message"):
        grid.add_column(col, overflow="fold")
    for p in problems[:limit]:
        grid.add_row(p.node or "-", p.source, p.message)
    console(out).print(grid)
    if len(problems) > limit:
        console(out).print(f"... and {len(problems) - limit} more (use -o json for all)")


def snapshot_table(snap: Snapshot, out: TextIO | None = None) -> None:
    """Domains per level with their node counts, then the problems."""
    con = console(out)
    con.print(f"{len(snap.nodes)} node(s) placed in {len(snap.levels)} level(s): "
              + " > ".join(f"{lv.name} ({lv.label})" for lv in snap.levels))
    grid = table()
    grid.add_column("level")
    grid.add_column("domains", justify="right")
    grid.add_column("nodes per domain (min / max)", justify="right")
    for lv in snap.levels:
        sizes = Counter(values[lv.name] for values in snap.nodes.values())
        span = f"{min(sizes.values())} / {max(sizes.values())}" if sizes else "-"
        grid.add_row(lv.name, str(len(sizes)), span)
    con.print(grid)
    problems_table(snap.problems, out)


def plan_table(plan: Plan, out: TextIO | None = None, limit: int = 50) -> None:
    con = console(out)
    con.print(f"{len(plan.changes)} node(s) to change ({plan.disruptive} rewriting or removing labels), "
              f"{plan.unchanged} unchanged")
    if plan.changes:
        grid = table()
        name_column(grid, "node", (c.node for c in plan.changes[:limit]))
        for col in ("set", "remove"):
            grid.add_column(col, overflow="fold")
        for change in plan.changes[:limit]:
            grid.add_row(change.node, "\n".join(f"{k}={v}" for k, v in change.set.items()) or "-",
                         "\n".join(change.remove) or "-")
        con.print(grid)
        if len(plan.changes) > limit:
            con.print(f"... and {len(plan.changes) - limit} more (use -o json for all)")
    problems_table(plan.problems, out)
