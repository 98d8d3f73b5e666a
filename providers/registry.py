"""The one list of sources. Each is imported only when a command names it (or lists every flag)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from labeler.errors import SourceError

if TYPE_CHECKING:
    from .base import Source
    from .options import Options

# name -> module defining SOURCE
SOURCES: dict[str, str] = {
    "labels": "providers.labels",
    "inventory": "providers.inventory",
    "aws": "providers.aws",
    "gcp": "providers.gcp",
    "oci": "providers.oci",
    "nebius": "providers.nebius",
    "combined": "providers.combined",
    "lldp": "providers.lldp",
    "infiniband": "providers.infiniband",
    "ufm": "providers.infiniband.ufm",
}


def get_source(name: str) -> Source:
    """The source called `name`; an unknown name is an error listing the known ones."""
    if name not in SOURCES:
        raise SourceError(f"unknown source {name!r}; known: {', '.join(sorted(SOURCES))}")
    source: Source = importlib.import_module(SOURCES[name]).SOURCE
    return source


def option_models() -> dict[str, type[Options]]:
    """Each source's options model, by name: what the config's `source` section is checked against and
    what its JSON schema is made from."""
    return {name: get_source(name).options for name in sorted(SOURCES)}
