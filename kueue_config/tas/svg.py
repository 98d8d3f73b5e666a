"""The topology as an SVG icicle chart: one row per level, each domain as wide as its accelerators.

Plain markup: a box per domain, its free share filled green, its name and free/total written inside when
the box is wide enough to hold them. Escaped with the standard library; no dependency.
"""

from __future__ import annotations

from typing import Iterator, Sequence
from xml.sax.saxutils import escape

from .render_tree import DomainView, short_level, totals

WIDTH = 1200
MARGIN = 140
ROW = 54
TOP = 64
CHAR = 7.2  # average glyph width at 12px, to decide what fits


def _depth(views: Sequence[DomainView]) -> int:
    return 1 + max((_depth(v.children) for v in views if v.children), default=0) if views else 0


def _weight(view: DomainView) -> int:
    return view.total or view.nodes


def _fit(text: str, width: float) -> str:
    room = int((width - 8) / CHAR)
    if room < 3:
        return ""
    return text if len(text) <= room else text[: room - 1] + "…"


def _boxes(views: Sequence[DomainView], x: float, width: float, row: int) -> Iterator[str]:
    scale = sum(_weight(v) for v in views) or 1
    for view in views:
        w = width * _weight(view) / scale
        y = TOP + row * ROW
        share = view.free / view.total if view.total else 0
        colour = "#2e9d4f" if share >= 0.5 else "#d9a400" if share > 0 else "#c0392b"
        title = escape(f"{short_level(view.level)} {view.name}: {view.free}/{view.total} free, {view.nodes} node(s)")
        yield f'<g><title>{title}</title>'
        yield f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{ROW - 6}" fill="#eceff1" stroke="#607d8b"/>'
        if share > 0:
            yield (f'<rect x="{x:.1f}" y="{y + ROW - 18}" width="{w * share:.1f}" height="12" fill="{colour}" '
                   'opacity="0.85"/>')
        name, numbers = _fit(view.name, w), _fit(f"{view.free}/{view.total}", w)
        if name:
            yield f'<text x="{x + 4:.1f}" y="{y + 16}" class="name">{escape(name)}</text>'
        if numbers:
            yield f'<text x="{x + 4:.1f}" y="{y + 31}" class="num">{escape(numbers)}</text>'
        yield "</g>"
        yield from _boxes(view.children, x, w, row + 1)
        x += w


def render_svg(views: Sequence[DomainView], title: str, resource: str) -> str:
    """A standalone SVG document for `views` (from `render_tree.domain_views`)."""
    depth = max(_depth(views), 1)
    height = TOP + depth * ROW + 24
    nodes, free, total = totals(views)
    levels: list[str] = []
    row: Sequence[DomainView] = views
    while row:
        levels.append(short_level(row[0].level))
        row = [c for v in row for c in v.children]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="DejaVu Sans, Arial, sans-serif">',
        "<style>.name{font-size:12px;fill:#263238}.num{font-size:11px;fill:#455a64}"
        ".lvl{font-size:12px;fill:#37474f;font-weight:bold}.ttl{font-size:16px;fill:#263238}</style>",
        f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>',
        f'<text x="12" y="26" class="ttl">{escape(title)}</text>',
        f'<text x="12" y="46" class="num">{nodes} node(s), {free}/{total} {escape(short_level(resource))} free '
        "(green bar: free share; box width: total)</text>",
    ]
    parts += [f'<text x="12" y="{TOP + i * ROW + 28}" class="lvl">{escape(name)}</text>'
              for i, name in enumerate(levels)]
    parts += list(_boxes(views, MARGIN, WIDTH - MARGIN - 12, 0))
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
