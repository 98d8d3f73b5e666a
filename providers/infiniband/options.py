"""The infiniband source's options, a plain dataclass: a discovery from flags reads them without pydantic, and
config files check them against the model made from it (`providers.options`)."""

from __future__ import annotations

import math
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


@dataclass(frozen=True)
class InfinibandOptions:
    ib_fabric: str | None = None  # a published fabric's name; "*": the only one published
    ib_namespace: str = DEFAULT_NAMESPACE
    ib_max_age: float = field(default=1800.0, metadata={"gt": 0, "check": _finite})
    ibnetdiscover: str | None = None
    run_ibnetdiscover: bool = False  # flag --run (`run` is the subcommand's handler)
    ib_ca: str | None = None
    ib_timeout: float = field(default=60.0, metadata={"gt": 0, "check": _finite})
    guid_map: str | None = None
    node_name_map: str | None = None
    hca_pattern: str | None = field(default=None, metadata={"check": _compiles})
    guid_annotation: str = ANNOTATION

    def check(self) -> None:
        """One input, whichever way the options were given."""
        if sum((bool(self.ib_fabric), bool(self.ibnetdiscover), bool(self.run_ibnetdiscover))) != 1:
            raise ValueError("give one of --ib-fabric NAME (the fabric the collector published), "
                             "--ibnetdiscover FILE (or - for stdin) and --run")
