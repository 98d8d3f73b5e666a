"""The source contract: what a source is, the context it runs in, and how its options are checked.

A source module defines `SOURCE = Source(...)`; `providers.registry` finds it by name. A source's own
heavy clients (boto3, google-cloud-compute) are imported inside its discovery, so listing the sources and
their flags stays cheap. A source's options are a pydantic model (`Options`), or a plain dataclass whose
model `providers.options` makes on first use: a discovery given only flags then never imports pydantic,
which costs more than parsing a large fabric's text.
"""

from __future__ import annotations

import argparse
import dataclasses
import operator
import re
from dataclasses import dataclass, field
from functools import lru_cache
from types import UnionType
from typing import (TYPE_CHECKING, Any, Callable, Mapping, Sequence, TypeVar, Union, get_args, get_origin, get_type_hints,
                    overload)

from labeler.errors import SourceError
from labeler.progress import Progress, quiet
from labeler.topology.model import Discovery

if TYPE_CHECKING:
    from typing_extensions import TypeIs

    from labeler.io.nodes import Node

    from .options import Options as Options, PlainOptions

BOUNDS = {"gt": operator.gt, "ge": operator.ge, "lt": operator.lt, "le": operator.le}  # as pydantic's Field


def __getattr__(name: str) -> Any:
    """`Options`, pydantic's base of source options, imported only by the sources that use it."""
    if name == "Options":
        from .options import Options

        return Options
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


@dataclass(frozen=True)
class Source:
    """One topology source, resolved once per command.

    `declared` are its options: a pydantic model, or a plain dataclass (see `providers.options`); `options` is
    their model either way. `add_arguments` adds flags whose dest names are those options. `needs_nodes`: it
    must be given the cluster's nodes (labels, cloud APIs); sources that read a whole fabric or a file run
    without them. `per_node`: the operator may ask it about a few joining nodes alone instead of a full pass.
    `reads_provider_id`: its discovery reads the nodes' spec.providerID (cloud APIs); a command that only
    discovers reads the nodes without it otherwise.
    """

    name: str
    declared: type[Options] | type[PlainOptions]
    add_arguments: Callable[[argparse.ArgumentParser], None]
    discover: Callable[[SourceContext], Discovery]
    needs_nodes: bool = True
    per_node: bool = True
    reads_provider_id: bool = True

    @property
    def options(self) -> type[Options]:
        """The pydantic model of its options."""
        if not _is_plain(self.declared):
            return self.declared
        from .options import model_of

        return model_of(self.declared)

    def option_names(self) -> list[str]:
        """Its options' names, in order (without pydantic for plain options)."""
        if _is_plain(self.declared):
            return [item.name for item in dataclasses.fields(self.declared)]
        return list(self.declared.model_fields)


ModelT = TypeVar("ModelT", bound="Options")
PlainT = TypeVar("PlainT", bound="PlainOptions")


@overload
def parse_options(declared: type[ModelT], ctx: SourceContext) -> ModelT: ...


@overload
def parse_options(declared: type[PlainT], ctx: SourceContext) -> PlainT: ...


def parse_options(declared: type[Options] | type[PlainOptions], ctx: SourceContext) -> Options | PlainOptions:
    """Validate options with an error naming where they came from and the bad key. Plain options skip pydantic
    when every value already has its declared type and passes the checks (as flags do); otherwise the model
    validates them, and its errors are the ones reported."""
    if not _is_plain(declared):
        return _validated(declared, ctx)
    plain = _plain(declared, ctx.options)
    if plain is not None:
        return plain
    from .options import model_of

    validated = _validated(model_of(declared), ctx)
    return declared(**{item.name: getattr(validated, item.name) for item in dataclasses.fields(declared)})


def _validated(model: type[ModelT], ctx: SourceContext) -> ModelT:
    from pydantic import ValidationError

    try:
        return model.model_validate(dict(ctx.options))
    except ValidationError as exc:
        from labeler.settings.config import validation_details  # the config's models load only for an error

        raise SourceError(f"{ctx.origin}: {validation_details(exc, model)}") from None


def _is_plain(declared: type[Options] | type[PlainOptions]) -> TypeIs[type[PlainOptions]]:
    return dataclasses.is_dataclass(declared)


def _plain(declared: type[PlainT], options: Mapping[str, Any]) -> PlainT | None:
    """The options as the dataclass, or None when pydantic must look: to convert a value or word an error."""
    hints = _hints(declared)
    if not all(key in hints and type(value) in _exact(hints[key]) for key, value in options.items()):
        return None
    metadata = {item.name: item.metadata for item in dataclasses.fields(declared)}
    value = declared(**options)
    try:
        for key in options:
            _check_field(metadata[key], options[key])
        value.check()
    except ValueError:
        return None
    return value


def _check_field(metadata: Mapping[str, Any], value: Any) -> None:
    """The field's check and bounds; a constraint this does not know is left to pydantic (ValueError)."""
    for key, bound in metadata.items():
        if key == "choices":
            continue  # the schema's; `check` tests the value
        if key == "check":
            bound(value)
        elif key not in BOUNDS or not BOUNDS[key](value, bound):
            raise ValueError(f"not {key} {bound}")


def _exact(hint: Any) -> tuple[Any, ...]:
    """The classes a value may have to be taken as it is: the hint's, or a union's; none for anything else
    (`list[str]`, `Literal[...]`), which pydantic checks."""
    if get_origin(hint) in (Union, UnionType):
        return get_args(hint)
    return (hint,) if get_origin(hint) is None and isinstance(hint, type) else ()


@lru_cache(maxsize=None)
def _hints(declared: type[PlainOptions]) -> dict[str, Any]:
    return get_type_hints(declared)


def regex(text: str) -> re.Pattern[str]:
    """`text` compiled; what Python's `re` cannot compile (a syntax error, `a{99999999999}`, whose count is past
    its limit and raises OverflowError) is a ValueError that says so."""
    try:
        return re.compile(text)
    except (re.error, OverflowError, RecursionError) as exc:
        raise ValueError(f"not a regular expression: {exc}") from None
