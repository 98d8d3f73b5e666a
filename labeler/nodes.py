"""Kubernetes Node objects as the rest of topolabel sees them, read from a file or a live cluster."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from .errors import InputError

# The label keys topolabel wrote on a node, comma-separated: what it owns there, and all it may ever remove.
MANAGED_ANNOTATION = "topolabel.dev/managed-labels"


@dataclass(frozen=True)
class Node:
    """The parts of a Node that topology work needs."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    provider_id: str = ""
    allocatable: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, str], ...] = ()
    ready: bool = True
    unschedulable: bool = False

    @classmethod
    def from_object(cls, obj: Mapping[str, Any], origin: str = "nodes") -> "Node":
        """Build from a Node as the API serves it (camelCase JSON)."""
        meta = obj.get("metadata") or {}
        name = meta.get("name")
        if not name:
            raise InputError(f"{origin}: a Node without metadata.name")
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        conditions = status.get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions) \
            if conditions else True
        return cls(
            name=str(name),
            labels=_strings(meta.get("labels")),
            annotations=_strings(meta.get("annotations")),
            provider_id=str(spec.get("providerID") or ""),
            allocatable=_strings(status.get("allocatable")),
            taints=tuple(dict(t) for t in spec.get("taints") or []),
            ready=ready,
            unschedulable=bool(spec.get("unschedulable")),
        )

    def managed(self) -> list[str]:
        """The keys the managed-labels annotation lists (unchecked: `labeler.plan` decides what it owns)."""
        return [k for k in self.annotations.get(MANAGED_ANNOTATION, "").split(",") if k]


def _strings(mapping: Any) -> dict[str, str]:
    """A string-to-string copy; YAML may have typed `gpu: 8` as an int, JSON from the API never does."""
    if not mapping:
        return {}
    if all(type(v) is str for v in mapping.values()):
        return dict(mapping)
    return {str(k): str(v) for k, v in mapping.items()}


def list_items(data: Any, kind: str, origin: str) -> Iterable[Any]:
    """The objects of a `kubectl get <kind>s -o yaml|json` document (a List), of one object, or of a list."""
    if isinstance(data, Mapping) and data.get("kind") == kind:
        return [data]
    if isinstance(data, Mapping) and isinstance(data.get("items"), list):
        return data["items"]
    if isinstance(data, list):
        return data
    raise InputError(f"{origin}: expected a {kind}List (kubectl get {kind.lower()}s -o yaml) or a list of {kind}s")


def parse_nodes(data: Any, origin: str) -> list[Node]:
    """Nodes from a `kubectl get nodes -o yaml|json` document (a List), one Node, or a plain list."""
    items = list_items(data, "Node", origin)
    nodes = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InputError(f"{origin}: item {i} is not an object")
        if item.get("kind", "Node") != "Node":
            raise InputError(f"{origin}: item {i} is a {item.get('kind')}, not a Node")
        nodes.append(Node.from_object(item, origin))
    names = [n.name for n in nodes]
    dupes = sorted({n for n in names if names.count(n) > 1}) if len(set(names)) != len(names) else []
    if dupes:
        raise InputError(f"{origin}: node(s) listed twice: {', '.join(dupes[:5])}")
    return nodes


def read_document(path: str | Path) -> Any:
    """A YAML or JSON file (or '-' for stdin) as data, with errors that name the file."""
    try:
        text = sys.stdin.read() if str(path) == "-" else Path(path).read_text()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        if text.lstrip().startswith(("{", "[")):
            return json.loads(text)
        return yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON: {exc}") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML: {yaml_error(exc)}") from None


def yaml_error(exc: yaml.YAMLError) -> str:
    """A YAML parse error on one line: where, and what."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}" if mark else problem


def load_nodes_file(path: str | Path) -> list[Node]:
    return parse_nodes(read_document(path), str(path))
