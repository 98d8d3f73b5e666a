"""YAML and JSON documents read safely: bounded nesting and alias expansion, plain data only, one-line errors;
and written by one dumper (`dump_yaml`), so every command's YAML looks alike.

Every reader of a user's file goes through here. YAML is parsed by libyaml (`CSafeLoader`) where it is
installed, many times faster than the pure-Python loader on large node lists. Before anything is built,
the parser's event stream is scanned: nesting deeper than `MAX_DEPTH` and aliases that would expand the
document far beyond its size (a "billion laughs" bomb) are refused in the time it takes to read the file.
What is built is plain data (mappings, lists, strings, numbers, booleans, null): `!!binary`, `!!set` and
dates are not, so no reader meets a type it does not expect. Error messages name the file, the line and
the problem, never the file's content beyond the offending token.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

from ..errors import InputError
from .files import read_text

MAX_DEPTH = 100  # real documents nest about 15 deep (a JobSet's pod template); recursion stays far away
MAX_EXPANSION = 8  # aliases may make a document at most this many times its own size (plus a little)
_SLACK = 10_000

PLAIN = (dict, list, str, int, float, bool, type(None))


@functools.cache
def _loaders() -> tuple[type, type, type]:
    """libyaml's safe loader and the two built on it: the data loader, without YAML 1.1's timestamps
    (`2024-01-01` stays the string it is in a label), and the strings loader, YAML 1.2's idea of plain scalars
    (only true/false/null resolve; `012`, `1:30`, `0x1F` are strings). Built on first use: PyYAML loads only
    when a YAML document is read (start-up of commands that read none)."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data = type("DataLoader", (base,), {"yaml_implicit_resolvers": _resolvers(
        yaml, {"bool", "int", "float", "null", "merge", "value"}, bools=False)})
    strings = type("StringsLoader", (base,), {"yaml_implicit_resolvers": _resolvers(yaml, {"null"}, bools=True)})
    return base, data, strings


def dump_yaml(data: Any, width: int = 120, explicit_start: bool = False) -> str:
    """Plain data as YAML for people and Git: keys in the order they were built, block style, and no anchors or
    aliases (`remove: &id001 []` ... `*id001` where two values are one object in memory). Every command's
    YAML (`-o yaml`, Kueue files, exports) is written here."""
    import yaml

    return yaml.dump(data, Dumper=_dumper(), sort_keys=False, default_flow_style=False, width=width,
                     explicit_start=explicit_start)


@functools.cache
def _dumper() -> type:
    import yaml

    return type("PlainDumper", (yaml.SafeDumper,), {"ignore_aliases": lambda self, data: True})


def _resolvers(yaml: Any, keep: set[str], bools: bool) -> dict[str, list[Any]]:
    """The implicit resolvers whose tags are in `keep`; `bools`: booleans only as true/false."""
    table: dict[str, list[Any]] = {}
    for first, entries in yaml.resolver.Resolver.yaml_implicit_resolvers.items():
        kept = [(tag, regexp) for tag, regexp in entries if tag.rsplit(":", 1)[-1] in keep]
        if kept:
            table[first] = kept
    if bools:
        strict = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
        for first in "tTfF":
            table[first] = [*table.get(first, []), ("tag:yaml.org,2002:bool", strict)]
    return table


def read_document(path: str | Path, strings: bool = False) -> Any:
    """A YAML or JSON file (or '-' for stdin) as plain data, with errors that name the file."""
    return load(read_text(path), str(path), strings)


def load(text: str, origin: str, strings: bool = False) -> Any:
    """One document from YAML or JSON text. `strings`: every scalar but true/false/null stays a string."""
    if text.lstrip().startswith(("{", "[")):
        return load_json(text, origin)
    docs = load_all(text, origin, strings)
    if len(docs) > 1:
        raise InputError(f"{origin}: {len(docs)} YAML documents; expected one")
    return docs[0] if docs else None


def load_json(text: str, origin: str) -> Any:
    """A JSON document as plain data, nested at most MAX_DEPTH deep."""
    try:
        return _checked(json.loads(text, parse_constant=_no_constant), origin)
    except json.JSONDecodeError as exc:
        raise InputError(f"{origin}: not valid JSON: {exc}") from None
    except RecursionError:
        raise InputError(f"{origin}: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # a number longer than Python reads, NaN
        raise InputError(f"{origin}: not valid JSON: {str(exc).split(';')[0]}") from None


def load_all(text: str, origin: str, strings: bool = False) -> list[Any]:
    """Every document of a YAML stream, as plain data."""
    import yaml

    check_yaml(text, origin)
    _, data, strings_loader = _loaders()
    try:
        return [_checked(doc, origin) for doc in yaml.load_all(text, Loader=strings_loader if strings else data)]
    except yaml.YAMLError as exc:
        raise InputError(f"{origin}: not valid YAML: {yaml_error(exc)}") from None
    except (ValueError, OverflowError) as exc:  # an integer longer than Python reads
        raise InputError(f"{origin}: not valid YAML: {str(exc).split(';')[0]}") from None


def check_yaml(text: str, origin: str) -> None:
    """Refuse YAML nested deeper than MAX_DEPTH or whose aliases expand it far beyond its size, from the
    parser's events alone (nothing is built, and libyaml's parser keeps its own stack). Size is counted twice:
    in nodes (a billion laughs: lists of lists) and in scalar characters (one long string aliased thousands of
    times has few nodes)."""
    import yaml

    depth, events, nodes, chars = 0, 0, 0, 0  # nodes and scalar characters so far, aliases expanded
    sizes: list[list[int]] = []  # the same, under each open collection
    anchors: list[str | None] = []
    known: dict[str, tuple[int, int]] = {}
    max_chars = MAX_EXPANSION * len(text) + _SLACK
    try:
        for event in yaml.parse(text, Loader=_loaders()[0]):
            events += 1
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise InputError(f"{origin}: nested deeper than {MAX_DEPTH} levels (line {_line(event)})")
                sizes.append([1, 0])
                anchors.append(event.anchor)
                nodes += 1
                continue
            if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
                size, anchor = sizes.pop(), anchors.pop()
                if anchor:
                    known[anchor] = (size[0], size[1])
                if sizes:  # already counted in the totals: only the parent's own size grows
                    sizes[-1][0] += size[0]
                    sizes[-1][1] += size[1]
                continue
            if isinstance(event, yaml.ScalarEvent):
                found = (1, len(event.value))
                if event.anchor:
                    known[event.anchor] = found
            elif isinstance(event, yaml.AliasEvent):
                found = known.get(event.anchor or "", (1, 0))
            else:
                continue
            if sizes:
                sizes[-1][0] += found[0]
                sizes[-1][1] += found[1]
            nodes += found[0]
            chars += found[1]
            if nodes > MAX_EXPANSION * events + _SLACK or chars > max_chars:
                raise InputError(f"{origin}: aliases expand the document to more than {MAX_EXPANSION} times its size "
                                 f"(line {_line(event)}); refused")
    except yaml.YAMLError as exc:
        raise InputError(f"{origin}: not valid YAML: {yaml_error(exc)}") from None


def _line(event: Any) -> str:
    """The line a parser event starts on (libyaml marks every event; PyYAML's types allow none)."""
    mark = event.start_mark
    return str(mark.line + 1) if mark is not None else "?"


def yaml_error(exc: Exception) -> str:
    """A YAML parse error (PyYAML's or ruamel's) on one line: where, and what; never the file's text."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}" if mark else problem


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _checked(data: Any, origin: str) -> Any:
    """`data` when it is plain data nested at most MAX_DEPTH deep; else an `InputError` naming the problem."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if not isinstance(value, PLAIN):
            raise InputError(f"{origin}: holds a {type(value).__name__} value; only mappings, lists, strings, "
                             "numbers, booleans and null are read")
        if isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                raise InputError(f"{origin}: nested deeper than {MAX_DEPTH} levels")
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)
            if isinstance(value, dict) and not all(isinstance(k, PLAIN[2:]) for k in value):
                raise InputError(f"{origin}: a mapping key that is a list or mapping; keys must be plain values")
    return data


# --- reading fields of parsed objects: wrong types are one-line errors naming where ---

def kind_of(value: Any) -> str:
    """How a value's type reads in a message: `a list`, `a string`, `null`."""
    kinds = ((bool, "a boolean"), (dict, "a mapping"), (list, "a list"), (str, "a string"), ((int, float), "a number"),
             (type(None), "null"))
    return next((name for kind, name in kinds if isinstance(value, kind)), f"a {type(value).__name__}")


def mapping(value: Any, where: str) -> dict[Any, Any]:
    """`value` as a mapping (null is an empty one); anything else is an `InputError` naming `where`."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"{where} must be a mapping, not {kind_of(value)}")
    return value


def entry(value: Any, where: str) -> dict[Any, Any]:
    """A list element that must be a mapping: unlike a missing field, a null element is an error (the API
    server refuses it, and later code would meet None where it reads a mapping)."""
    if value is None:
        raise InputError(f"{where} must be a mapping, not null")
    return mapping(value, where)


def sequence(value: Any, where: str) -> list[Any]:
    """`value` as a list (null is an empty one)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"{where} must be a list, not {kind_of(value)}")
    return value


def text(value: Any, where: str) -> str:
    """A scalar as the string it stands for (YAML may type `8` or `true`); lists, mappings, null refused."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, int, float)):
        return str(value).lower() if isinstance(value, bool) else str(value)
    raise InputError(f"{where} must be a string, not {kind_of(value)}")


def string_map(value: Any, where: str) -> dict[str, str]:
    """A mapping of strings (labels, annotations, quantities); scalars become the strings they stand for."""
    items = mapping(value, where)
    if all(type(k) is str and type(v) is str for k, v in items.items()):
        return items
    return {text(k, f"{where} key"): text(v, f"{where}.{k}") for k, v in items.items()}
