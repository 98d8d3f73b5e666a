"""Kubernetes Node objects as the rest of topolabel sees them, read from a file or a live cluster."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from .documents import mapping, read_document, sequence, string_map, text
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
        """Build from a Node as the API serves it (camelCase JSON); wrong types are errors naming the field."""
        meta = mapping(obj.get("metadata"), f"{origin}: metadata")
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise InputError(f"{origin}: a Node without metadata.name")
        where = f"{origin}: node {name}"
        spec = mapping(obj.get("spec"), f"{where}: spec")
        status = mapping(obj.get("status"), f"{where}: status")
        conditions = [mapping(c, f"{where}: status.conditions[]")
                      for c in sequence(status.get("conditions"), f"{where}: status.conditions")]
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions) if conditions else True
        return cls(
            name=name,
            labels=string_map(meta.get("labels"), f"{where}: metadata.labels"),
            annotations=string_map(meta.get("annotations"), f"{where}: metadata.annotations"),
            provider_id=text(spec.get("providerID") or "", f"{where}: spec.providerID"),
            allocatable=string_map(status.get("allocatable"), f"{where}: status.allocatable"),
            taints=tuple(string_map(t, f"{where}: spec.taints[]") for t in sequence(spec.get("taints"), f"{where}: spec.taints")),
            ready=ready,
            unschedulable=bool(spec.get("unschedulable")),
        )

    def managed(self) -> list[str]:
        """The keys the managed-labels annotation lists (unchecked: `labeler.plan` decides what it owns)."""
        return [k for k in self.annotations.get(MANAGED_ANNOTATION, "").split(",") if k]


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
            raise InputError(f"{origin}: item {i} is a {str(item.get('kind'))[:60]}, not a Node")
        nodes.append(Node.from_object(item, origin))
    names = [n.name for n in nodes]
    dupes = sorted({n for n in names if names.count(n) > 1}) if len(set(names)) != len(names) else []
    if dupes:
        raise InputError(f"{origin}: node(s) listed twice: {', '.join(dupes[:5])}")
    return nodes


def load_nodes_file(path: str | Path) -> list[Node]:
    return parse_nodes(read_document(path), str(path))
