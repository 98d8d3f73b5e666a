"""The one list of outputs; `topolabel export` loops over it."""

from __future__ import annotations

import importlib

from .base import Exporter

# name -> module defining EXPORTER, in the order `topolabel export --help` lists them
EXPORTERS: dict[str, str] = {
    "slurm": "exporters.slurm",
    "volcano": "exporters.volcano",
    "kai": "exporters.kai",
    "nfd": "exporters.nfd",
    "slinky": "exporters.slinky",
}


def all_exporters() -> list[Exporter]:
    return [importlib.import_module(module).EXPORTER for module in EXPORTERS.values()]
