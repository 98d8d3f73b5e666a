"""What every source shares: the registry, the context a source runs in, option validation."""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Mapping, Sequence, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from labeler.config import validation_details
from labeler.nodes import Node

# name -> module; modules are imported only when used, so a source's heavy client stays unloaded.
SOURCES: dict[str, str] = {
    "labels": "providers.labels",
    "inventory": "providers.inventory",
    "aws": "providers.aws",
    "gcp": "providers.gcp",
    "combined": "providers.combined",
    "lldp": "providers.lldp",
    "infiniband": "providers.infiniband",
}


class SourceError(RuntimeError):
    """A source could not answer at all (unreachable API, denied permission, unreadable file)."""


@dataclass
class SourceContext:
    """What a source gets: the cluster's nodes (may be empty offline) and its merged options."""

    nodes: Sequence[Node] = ()
    options: Mapping[str, Any] = field(default_factory=dict)
    origin: str = "source"


class Options(BaseModel):
    """Base for a source's options: unknown keys are an error, so typos are caught."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


OptionsT = TypeVar("OptionsT", bound=Options)


def parse_options(model: type[OptionsT], ctx: SourceContext) -> OptionsT:
    """Validate options with an error naming where they came from and the bad key."""
    try:
        return model.model_validate(dict(ctx.options))
    except ValidationError as exc:
        raise SourceError(f"{ctx.origin}: {validation_details(exc, '(options)')}") from None


def snake(key: str) -> str:
    """camelCase config keys and dashed flags to the snake_case option names sources use."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key).replace("-", "_").lower()


def load_source(name: str) -> ModuleType:
    if name not in SOURCES:
        raise SourceError(f"unknown source {name!r}; known: {', '.join(sorted(SOURCES))}")
    return importlib.import_module(SOURCES[name])
