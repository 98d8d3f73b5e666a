"""Job files read and written with ruamel.yaml round-trip mode, so comments and key order survive edits."""

from __future__ import annotations

import io
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from labeler.documents import check_yaml, yaml_error
from labeler.errors import TopologyError


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap a user's long lines
    yaml.indent(mapping=2, sequence=2, offset=0)
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


def dump(documents: list[Any], explicit_start: bool = False) -> str:
    """The documents back as YAML; multi-document files keep their `---` separators."""
    yaml = _yaml()
    yaml.explicit_start = explicit_start or len(documents) > 1
    out = io.StringIO()
    yaml.dump_all(documents, out)
    return out.getvalue()
