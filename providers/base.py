"""The source contract: what a source is, the context it runs in, and how its options are checked.

A source module defines `SOURCE = Source(...)`; `providers.registry` finds it by name. A source's own
heavy clients (boto3, google-cloud-compute) are imported inside its discovery, so listing the sources and
their flags stays cheap.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from labeler.errors import SourceError
from labeler.model import Discovery
from labeler.nodes import Node
from labeler.progress import Progress, quiet


@dataclass
class SourceContext:
    """What a source gets: the cluster's nodes (may be empty offline), its merged options, where to report the
    progress of long work (many regions or zones, a fabric scan), and `cluster`, which returns an API client for
    sources that read other objects than Nodes (None: no cluster to ask)."""

    nodes: Sequence[Node] = ()
    options: Mapping[str, Any] = field(default_factory=dict)
    origin: str = "source"
    cluster: Callable[[], Any] | None = None
    progress: Progress = quiet


class Options(BaseModel):
    """Base for a source's options: unknown keys are an error, so typos are caught. The validator is built
    on first use (defer_build): every command that lists the sources' flags imports every source module."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)


@dataclass(frozen=True)
class Source:
    """One topology source, resolved once per command.

    `options` is the pydantic model of its options, and `add_arguments` adds flags whose dest names are
    those options. `needs_nodes`: it must be given the cluster's nodes (labels, cloud APIs); sources that
    read a whole fabric or a file run without them. `per_node`: the operator may ask it about a few joining
    nodes alone instead of a full pass.
    """

    name: str
    options: type[Options]
    add_arguments: Callable[[argparse.ArgumentParser], None]
    discover: Callable[[SourceContext], Discovery]
    needs_nodes: bool = True
    per_node: bool = True


OptionsT = TypeVar("OptionsT", bound=Options)


def parse_options(model: type[OptionsT], ctx: SourceContext) -> OptionsT:
    """Validate options with an error naming where they came from and the bad key."""
    try:
        return model.model_validate(dict(ctx.options))
    except ValidationError as exc:
        from labeler.config import validation_details  # the config's models load only for an error

        raise SourceError(f"{ctx.origin}: {validation_details(exc, model)}") from None
