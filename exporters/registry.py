"""The one list of outputs; `topolabel export` loops over it, and the config and its schema read their options."""

from __future__ import annotations

import importlib
from typing import Any, Iterator, Mapping

from .base import Exporter, Options

# name -> module defining EXPORTER, in the order `topolabel export --help` lists them
EXPORTERS: dict[str, str] = {
    "slurm": "exporters.slurm",
    "volcano": "exporters.volcano",
    "kai": "exporters.kai",
    "nfd": "exporters.nfd",
    "slinky": "exporters.slinky",
}


def get_exporter(name: str) -> Exporter[Any]:
    exporter: Exporter[Any] = importlib.import_module(EXPORTERS[name]).EXPORTER
    return exporter


def all_exporters() -> list[Exporter[Any]]:
    return [get_exporter(name) for name in EXPORTERS]


class _OptionModels(Mapping[str, type[Options]]):
    """Each exporter's options model by name, its module imported only when that name is looked up: checking a
    config's `export` section loads only the formats it names."""

    def __getitem__(self, name: str) -> type[Options]:
        if name not in EXPORTERS:
            raise KeyError(name)
        return get_exporter(name).options

    def __iter__(self) -> Iterator[str]:
        return iter(EXPORTERS)

    def __len__(self) -> int:
        return len(EXPORTERS)


def option_models() -> Mapping[str, type[Options]]:
    """What the config's `export` section is checked against and its JSON schema is made from."""
    return _OptionModels()
