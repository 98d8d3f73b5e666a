"""The topology as one static SVG: per flavor, every level as nested, spaced boxes, and a cell per node
coloured by use.

A domain is a box holding the boxes of its children, laid out in a grid whose column count keeps the
children's boxes about `ASPECT` times as wide as high. The coarsest levels carry a label (name, free
nodes, free/total accelerators); a level gets one while it has at most `MAX_LABELS` domains and its boxes
are wide enough to read (at 10,000 nodes: the two coarsest), and finer levels are unlabelled bands, still
spaced apart so their grouping shows. Inside the finest box drawn (`depth` levels: the default, or
`show --level`) each node is a cell from green (all of the resource free) through yellow to red (none);
grey cells have none of it. Cells are as large as `MAX_HEIGHT` allows; below `MIN_CELL` pixels the finest
boxes are filled with their domain's colour instead, and the picture says so. `--job` outlines the cells
where `fit` places the job. Every box and cell has a <title> (hover text) with full names and numbers;
headlines wrap and labels are shortened to their box, so no text leaves the canvas. Plain markup, escaped
with the standard library: no scripts, no external files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence
from xml.sax.saxutils import escape

from labeler.display import ELLIPSIS, elide

from .render_tree import DomainView, FlavorView, marks_text, node_span, short_level

WIDTH = 1280
MARGIN = 16
MAX_CELL, MIN_CELL, CELL_GAP = 16, 5, 2
MAX_HEIGHT = 8000  # pixels one flavor's boxes may take before cells shrink, then give way to filled boxes
MAX_LABELS = 1000  # a level with more domains than this is drawn as bands, without names
NAMED_W = 96  # a labelled box is at least this wide (a short name and its numbers)
LABEL_H = 30  # two label lines: name, numbers
PAD = {True: 5, False: 3}  # inside a labelled box, inside a band
GAP = {True: 10, False: 4}  # between labelled boxes, between bands
ASPECT = 2.5
FILLED_H = 12  # the finest box's colour bar when cells would be too small
FONTS = {"ttl": (18, True), "flv": (14, True), "name": (12, True), "num": (11, False), "pods": (10, True)}
GREEN, YELLOW, RED, GREY, JOB = (26, 152, 80), (254, 224, 139), (215, 48, 39), "#bdbdbd", "#1f3fbf"
BOX_FILL, BAND_FILL, BOX_STROKE = "#f4f6f8", "#e6eaee", "#90a4ae"


def colour(used_share: float) -> str:
    """Green (free) through yellow to red (full)."""
    share = min(max(used_share, 0.0), 1.0)
    a, b, t = (GREEN, YELLOW, share * 2) if share <= 0.5 else (YELLOW, RED, share * 2 - 1)
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(a, b))


def _fill(view: DomainView) -> str:
    return colour(view.used_share) if view.total else GREY


def text_width(text: str, cls: str) -> float:
    """A generous estimate of the drawn width (DejaVu Sans' digits are 0.64 em, bold a little more)."""
    size, bold = FONTS[cls]
    return len(text) * size * (0.68 if bold else 0.62)


def fit_text(text: str, cls: str, width: float) -> str:
    """`text` shortened in the middle to fit `width` pixels."""
    size, bold = FONTS[cls]
    room = int(width / (size * (0.68 if bold else 0.62)))
    return elide(text, max(room, 0)) if text_width(text, cls) > width else text


def wrap_text(text: str, cls: str, width: float) -> list[str]:
    """`text` in lines that fit `width` pixels, broken at spaces (a word too long for a line is shortened)."""
    lines: list[str] = []
    for word in text.split():
        if lines and text_width(f"{lines[-1]} {word}", cls) <= width:
            lines[-1] += f" {word}"
        else:
            lines.append(fit_text(word, cls, width))
    return lines or [""]


@dataclass
class Style:
    """How one flavor is drawn: boxes for `depth` levels, the `named` coarsest labelled, cells of `cell` px
    (0: the finest boxes filled with their colour instead)."""

    depth: int
    named: int
    cell: int
    memo: dict[tuple[int, int, int], float] = field(default_factory=dict)


def _leaves(view: DomainView) -> list[DomainView]:
    """The cells of a box: the leaf domains under it (a node each where the Topology ends at hostname)."""
    if not view.children:
        return [view]
    return [leaf for child in view.children for leaf in _leaves(child)]


def _cells_height(count: int, inner: float, cell: int) -> float:
    if cell == 0:
        return FILLED_H
    per_line = max(1, int((inner + CELL_GAP) // (cell + CELL_GAP)))
    return math.ceil(count / per_line) * (cell + CELL_GAP) - CELL_GAP


def _named(level: int, width: float, style: Style) -> bool:
    return level < style.named and width >= NAMED_W


def _columns(view: DomainView, level: int, inner: float, style: Style) -> int:
    """Columns for the children's boxes: their boxes closest to ASPECT (as wide as high), each wide enough
    for a label where their level is labelled and for one cell."""
    children = view.children
    rep = max(children, key=lambda c: len(_leaves(c)))
    best, best_score = 1, math.inf
    for k in range(1, len(children) + 1):
        gap = GAP[level + 1 < style.named]
        width = (inner - gap * (k - 1)) / k
        if width < (NAMED_W if level + 1 < style.named else max(style.cell, 4) + 2 * PAD[False]):
            break
        height = measure(rep, level + 1, width, style)
        score = abs(math.log(width / height / ASPECT))
        if score < best_score:
            best, best_score = k, score
    return best


def measure(view: DomainView, level: int, width: float, style: Style) -> float:
    """The height of `view`'s box at `width` pixels."""
    key = (id(view), level, int(width))
    if key not in style.memo:
        style.memo[key] = _measure(view, level, width, style)
    return style.memo[key]


def _frame(level: int, width: float, style: Style) -> tuple[bool, int, int]:
    """A box's label (named or a band), its padding, and the height its label takes. Level -1 is the
    flavor itself: no box, only its children's."""
    if level < 0:
        return False, 0, 0
    named = _named(level, width, style)
    return named, PAD[named], LABEL_H if named else 0


def _measure(view: DomainView, level: int, width: float, style: Style) -> float:
    _, pad, top = _frame(level, width, style)
    inner = width - 2 * pad
    if level + 1 >= style.depth or not view.children:
        return top + 2 * pad + _cells_height(len(_leaves(view)), inner, style.cell)
    rows = _rows(view, level, inner, style)
    gap = GAP[level + 1 < style.named]
    return top + 2 * pad + sum(h for _, h in rows) + gap * (len(rows) - 1)


def _rows(view: DomainView, level: int, inner: float, style: Style) -> list[tuple[list[DomainView], float]]:
    """The children in rows of the chosen column count, each row with its height."""
    k = _columns(view, level, inner, style)
    width = _child_width(inner, k, level, style)
    rows = [view.children[i:i + k] for i in range(0, len(view.children), k)]
    return [(row, max(measure(c, level + 1, width, style) for c in row)) for row in rows]


def _child_width(inner: float, k: int, level: int, style: Style) -> float:
    return (inner - GAP[level + 1 < style.named] * (k - 1)) / k


def _hover(view: DomainView, path: str, resource: str) -> str:
    text = f"{path}: {view.free}/{view.total} {short_level(resource)} free, {view.idle}/{view.nodes} nodes free"
    text += f" ({', '.join(view.node_names)})" if view.nodes <= 3 else f": {node_span(view.node_names)}"
    text += marks_text(view).replace("  ", "; ", 1)
    return text + (f"; the job: {view.placed} pod(s)" if view.placed else "")


def _within(name: str, parent: str) -> str:
    """A name inside its parent's box: a node-prefix name (`gke-a4-b01-s00-*`) without the prefix its
    parent's name already says (`…s00-*` inside `gke-a4-b01-*`)."""
    stem = parent.removesuffix("*")
    if parent.endswith("*") and name.endswith("*") and name.startswith(stem) and len(name) > len(stem) + 1:
        return ELLIPSIS + name[len(stem):]
    return name


def _numbers(view: DomainView, unit: str, room: float) -> str:
    """The label's second line, as much of it as fits: free nodes, free accelerators, the job's pods."""
    full = f"{view.idle}/{view.nodes} nodes free · {view.free}/{view.total} {unit} free"
    if view.placed:
        full += f" · job: {view.placed} pod(s)"
    for text in (full, f"{view.idle}/{view.nodes} nodes free", f"{view.idle}/{view.nodes}"):
        if text_width(text, "num") <= room:
            return text
    return ""


class Canvas:
    """The markup of one picture, drawn top to bottom."""

    def __init__(self, resource: str) -> None:
        self.parts: list[str] = []
        self.resource = resource
        self.unit = short_level(resource)

    def text(self, x: float, y: float, text: str, cls: str, anchor: str = "") -> None:
        extra = f' text-anchor="{anchor}"' if anchor else ""
        self.parts.append(f'<text x="{x:.1f}" y="{y:.1f}" class="{cls}"{extra}>{escape(text)}</text>')

    def lines(self, x: float, y: float, text: str, cls: str, width: float) -> float:
        """A headline wrapped to `width`; returns the height it took."""
        size = FONTS[cls][0]
        wrapped = wrap_text(text, cls, width)
        for i, line in enumerate(wrapped):
            self.text(x, y + size + i * (size + 4), line, cls)
        return len(wrapped) * (size + 4)

    def box(self, view: DomainView, level: int, x: float, y: float, width: float, style: Style, path: str,
            parent: str = "") -> float:
        """`view`'s box at (x, y), its label, its children's boxes or its cells; returns its height."""
        height = measure(view, level, width, style)
        named = _named(level, width, style)
        here = f"{path} / {short_level(view.level)} {view.value}" if path else f"{short_level(view.level)} {view.value}"
        fill, stroke = (BOX_FILL, f' stroke="{BOX_STROKE}" stroke-width="1"') if named else (BAND_FILL, "")
        if view.placed:
            stroke = f' stroke="{JOB}" stroke-width="2"'
        self.parts.append(f'<g><title>{escape(_hover(view, here, self.resource))}</title>'
                          f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}" rx="3" '
                          f'fill="{fill}"{stroke}/></g>')
        pad = PAD[named]
        top = y + pad
        if named:
            room = width - 2 * pad
            self.text(x + pad, top + 12, fit_text(f"{short_level(view.level)} {_within(view.name, parent)}", "name",
                                                  room), "name")
            self.text(x + pad, top + 26, _numbers(view, self.unit, room), "num")
            top += LABEL_H
        inner = width - 2 * pad
        if level + 1 >= style.depth or not view.children:
            self.cells(view, x + pad, top, inner, style, here)
        else:
            self.children(view, level, x + pad, top, inner, style, here, view.name)
        return height

    def children(self, view: DomainView, level: int, x: float, y: float, inner: float, style: Style,
                 path: str, parent: str = "") -> float:
        """The boxes of `view`'s children in rows within `inner` pixels; returns the height they took."""
        gap = GAP[level + 1 < style.named]
        k = _columns(view, level, inner, style)
        child = _child_width(inner, k, level, style)
        top = y
        for row, row_height in _rows(view, level, inner, style):
            for i, c in enumerate(row):
                self.box(c, level + 1, x + i * (child + gap), top, child, style, path, parent)
            top += row_height + gap
        return top - gap - y

    def cells(self, view: DomainView, x: float, y: float, inner: float, style: Style, path: str) -> None:
        if style.cell == 0:
            self.parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{inner:.1f}" height="{FILLED_H}" '
                              f'fill="{_fill(view)}"/>')
            return
        size, step = style.cell, style.cell + CELL_GAP
        per_line = max(1, int((inner + CELL_GAP) // step))
        for i, leaf in enumerate(_leaves(view)):
            cx, cy = x + (i % per_line) * step, y + (i // per_line) * step
            where = path if leaf is view else f"{path} / {short_level(leaf.level)} {leaf.value}"
            stroke = f' stroke="{JOB}" stroke-width="2"' if leaf.placed else ""
            self.parts.append(f'<rect x="{cx:.1f}" y="{cy:.1f}" width="{size}" height="{size}" fill="{_fill(leaf)}"'
                              f'{stroke}><title>{escape(_hover(leaf, where, self.resource))}</title></rect>')
            if leaf.placed and size >= 14:
                self.text(cx + size / 2, cy + size / 2 + 4, str(leaf.placed), "pods", "middle")

    def legend(self, y: float, job: bool, width: float) -> float:
        """The colour scale, grey, the job's outline, each item on the line while it fits; returns the height."""
        scale = 11 * 14
        items: list[tuple[float, str]] = [(text_width(f"{self.unit} free", "num") + 8 + scale + 8 +
                                           text_width("full", "num"), "scale"),
                                          (22 + text_width(f"no {self.unit}", "num"), "none")]
        if job:
            items.append((22 + text_width("where the job goes (pods)", "num"), "job"))
        x, top = float(MARGIN), y
        for size, item in items:
            if x > MARGIN and x + size > MARGIN + width:
                x, top = MARGIN, top + 24
            self._legend_item(item, x, top)
            x += size + 24
        return top + 24 - y

    def _legend_item(self, item: str, x: float, y: float) -> None:
        if item == "scale":
            self.text(x, y + 12, f"{self.unit} free", "num")
            x += text_width(f"{self.unit} free", "num") + 8
            for i in range(11):
                self.parts.append(f'<rect x="{x + i * 14:.1f}" y="{y}" width="14" height="16" '
                                  f'fill="{colour(i / 10)}"/>')
            self.text(x + 11 * 14 + 8, y + 12, "full", "num")
        elif item == "none":
            self.parts.append(f'<rect x="{x:.1f}" y="{y}" width="16" height="16" fill="{GREY}"/>')
            self.text(x + 22, y + 12, f"no {self.unit}", "num")
        else:
            self.parts.append(f'<rect x="{x:.1f}" y="{y}" width="16" height="16" fill="#ffffff" stroke="{JOB}" '
                              'stroke-width="2"/>')
            self.text(x + 22, y + 12, "where the job goes (pods)", "num")


def level_counts(fv: FlavorView) -> list[int]:
    """Domains per level, coarsest first."""
    counts = [0] * len(fv.keys)

    def walk(view: DomainView, level: int) -> None:
        counts[level] += 1
        for child in view.children:
            walk(child, level + 1)

    for view in fv.domains:
        walk(view, 0)
    return counts


def style_for(fv: FlavorView, width: float) -> Style:
    """The largest cells with which the flavor's boxes stay within MAX_HEIGHT (none: filled boxes)."""
    depth = max(1, min(fv.depth, len(fv.keys)))
    counts = level_counts(fv)[:depth]
    named = next((i for i, n in enumerate(counts) if n > MAX_LABELS), len(counts))
    for cell in [*range(MAX_CELL, MIN_CELL - 1, -1), 0]:
        style = Style(depth, named, cell)
        if cell == 0 or _flavor_height(fv, width, style) <= MAX_HEIGHT:
            return style
    raise AssertionError("unreachable: cell 0 always returns")


def _root(fv: FlavorView) -> DomainView:
    """The flavor as a domain above its top-level domains (level -1), to lay them out like any children."""
    nodes, free, total = fv.totals
    return DomainView("", "", nodes, free, total, children=list(fv.domains))


def _flavor_height(fv: FlavorView, width: float, style: Style) -> float:
    return measure(_root(fv), -1, width, style)


def caption(fv: FlavorView, style: Style) -> str:
    """What the boxes and cells are: the labelled levels, the bands, the cells."""
    levels = [short_level(k) for k in fv.keys[:style.depth]]
    named, bands = levels[:style.named], levels[style.named:]
    parts = [f"boxes: {' > '.join(named)} (named)"] if named else []
    if bands:
        parts.append(f"{' > '.join(bands)} (bands, hover for names)")
    if style.cell:
        finest = short_level(fv.keys[-1])
        parts.append(f"cells: one {finest} each" if len(fv.keys) > style.depth or finest == "hostname" else
                     "cells: the finest domains")
    else:
        parts.append(f"finest boxes coloured by their use (one cell per node would be smaller than {MIN_CELL} px)")
    return "; ".join(parts)


def render_svg(flavors: Sequence[FlavorView], title: str, resource: str, job_line: str = "",
               width: int = WIDTH) -> str:
    """A standalone SVG document for the flavors' views (from `render_tree.flavor_view`)."""
    canvas = Canvas(resource)
    room = width - 2 * MARGIN
    y = 8.0
    y += canvas.lines(MARGIN, y, title, "ttl", room) + 4
    if job_line:
        y += canvas.lines(MARGIN, y, job_line, "name", room) + 4
    y += canvas.legend(y, bool(job_line), room) + 8
    for fv in flavors:
        nodes, free, total = fv.totals
        y += canvas.lines(MARGIN, y, f"flavor {fv.flavor} · Topology {fv.topology} · {nodes} node(s) · "
                          f"{free}/{total} {short_level(resource)} free", "flv", room)
        if not fv.domains:
            y += canvas.lines(MARGIN, y, "no node of this flavor is counted", "num", room) + 12
            continue
        style = style_for(fv, room)
        y += canvas.lines(MARGIN, y, caption(fv, style), "num", room) + 6
        y += canvas.children(_root(fv), -1, MARGIN, y, room, style, "") + 16
    height = int(math.ceil(y + MARGIN))
    head = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'font-family="DejaVu Sans, Arial, sans-serif">',
        "<style>.ttl{font-size:18px;fill:#263238;font-weight:bold}.flv{font-size:14px;fill:#263238;font-weight:bold}"
        ".name{font-size:12px;fill:#263238;font-weight:bold}.num{font-size:11px;fill:#455a64}"
        ".pods{font-size:10px;fill:#ffffff;font-weight:bold}</style>",
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
    ]
    return "\n".join([*head, *canvas.parts, "</svg>"]) + "\n"

