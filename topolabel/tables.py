"""Plain-text tables for a terminal, laid out as kubectl lays out `get`: upper-case headers, columns three
spaces apart, no boxes; and a token (a node name, a label value, a path) is never broken across lines.

Too wide for the terminal, a table first shortens its long values in the middle (`30e6…c2f1`, both ends
kept, since hashes and node names differ at either end), then wraps its prose columns at spaces; when even
that does not fit, each row is printed as a block, its first cell on a line and the others beneath it, one
`HEADER  value` line each. `-o wide` shows every column and every value whole, however wide.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Sequence

from labeler.display import elide

MIN_ELIDED = 9  # `30e6…c2f1`: four characters from each end still tell hashes and numbered names apart
MIN_PROSE = 24  # a prose column narrower than this reads worse than the block layout
GAP = "   "

Cell = str | Sequence[str]  # one line, or several (a list of domains)


@dataclass(frozen=True)
class Column:
    """A column: `kind` says how a too-long cell gives way. `value`: shortened in the middle (label values,
    domain names); `name`: kept whole (node and object names, what people search for); `prose`: wrapped at
    spaces. `wide` columns appear only with `-o wide`."""

    header: str
    kind: str = "value"
    right: bool = False
    wide: bool = False


@dataclass(frozen=True)
class View:
    """How a person asked to see tables: `-o wide`, `--no-headers`, and the terminal's width."""

    wide: bool = False
    headers: bool = True
    width: int = 80


def terminal_width(default: int = 80) -> int:
    """$COLUMNS, else the terminal's width, else 80 (a pipe or a file).

    shutil is imported here (with bz2 and lzma: 5M instructions of start-up), since a command
    whose output goes to a pipe or a file never asks."""
    import shutil

    return shutil.get_terminal_size((default, 24)).columns if os.environ.get("COLUMNS") or _tty() else default


def _tty() -> bool:
    try:
        return os.isatty(1)
    except (OSError, ValueError):
        return False


def wrap(text: str, width: int, first: int | None = None) -> list[str]:
    """`text` in lines of at most `width` characters (the first at most `first`), broken only at spaces; a
    word longer than a line is shortened in the middle rather than cut."""
    lines: list[str] = []
    line = ""
    room = width if first is None else first
    for word in text.split():
        if len(word) > room and not line:
            lines.append(elide(word, room))
            room = width
            continue
        if line and len(line) + 1 + len(word) > room:
            lines.append(line)
            line, room = "", width
            if len(word) > room:
                lines.append(elide(word, room))
                continue
        line = f"{line} {word}" if line else word
    if line or not lines:
        lines.append(line)
    return lines


def _lines(cell: Cell) -> list[str]:
    return [cell] if isinstance(cell, str) else list(cell) or [""]


def render(columns: Sequence[Column], rows: Iterable[Sequence[Cell]], view: View = View()) -> list[str]:
    """The table as lines no wider than `view.width` (any width with `view.wide`)."""
    shown = [i for i, c in enumerate(columns) if view.wide or not c.wide]
    cols = [columns[i] for i in shown]
    cells = [[_lines(row[i]) for i in shown] for row in rows]
    natural = [max([len(c.header) if view.headers else 0,
                    *(len(line) for row in cells for line in row[j])]) for j, c in enumerate(cols)]
    if view.wide:
        return _grid(cols, cells, natural, view.headers)
    widths = _fitted(cols, natural, view.width)
    if widths is None:
        return _blocks(cols, cells, view)
    return _grid(cols, [[_shape(c, lines, w) for c, lines, w in zip(cols, row, widths)] for row in cells],
                 widths, view.headers)


def _fitted(cols: Sequence[Column], natural: list[int], width: int) -> list[int] | None:
    """Column widths within `width`: value columns shortened (the widest first) down to MIN_ELIDED, then
    prose columns narrowed down to MIN_PROSE; None when the table cannot fit that way."""
    widths = list(natural)
    room = width - len(GAP) * (len(cols) - 1)
    for kind, floor in (("value", MIN_ELIDED), ("prose", MIN_PROSE)):
        while sum(widths) > room:
            movable = [j for j, c in enumerate(cols) if c.kind == kind and widths[j] > max(floor, len(c.header))]
            if not movable:
                break
            j = max(movable, key=lambda k: widths[k])
            widths[j] -= 1
    return widths if sum(widths) <= room else None


def _shape(col: Column, lines: list[str], width: int) -> list[str]:
    if col.kind == "prose":
        return [part for line in lines for part in wrap(line, width)]
    return [elide(line, width) for line in lines]


def _grid(cols: Sequence[Column], cells: list[list[list[str]]], widths: Sequence[int], headers: bool) -> list[str]:
    out = [_join(cols, [c.header for c in cols], widths)] if headers else []
    for row in cells:
        for k in range(max(len(lines) for lines in row)):
            out.append(_join(cols, [lines[k] if k < len(lines) else "" for lines in row], widths))
    return out


def _join(cols: Sequence[Column], texts: Sequence[str], widths: Sequence[int]) -> str:
    parts = [t.rjust(w) if c.right else t.ljust(w) for c, t, w in zip(cols, texts, widths)]
    return GAP.join(parts).rstrip()


def _blocks(cols: Sequence[Column], cells: list[list[list[str]]], view: View) -> list[str]:
    """Each row as a block: its first cell alone, then `HEADER  value` lines, values wrapped or shortened."""
    label = max(len(c.header) for c in cols[1:]) + 2
    room = max(view.width - 2 - label, MIN_ELIDED)
    out: list[str] = []
    for n, row in enumerate(cells):
        out += [""] if n else []
        out += [elide(line, view.width) for line in row[0]]
        for col, lines in zip(cols[1:], row[1:]):
            values = _shape(col, lines, room) if lines != [""] else ["-"]
            for k, value in enumerate(values):
                out.append(f"  {(col.header if k == 0 else '').ljust(label)}{value}".rstrip())
    return out
