"""Validation problems as people read them: every problem at once, each at its full path, with a
"did you mean" for a mistyped key.

Pydantic reports a location (`('kueue', 'clusterQueues', 0, 'quota', 'nvidia.com/gpu')`) and a message;
this module turns that into `kueue.clusterQueues[0].quota["nvidia.com/gpu"]: ...`, and for an unknown key
looks up the keys the schema allows at that place to suggest the closest one.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

if TYPE_CHECKING:  # pydantic loads only when a model is validated (start-up of commands that validate none)
    from pydantic import BaseModel, ValidationError

Loc = tuple[str | int, ...]
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


@dataclass(frozen=True)
class Issue:
    """One problem at one place in a document."""

    loc: Loc
    message: str

    @property
    def path(self) -> str:
        return path_text(self.loc)

    def __str__(self) -> str:
        return f"{self.path or '(top)'}: {self.message}"


def path_text(loc: Sequence[str | int]) -> str:
    """`source.preset`, `levels[0].name`, `quota["nvidia.com/gpu"]`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            out += f".{part}" if out else part
        else:
            out += f'["{part}"]'
    return out


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """` (did you mean 'preset'?)`, or the known words when none is close; empty when none is known."""
    known = sorted(set(known))
    close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    if close:
        return f"; did you mean {close[0]!r}?"
    return f"; known: {', '.join(known)}" if known else ""


def issues(exc: ValidationError, schema: Mapping[str, Any], prefix: Loc = (),
           rename: Mapping[str, str] | None = None) -> list[Issue]:
    """Every error of `exc` at its full path (under `prefix`); `schema` is the validated model's JSON schema
    (by alias), used to suggest keys. `rename` maps top-level keys as validated back to what the user wrote."""
    out = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        if rename and loc and isinstance(loc[0], str):
            loc = (rename.get(loc[0], loc[0]), *loc[1:])
        out.append(Issue(prefix + loc, message(err, schema, loc)))
    return out


# pydantic's error types in the house's words ("must be at most 1", not "Input should be less than or equal to 1")
WORDS = {
    "less_than_equal": "must be at most {le}", "less_than": "must be less than {lt}",
    "greater_than_equal": "must be at least {ge}", "greater_than": "must be more than {gt}",
    "int_type": "must be a whole number", "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number", "float_type": "must be a number", "float_parsing": "must be a number",
    "bool_type": "must be true or false", "bool_parsing": "must be true or false", "string_type": "must be a string",
    "list_type": "must be a list", "dict_type": "must be a mapping", "model_type": "must be a mapping",
    "missing": "required", "string_too_short": "must be at least {min_length} character(s) long",
    "string_too_long": "must be at most {max_length} characters long",
    "too_short": "must have at least {min_length} item(s)", "too_long": "must have at most {max_length} items",
    "literal_error": "must be {expected}", "enum": "must be {expected}",
}


def message(err: Mapping[str, Any], schema: Mapping[str, Any], loc: Loc) -> str:
    if err["type"] == "extra_forbidden" and loc and isinstance(loc[-1], str):
        return "unknown key" + did_you_mean(loc[-1], keys_at(schema, loc[:-1]))
    words = WORDS.get(err["type"])
    if words:
        try:
            return words.format(**{k: _number(v) for k, v in (err.get("ctx") or {}).items()})
        except (KeyError, IndexError):
            pass
    text = str(err["msg"])
    return text.removeprefix("Value error, ").removeprefix("Assertion failed, ")


def _number(value: Any) -> Any:
    """1.0 as 1: a bound the model wrote as a float reads as the number it is."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def file_order(data: Any, loc: Loc) -> tuple[int, ...]:
    """Where `loc` is in the document, as positions of its keys (and list indexes): sorting issues by it
    lists them in the order a person reads the file. A key the document lacks (a required one) sorts after
    its siblings."""
    out = []
    for part in loc:
        if isinstance(data, Mapping):
            keys = list(data)
            out.append(keys.index(part) if part in keys else len(keys))
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            out.append(part)
            data = data[part]
        else:
            out.append(0)
            data = None
    return tuple(out)


def keys_at(schema: Mapping[str, Any], loc: Loc) -> list[str]:
    """The property names the schema allows for the object at `loc` (empty when it cannot tell)."""
    defs = schema.get("$defs") or {}
    nodes = [schema]
    for part in loc:
        nodes = [child for node in nodes for child in _children(_expand(node, defs), part)]
    return sorted({k for node in nodes for option in _expand(node, defs) for k in option.get("properties") or {}})


def _expand(node: Mapping[str, Any], defs: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A schema node's alternatives, with $refs followed."""
    if "$ref" in node:
        return _expand(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    options = [*(node.get("anyOf") or []), *(node.get("oneOf") or []), *(node.get("allOf") or [])]
    if options:
        return [leaf for option in options for leaf in _expand(option, defs)]
    return [node]


def _children(options: list[Mapping[str, Any]], part: str | int) -> list[Mapping[str, Any]]:
    out = []
    for option in options:
        if isinstance(part, int) and "items" in option:
            out.append(option["items"])
        elif isinstance(part, str) and part in (option.get("properties") or {}):
            out.append(option["properties"][part])
        elif isinstance(part, str) and isinstance(option.get("additionalProperties"), dict):
            out.append(option["additionalProperties"])
    return out


def model_issues(model: type[BaseModel], data: Any, prefix: Loc = (),
                 rename: Mapping[str, str] | None = None) -> tuple[Any, list[Issue]]:
    """Validate `data` as `model`: the instance and no issues, or None and every issue."""
    from pydantic import ValidationError

    try:
        return model.model_validate(data), []
    except ValidationError as exc:
        return None, issues(exc, model.model_json_schema(by_alias=True), prefix, rename)


def one_line(found: Sequence[Issue]) -> str:
    """Several issues on one line, for an error message."""
    head = f"{len(found)} problems: " if len(found) > 1 else ""
    return head + "; ".join(str(i) for i in found)
