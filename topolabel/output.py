"""Printing results: JSON and YAML for tools, plain tables and diff-style lines for people.

Tables are laid out by `tables` (kubectl's look, 80 columns without a broken token); `-o wide` shows every
column and value whole, `--no-headers` drops the header line, `-o name` prints `kind/name` lines as kubectl
does. PyYAML and orjson are imported by the functions that print with them."""

from __future__ import annotations

import argparse
import errno
import functools
import os
import sys
from collections import Counter
from itertools import islice
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence, TextIO

from labeler.topology.model import Problem, Snapshot

from .tables import MIN_ELIDED, Column, View, elide, render, terminal_width, wrap

if TYPE_CHECKING:
    from rich.console import Console

    from labeler.topology.plan import NodeChange, Plan

FORMATS = ("table", "wide", "json", "yaml")
NAMES = "name"
MAX_MESSAGE = 2000
JSON_SLICE = 5000  # list items per orjson call when writing compact JSON
LIMIT = 50  # rows a table shows before "... and N more"; -o wide shows them all


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


def view_of(args: argparse.Namespace) -> View:
    """The table view a command line asked for (`-o wide`, `--no-headers`), as wide as the terminal."""
    return View(wide=getattr(args, "output", None) == "wide", headers=not getattr(args, "no_headers", False),
                width=terminal_width())


def for_people(args: argparse.Namespace) -> bool:
    """True when the command prints a table (`-o table` or `-o wide`), not data or names."""
    return getattr(args, "output", "table") in ("table", "wide")


def say(lines: Iterable[str], out: TextIO | None = None) -> None:
    (out or sys.stdout).write("".join(f"{line}\n" for line in lines))


def headline(text: str, view: View) -> list[str]:
    """A sentence above a table, wrapped at spaces to the terminal's width (never in a token)."""
    return [text] if view.wide else wrap(text, view.width)


def title(text: str, view: View) -> list[str]:
    """A table's title line (a count, a summary): dropped with --no-headers, like the header line."""
    return headline(text, view) if view.headers else []


def names(kind: str, items: Iterable[str], out: TextIO | None = None) -> None:
    """`-o name`: one `kind/name` line per item, as `kubectl get -o name` prints them."""
    say((f"{kind}/{item}" for item in items), out)


def emit(data: Any, fmt: str, out: TextIO | None = None) -> None:
    """Write `data`, plain data in which the items of a list at the top or under a top-level key may be objects
    that say how they print (`to_dict`): into a pipe or file as JSON they become mappings a slice at a time, so
    a 1,000,000-node plan never holds a million of them at once."""
    out = out or sys.stdout
    if fmt == "json":
        # Indented for a person at a terminal; compact into a pipe or file, a slice at a time. orjson writes a
        # 100,000-node plan in a fifth of json's time, without json's list of small pieces (30 MB at that size).
        import orjson

        pieces = [_json(_plain(data), orjson.OPT_INDENT_2)] if out.isatty() else _json_pieces(data)
        if hasattr(out, "buffer"):
            out.flush()
            out.buffer.writelines(pieces)
            out.buffer.write(b"\n")
        else:
            out.write(b"".join(pieces).decode() + "\n")
    else:
        from labeler.io.documents import dump_yaml

        out.write(dump_yaml(_plain(data)))


def _plain(data: Any) -> Any:
    """`data` with the items `emit` takes as objects turned into their mappings."""
    if isinstance(data, dict):
        return {key: _items(value) if isinstance(value, list) else value for key, value in data.items()}
    return _items(data) if isinstance(data, list) else data


def _items(items: list[Any]) -> list[Any]:
    """A list's items, those that say how they print (`to_dict`) as their mappings."""
    return [item.to_dict() if hasattr(item, "to_dict") else item for item in items]


def _json_pieces(data: Any) -> Iterator[bytes]:
    """`data` as compact JSON, byte for byte what one orjson call writes, in pieces: a list or mapping at the
    top or as a value of the top mapping goes JSON_SLICE items at a time (a 100,000-node plan is never one 22 MB
    buffer, a 1,000,000-node snapshot never one of 90 MB)."""
    if isinstance(data, dict):
        yield b"{"
        for i, (key, value) in enumerate(data.items()):
            yield (b"," if i else b"") + _json({key: 0})[1:-2]  # '"key":'
            yield from _sliced(value) if isinstance(value, (list, dict)) else [_json(value)]
        yield b"}"
    else:
        yield from _sliced(data) if isinstance(data, list) else [_json(data)]


def _sliced(items: list[Any] | dict[Any, Any]) -> Iterator[bytes]:
    """A list or mapping JSON_SLICE items at a time, each slice's brackets dropped."""
    is_list = isinstance(items, list)
    rest = iter(items) if isinstance(items, list) else iter(items.items())
    yield b"[" if is_list else b"{"
    first = True
    while part := list(islice(rest, JSON_SLICE)):
        yield (b"" if first else b",") + _json(_items(part) if is_list else dict(part))[1:-1]
        first = False
    yield b"]" if is_list else b"}"


def _json(data: Any, option: int = 0) -> bytes:
    """JSON by orjson; mapping keys that are not strings are written as strings (as json writes them)."""
    import orjson

    return orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS | option)


def console(out: TextIO | None = None) -> Console:
    """A rich console on `out` (stdout when None, looked up now so redirection works), for prose with colour;
    as wide as the terminal ($COLUMNS, else 80 columns when not a terminal)."""
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


def shown(items: Sequence[Any], view: View, limit: int = LIMIT) -> tuple[Sequence[Any], list[str]]:
    """The items a table shows (all with -o wide), and the line that says how many more there are."""
    if view.wide or len(items) <= limit:
        return items, []
    return items[:limit], [f"... and {len(items) - limit} more (-o wide or -o json for all)"]


def problems_table(problems: Iterable[Problem], out: TextIO | None = None, view: View | None = None) -> None:
    problems = list(problems)
    if not problems:
        return
    view = view or View(width=terminal_width())
    rows, more = shown(problems, view)
    say([*title(f"{len(problems)} problem(s):", view),
         *render([Column("NODE", "name"), Column("SOURCE"), Column("MESSAGE", "prose")],
                 [(p.node or "-", p.source, p.message) for p in rows], view), *more], out)


def snapshot_table(snap: Snapshot, view: View, out: TextIO | None = None) -> None:
    """Domains per level with their node counts, then the problems."""
    lines = title(f"{len(snap.nodes)} node(s) placed in {len(snap.levels)} level(s), coarsest first:", view)
    rows = []
    for lv in snap.levels:
        sizes = Counter(values[lv.name] for values in snap.nodes.values())
        span = f"{min(sizes.values())} / {max(sizes.values())}" if sizes else "-"
        rows.append((lv.name, lv.label, str(len(sizes)), span))
    say([*lines, *render([Column("LEVEL", "name"), Column("LABEL", "name"), Column("DOMAINS", right=True),
                          Column("NODES PER DOMAIN (MIN / MAX)", right=True)], rows, view)], out)
    problems_table(snap.problems, out, view)


def key_prefix(changes: Sequence[NodeChange]) -> str:
    """The `prefix/` every changed key shares (`topolabel.dev/`), or ""."""
    keys = {k for c in changes for k in (*c.set, *c.remove)}
    if not keys:
        return ""
    prefix = os.path.commonprefix(sorted(keys)[::len(keys) - 1] if len(keys) > 1 else [*keys])
    return prefix[:prefix.rfind("/") + 1]


def change_items(change: NodeChange, prefix: str) -> list[tuple[str, str]]:
    """A change as diff items: (`+key=`, value) for each label set, (`-key`, "") for each removed."""
    cut = len(prefix)
    return [*((f"+{k[cut:]}=", v) for k, v in sorted(change.set.items())), *((f"-{k[cut:]}", "") for k in change.remove)]


def diff_lines(name: str, items: list[tuple[str, str]], view: View, name_width: int) -> list[str]:
    """`NODE  +key=value +key=value -key`: on one line when the values, shortened in the middle to no less
    than MIN_ELIDED characters each, let it fit; else the items wrap under the first, each whole."""
    if view.wide:
        return [" ".join([name.ljust(name_width), *(k + v for k, v in items)]).rstrip()]
    indent = name_width + 2 if name_width + 2 + 30 <= view.width and len(name) <= name_width else 4
    room = view.width - indent
    per = _value_width(items, room)
    if per is not None:
        return _placed(name, [" ".join(k + elide(v, per) for k, v in items)], indent, name_width)
    lines: list[str] = []
    for key, value in items:
        item = key + elide(value, max(room - len(key), MIN_ELIDED))
        if lines and len(lines[-1]) + 1 + len(item) <= room:
            lines[-1] += " " + item
        else:
            lines.append(item)
    return _placed(name, lines, indent, name_width)


def _value_width(items: list[tuple[str, str]], room: int) -> int | None:
    """The widest value width (at least MIN_ELIDED) at which all items fit on one line of `room`; None when
    none does."""
    fixed = sum(len(k) for k, _ in items) + len(items) - 1
    longest = max((len(v) for _, v in items), default=0)
    for per in range(longest, MIN_ELIDED - 1, -1):
        if fixed + sum(min(len(v), per) for _, v in items) <= room:
            return per
    return longest if fixed + sum(len(v) for _, v in items) <= room else None


def _placed(name: str, lines: list[str], indent: int, name_width: int) -> list[str]:
    if indent == name_width + 2:
        return [f"{name.ljust(name_width)}  {lines[0]}", *(" " * indent + line for line in lines[1:])]
    return [name, *(" " * indent + line for line in lines)]


def plan_table(plan: Plan, view: View, out: TextIO | None = None) -> None:
    """The plan as diff lines, a node a line (`+key=value` set, `-key` removed), then the problems."""
    prefix = "" if view.wide else key_prefix(plan.changes)
    under = f"; keys under {prefix}" if prefix else ""
    head = (f"{len(plan.changes)} node(s) to change ({plan.disruptive} rewriting or removing labels), "
            f"{plan.unchanged} unchanged{under}" + (":" if plan.changes else ""))
    changes, more = shown(plan.changes, view)
    width = min(max((len(c.node) for c in changes), default=0), 40)
    lines = [line for c in changes for line in diff_lines(c.node, change_items(c, prefix), view, width)]
    say([*title(head, view), *lines, *more], out)
    problems_table(plan.problems, out, view)
