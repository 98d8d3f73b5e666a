"""Source options as pydantic models: the base every source's options extend, and the model of options a source
declares as a plain dataclass (see `providers.base.parse_options`).

A declared field's `metadata` holds pydantic's constraints (`{"gt": 0}`; plain options are taken without
pydantic only when they are bounds gt/ge/lt/le), optionally `check`, a function of the value that returns
it or raises ValueError, and `choices`, the values a string may take, which only the schema shows (as an
`enum`, so the CRD refuses others at `kubectl apply`; `check` words the error for files and flags). The
dataclass's own `check()` is the check of the whole. The model
has the same fields, defaults, bounds and checks, so config files, the JSON schema and error messages see
what a hand-written model would give.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import Any, Callable, ClassVar, Protocol, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator


class PlainOptions(Protocol):
    """Options declared as a plain dataclass: its fields (with their checks in `metadata`, as the module says),
    and `check()`, the check of the whole, raising ValueError."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def check(self) -> None: ...


class Options(BaseModel):
    """Base for a source's options: unknown keys are an error, so typos are caught. The validator is built
    on first use (defer_build): every command that lists the sources' flags imports every source module."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)


@lru_cache(maxsize=None)
def model_of(declared: type[PlainOptions]) -> type[Options]:
    """The model of options declared as a plain dataclass (of the same name), made once."""
    hints = get_type_hints(declared)
    fields: dict[str, Any] = {}
    validators: dict[str, Any] = {"_check": model_validator(mode="after")(_whole_check(declared.check))}
    for item in dataclasses.fields(declared):
        fields[item.name] = (hints[item.name], _field(item))
        if "check" in item.metadata:
            validators[f"_check_{item.name}"] = field_validator(item.name)(item.metadata["check"])
    return create_model(declared.__name__, __base__=Options, __module__=declared.__module__, __validators__=validators, **fields)


def _field(item: dataclasses.Field) -> Any:
    """The pydantic field of a dataclass field: its default (or factory, or none: required), its bounds and its
    choices."""
    bounds: dict[str, Any] = {k: v for k, v in item.metadata.items() if k not in ("check", "choices")}
    if "choices" in item.metadata:
        bounds["json_schema_extra"] = _enum(list(item.metadata["choices"]))
    if item.default_factory is not dataclasses.MISSING:
        return Field(default_factory=item.default_factory, **bounds)
    default = ... if item.default is dataclasses.MISSING else item.default
    return Field(default, **bounds) if bounds else default


def _enum(choices: list[str]) -> Callable[[dict[str, Any]], None]:
    """Adds `enum` to a string field's schema, or to the string branch of an optional one."""
    def extra(schema: dict[str, Any]) -> None:
        branches = [b for b in schema.get("anyOf") or [schema] if b.get("type") == "string"]
        for branch in branches:
            branch["enum"] = choices

    return extra


def _whole_check(check: Callable[[Any], None]) -> Callable[[Options], Options]:
    def after(self: Options) -> Options:
        check(self)
        return self

    return after
