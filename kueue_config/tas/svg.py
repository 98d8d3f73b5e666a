"""The topology as one static SVG: per flavor, a row per top-level domain, a cell per node coloured by use.

A cell's colour runs from green (all of the resource free) through yellow to red (none free); grey cells
have none of it. Cells of one second-level domain sit together, gaps between. The cell size shrinks with
the node count so a flavor's rows stay within `MAX_HEIGHT` pixels (10,000 nodes at 9 px); below `MIN_CELL`
pixels a cell stands for a whole domain of the level above instead, and the picture says so. `--job` outlines the cells where `fit`
places that job and writes the pod counts. Every cell and row has a <title> (hover text) with full
names and numbers. Plain markup, escaped with the standard library: no scripts, no external files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence
from xml.sax.saxutils import escape

from .render_tree import DomainView, FlavorView, marks_text, node_span, short_level

WIDTH = 1280
MARGIN = 16
LABEL_W = 250
MAX_CELL, MIN_CELL = 28, 6
MAX_HEIGHT = 4000  # pixels the rows of one flavor may take before cells shrink, then aggregate
ROW_PAD = 10
LABEL_H = 46  # three lines of row label: name, numbers, node names
COMPACT_ROWS = 40  # more rows than this: one label line each
CHAR_W = 6.2  # average width of an 11 px glyph, to cut a label that would run into the cells
GREEN, YELLOW, RED, GREY, JOB = (26, 152, 80), (254, 224, 139), (215, 48, 39), "#bdbdbd", "#1f3fbf"


def colour(used_share: float) -> str:
    """Green (free) through yellow to red (full)."""
    share = min(max(used_share, 0.0), 1.0)
    a, b, t = (GREEN, YELLOW, share * 2) if share <= 0.5 else (YELLOW, RED, share * 2 - 1)
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(a, b))


def _fill(view: DomainView) -> str:
    return colour(view.used_share) if view.total else GREY


@dataclass
class _Unit:
    """What one cell stands for: a node (a leaf) or, aggregated, a whole domain; and its group in the row."""

    view: DomainView
    group: int
    path: str


def _units(top: DomainView, unit_depth: int, keys: Sequence[str]) -> list[_Unit]:
    """The cells of one row: domains `unit_depth` levels below the top, grouped by their second-level domain."""
    out: list[_Unit] = []

    def walk(view: DomainView, depth: int, group: int, path: str) -> None:
        here = f"{path} / {short_level(view.level)} {view.value}" if path else f"{short_level(view.level)} {view.value}"
        if depth == unit_depth or not view.children:
            out.append(_Unit(view, group, here))
            return
        for i, child in enumerate(view.children):
            walk(child, depth + 1, i if depth == 0 else group, here)

    walk(top, 0, 0, "")
    return out


def _lines(groups: Sequence[int], size: int) -> int:
    """Lines of cells a row of this many cells per group takes at this cell size (the layout `_row` draws)."""
    step, gap, room = size + 2, max(3, size // 2), WIDTH - 2 * MARGIN - LABEL_W
    x, lines = 0, 1
    for g, count in enumerate(groups):
        x += gap if g else 0
        for _ in range(count):
            if x + size > room:
                x, lines = 0, lines + 1
            x += step
    return lines


def _label_height(rows: int) -> int:
    """Three label lines (name, numbers, node names) per row; one when there are many rows."""
    return LABEL_H if rows <= COMPACT_ROWS else 16


def _height(rows: Sequence[Sequence[int]], size: int) -> int:
    label = _label_height(len(rows))
    return sum(max(_lines(r, size) * (size + 2), label) + ROW_PAD for r in rows)


@dataclass
class _Layout:
    """How one flavor is drawn: cells `depth` levels below the rows, `size` pixels, label lines, a caption."""

    depth: int
    size: int
    label: int
    caption: str = ""


def _layout(fv: FlavorView, keys: Sequence[str]) -> _Layout:
    """Cells as large as `MAX_CELL` allows while the rows stay within the height budget; a level up when even
    `MIN_CELL` does not fit. The budget is `MAX_HEIGHT`, or a quarter more than the row labels need."""
    for depth in range(len(keys) - 1, -1, -1):
        rows = []
        for top in fv.domains:
            units = _units(top, depth, keys)
            rows.append([sum(1 for u in units if u.group == g) for g in sorted({u.group for u in units})])
        budget = max(MAX_HEIGHT, 1.25 * len(rows) * (_label_height(len(rows)) + ROW_PAD))
        size = next((s for s in range(MAX_CELL, MIN_CELL - 1, -1) if _height(rows, s) <= budget), 0)
        if size or depth == 0:
            break
    layout = _Layout(depth, size or MIN_CELL, _label_height(len(fv.domains)))
    if depth < len(keys) - 1:
        layout.caption = (f"each cell is one {short_level(keys[depth])} ({sum(map(sum, rows))} cells for "
                          f"{fv.totals[0]} nodes): one cell per node would be smaller than {MIN_CELL} px")
    return layout


def _fit(text: str, width: float) -> str:
    room = int((width - 8) / CHAR_W)
    return text if len(text) <= room else text[: room - 1] + "…"


def _cell(x: float, y: float, size: int, unit: _Unit, resource: str) -> Iterator[str]:
    v = unit.view
    hover = f"{unit.path}: {v.free}/{v.total} {short_level(resource)} free, {v.nodes} node(s)"
    if v.nodes <= 3:
        hover += f" ({', '.join(v.node_names)})"
    if v.placed:
        hover += f"; the job: {v.placed} pod(s)"
    hover += marks_text(v).replace("  ", "; ", 1)
    stroke = f' stroke="{JOB}" stroke-width="3"' if v.placed else ' stroke="#ffffff" stroke-width="1"'
    yield (f'<rect x="{x:.1f}" y="{y:.1f}" width="{size}" height="{size}" fill="{_fill(v)}"{stroke}>'
           f"<title>{escape(hover)}</title></rect>")
    if v.placed and size >= 14:
        yield (f'<text x="{x + size / 2:.1f}" y="{y + size / 2 + 4:.1f}" class="pods" text-anchor="middle">'
               f"{v.placed}</text>")


def _row(fv: FlavorView, top: DomainView, y: float, layout: _Layout) -> tuple[list[str], float]:
    """One top-level domain: its label on the left, its cells wrapped in the grid; returns the markup and height."""
    size = layout.size
    step, gap = size + 2, max(3, size // 2)
    x0, x_max = MARGIN + LABEL_W, WIDTH - MARGIN
    x, line = x0, 0
    parts: list[str] = []
    units = _units(top, layout.depth, fv.keys)
    last_group = units[0].group if units else 0
    for unit in units:
        if unit.group != last_group:
            x += gap
            last_group = unit.group
        if x + size > x_max:
            x, line = x0, line + 1
        parts += _cell(x, y + line * step, size, unit, fv.resource)
        x += step
    height = max((line + 1) * step, layout.label) + ROW_PAD
    label = f"{short_level(top.level)} {top.name}"
    numbers = f"{top.free}/{top.total} free · {top.nodes} node(s)"
    if top.placed:
        numbers += f" · job: {top.placed} pod(s)"
    hover = (f"{short_level(top.level)} {top.value}: {top.free}/{top.total} {short_level(fv.resource)} free, "
             f"{top.nodes} node(s): {node_span(top.node_names)}{marks_text(top).replace('  ', '; ', 1)}")
    head = [f"<g><title>{escape(hover)}</title>"]
    if layout.label == LABEL_H:
        head += [f'<text x="{MARGIN}" y="{y + 12:.1f}" class="name">{escape(label)}</text>',
                 f'<text x="{MARGIN}" y="{y + 27:.1f}" class="num">{escape(numbers)}</text>',
                 f'<text x="{MARGIN}" y="{y + 41:.1f}" class="num">{escape(_fit(node_span(top.node_names), LABEL_W))}'
                 "</text>"]
    else:
        short = f"{top.name} · {top.free}/{top.total} free · {top.nodes} nodes"  # the level is in the header
        if top.placed:
            short = f"{top.name} · job: {top.placed} pod(s) · {top.free}/{top.total} free"
        head.append(f'<text x="{MARGIN}" y="{y + 11:.1f}" class="num">{escape(_fit(short, LABEL_W))}</text>')
    return [*head, "</g>", *parts], height


def _legend(y: float, resource: str, job: bool) -> list[str]:
    unit = escape(short_level(resource))
    x = MARGIN
    parts = [f'<text x="{x}" y="{y + 12}" class="num">{unit} free</text>']
    x += 70
    for i in range(11):
        parts.append(f'<rect x="{x + i * 14}" y="{y}" width="14" height="16" fill="{colour(i / 10)}"/>')
    x += 11 * 14 + 8
    parts.append(f'<text x="{x}" y="{y + 12}" class="num">full</text>')
    x += 50
    parts += [f'<rect x="{x}" y="{y}" width="16" height="16" fill="{GREY}"/>',
              f'<text x="{x + 22}" y="{y + 12}" class="num">no {unit}</text>']
    if job:
        x += 110
        parts += [f'<rect x="{x}" y="{y}" width="16" height="16" fill="#ffffff" stroke="{JOB}" stroke-width="3"/>',
                  f'<text x="{x + 22}" y="{y + 12}" class="num">where the job goes (pods)</text>']
    return parts


def render_svg(flavors: Sequence[FlavorView], title: str, resource: str, job_line: str = "") -> str:
    """A standalone SVG document for the flavors' views (from `render_tree.flavor_view`)."""
    body: list[str] = []
    y = 76.0 + (20 if job_line else 0)
    for fv in flavors:
        nodes, free, total = fv.totals
        layout = _layout(fv, fv.keys)
        header = (f"flavor {fv.flavor} · Topology {fv.topology} · {nodes} node(s) · {free}/{total} "
                  f"{short_level(resource)} free · rows: {short_level(fv.keys[0])}")
        body.append(f'<text x="{MARGIN}" y="{y + 16:.1f}" class="flv">{escape(header)}</text>')
        y += 24
        if layout.caption:
            body.append(f'<text x="{MARGIN}" y="{y + 12:.1f}" class="num">{escape(layout.caption)}</text>')
            y += 18
        if not fv.domains:
            body.append(f'<text x="{MARGIN}" y="{y + 12:.1f}" class="num">no node of this flavor is counted</text>')
            y += 20
        for top in fv.domains:
            parts, height = _row(fv, top, y + 4, layout)
            body += parts
            y += height
        y += 16
    height = int(y + MARGIN)
    head = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
        'font-family="DejaVu Sans, Arial, sans-serif">',
        "<style>.ttl{font-size:18px;fill:#263238;font-weight:bold}.flv{font-size:14px;fill:#263238;font-weight:bold}"
        ".name{font-size:12px;fill:#263238;font-weight:bold}.num{font-size:11px;fill:#455a64}"
        ".pods{font-size:11px;fill:#ffffff;font-weight:bold}</style>",
        f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>',
        f'<text x="{MARGIN}" y="28" class="ttl">{escape(title)}</text>',
    ]
    if job_line:
        head.append(f'<text x="{MARGIN}" y="70" class="name">{escape(job_line)}</text>')
    head += _legend(40, resource, bool(job_line))
    return "\n".join([*head, *body, "</svg>"]) + "\n"
