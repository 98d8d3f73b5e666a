"""Topology sources. Each module turns one kind of evidence into a `labeler.placement.Discovery`.

A source module provides `OPTIONS` (a pydantic model of its options), `add_arguments(parser)` for
flags whose dest names are those options, and `discover(ctx: SourceContext) -> Discovery`. Register it in `SOURCES` below.
"""

from .base import SOURCES, SourceContext, SourceError, load_source

__all__ = ["SOURCES", "SourceContext", "SourceError", "load_source"]
