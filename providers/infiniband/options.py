"""The infiniband and ufm sources' options, plain dataclasses: a discovery from flags reads them without pydantic,
and config files check them against the model made from each (`providers.options`). `FabricOptions` are what
both take once they hold a fabric: who owns which HCA, which HCAs count, which part of the fabric to leave out."""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass, field

from ..base import regex

# Node annotation an agent fills from /sys/class/infiniband/*/node_guid: `mlx5_0=0x...,mlx5_1=0x...`.
ANNOTATION = "topolabel.dev/ib-node-guids"
DEFAULT_NAMESPACE = "topolabel-agent"  # where manifests/agent runs the collector


def _compiles(value: str | None) -> str | None:
    if value is not None:
        regex(value)
    return value


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("must be a finite number of seconds")
    return value


def _guids(value: str | None) -> str | None:
    if value is not None:
        for entry in split_guids(value):
            try:
                int(entry.lower().removeprefix("0x").replace(":", ""), 16)
            except ValueError:
                raise ValueError(f"{entry!r} is not a GUID") from None
    return value


def split_guids(value: str) -> list[str]:
    """`0x1,0x2 0x3` -> the entries."""
    return [entry for entry in re.split(r"[\s,]+", value.strip()) if entry]


@dataclass(frozen=True)
class FabricOptions:
    """How the fabric sources (infiniband, ufm) place hosts: who owns an HCA, which HCAs count, what to leave out."""

    guid_map: str | None = None
    hca_pattern: str | None = field(default=None, metadata={"check": _compiles})
    guid_annotation: str = ANNOTATION
    ib_exclude: str | None = field(default=None, metadata={"check": _compiles})  # node descriptions to leave out
    ib_exclude_guids: str | None = field(default=None, metadata={"check": _guids})  # node or port GUIDs

    def check(self) -> None:
        """Each field checks itself."""


def add_fabric_arguments(parser: argparse.ArgumentParser, source: str) -> None:
    """The flags of `FabricOptions`, added once, under the heading of the `source` adding them first: the
    infiniband and ufm sources both take them, and every source's flags share one parser."""
    if "--guid-map" in parser._option_string_actions:
        return
    group = parser.add_argument_group(f"{source} source (placing hosts; the infiniband and ufm sources both take these)")
    group.add_argument("--guid-map", metavar="FILE", help="YAML/JSON: node -> HCA GUIDs ([mlx5_0=]0x...), for HCAs without a host in their description")
    group.add_argument("--hca-pattern", metavar="REGEX", help="use only HCAs whose device name matches, e.g. 'mlx5_[0-7]' (default: all)")
    group.add_argument("--ib-exclude", metavar="REGEX",
                       help="leave out switches and HCAs whose node description matches, e.g. a storage fabric's "
                            "'IBSTOR|storage' (HCAs cabled only to left-out switches go too)")
    group.add_argument("--ib-exclude-guids", metavar="GUIDS",
                       help="leave out the switches and HCAs with these node or port GUIDs (comma-separated)")


@dataclass(frozen=True)
class InfinibandOptions(FabricOptions):
    """Where the infiniband source reads its fabric: a published one, a saved capture, or ibnetdiscover run here."""

    ib_fabric: str | None = None  # a published fabric's name; "*": the only one published
    ib_namespace: str = DEFAULT_NAMESPACE
    ib_max_age: float = field(default=1800.0, metadata={"gt": 0, "check": _finite})
    ibnetdiscover: str | None = None
    run_ibnetdiscover: bool = False  # flag --run (`run` is the subcommand's handler)
    ib_ca: str | None = None
    ib_timeout: float = field(default=60.0, metadata={"gt": 0, "check": _finite})
    node_name_map: str | None = None

    def check(self) -> None:
        """One input, whichever way the options were given."""
        if sum((bool(self.ib_fabric), bool(self.ibnetdiscover), bool(self.run_ibnetdiscover))) != 1:
            raise ValueError("give one of --ib-fabric NAME (the fabric the collector published), "
                             "--ibnetdiscover FILE (or - for stdin) and --run")
