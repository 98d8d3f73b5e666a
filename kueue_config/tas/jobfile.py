"""Job files read and written with ruamel.yaml round-trip mode, so comments and key order survive edits."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from labeler.errors import TopologyError
from labeler.io.documents import check_yaml, yaml_error


@dataclass(frozen=True)
class Indent:
    """A file's block indentation: `mapping` spaces per level, list dashes `offset` spaces in from their key."""

    mapping: int = 2
    offset: int = 0


_KEY = re.compile(r"^( *)[^\s#-][^#]*:\s*(#.*)?$")  # a key opening a block: `spec:`
_ITEM = re.compile(r"^( *)(- |-$)")


def guess_indent(text: str) -> Indent:
    """The indentation a file uses, from the first block under a key and the first list under a key.

    (ruamel's own guess reports a list's content column as the mapping indent when a list comes first.)
    """
    mapping = offset = None
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    for above, line in zip(lines, lines[1:]):
        key = _KEY.match(above)
        if key is None:
            continue
        depth = len(line) - len(line.lstrip(" "))
        item = _ITEM.match(line)
        if item and offset is None and depth >= len(key.group(1)):
            offset = depth - len(key.group(1))
        elif not item and mapping is None and depth > len(key.group(1)):
            mapping = depth - len(key.group(1))
        if mapping is not None and offset is not None:
            break
    return Indent(mapping or 2, offset or 0)


def _yaml(indent: Indent = Indent()) -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap a user's long lines
    yaml.indent(mapping=indent.mapping, sequence=indent.offset + 2, offset=indent.offset)
    return yaml


def load(text: str, origin: str) -> list[Any]:
    """All documents of a YAML (or JSON) stream, as editable round-trip data; empty documents dropped.

    The stream is checked for depth and alias bombs first (ruamel's loader recurses and expands)."""
    check_yaml(text, origin)
    try:
        return [doc for doc in _yaml().load_all(text) if doc is not None]
    except YAMLError as exc:
        raise TopologyError(f"{origin}: not valid YAML: {yaml_error(exc)}") from None
    except ValueError as exc:  # an integer longer than Python reads
        raise TopologyError(f"{origin}: not valid YAML: {str(exc).split(':')[0]}") from None


def dump(documents: list[Any], explicit_start: bool = False, indent: Indent = Indent()) -> str:
    """The documents back as YAML, indented as `indent` says; multi-document files keep their `---` separators."""
    yaml = _yaml(indent)
    yaml.explicit_start = explicit_start or len(documents) > 1
    out = io.StringIO()
    yaml.dump_all(documents, out)
    return out.getvalue()
