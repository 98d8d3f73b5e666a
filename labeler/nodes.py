"""Kubernetes Node objects as the rest of topolabel sees them, read from a file or a live cluster."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping

from .errors import InputError
from .gcpause import paused_gc

if TYPE_CHECKING:
    import yaml


@dataclass(slots=True)
class Node:
    """The parts of a Node that topology work needs. Read-only by convention: change one with
    `dataclasses.replace` (not frozen, because a frozen dataclass takes three times as long to build and
    a 100,000-node list builds 100,000 of them).

    Built by `NodeReader`, which shares what repeats between the nodes of one list (label keys and values,
    identical allocatable maps and taints): 100,000 nodes fit in about 90 MB instead of 350. The mappings
    may be shared between nodes, so they are never modified in place.
    """

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
        return NodeReader(origin).node(obj)


class NodeReader:
    """Compact Node records from API objects, one list at a time (a file, or a cluster's pages)."""

    def __init__(self, origin: str = "nodes") -> None:
        self.origin = origin
        self.nodes: list[Node] = []
        self._maps: dict[tuple[Any, tuple[tuple[Any, Any], ...]], dict[str, Any]] = {}

    def node(self, obj: Mapping[str, Any]) -> Node:
        meta = obj.get("metadata") or {}
        name = meta.get("name")
        if not name:
            raise InputError(f"{self.origin}: a Node without metadata.name")
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        conditions = status.get("conditions")
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions) \
            if conditions else True
        taints = spec.get("taints")
        return Node(sys.intern(name) if type(name) is str else str(name),
                    self._strings_of(meta.get("labels")), self._strings_of(meta.get("annotations")),
                    str(spec.get("providerID") or ""), self._shared(status.get("allocatable"), self._strings_of),
                    tuple(self._shared(t, dict) for t in taints) if taints else (), ready,
                    bool(spec.get("unschedulable")))

    def add(self, item: Any) -> None:
        """One item of a list: it must be a Node object."""
        i = len(self.nodes)
        if not isinstance(item, dict):
            raise InputError(f"{self.origin}: item {i} is not an object")
        if item.get("kind", "Node") != "Node":
            raise InputError(f"{self.origin}: item {i} is a {item.get('kind')}, not a Node")
        self.nodes.append(self.node(item))

    def done(self) -> list[Node]:
        """The nodes read, refusing a list that names a node twice."""
        names = {n.name for n in self.nodes}
        if len(names) != len(self.nodes):
            seen: set[str] = set()
            dupes = sorted({n.name for n in self.nodes if n.name in seen or seen.add(n.name)})
            raise InputError(f"{self.origin}: node(s) listed twice: {', '.join(dupes[:5])}")
        return self.nodes

    def _strings_of(self, mapping: Any) -> dict[str, str]:
        """A string-to-string copy with its keys and values interned (a cluster repeats them); YAML may have
        typed `gpu: 8` as an int, JSON from the API never does."""
        if not mapping:
            return {}
        try:
            return dict(zip(map(sys.intern, mapping), map(sys.intern, mapping.values())))
        except TypeError:  # sys.intern takes only strings
            return {sys.intern(str(k)): sys.intern(str(v)) for k, v in mapping.items()}

    def _shared(self, mapping: Any, copy: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
        """One `copy` of each distinct small mapping (allocatable, a taint): thousands of nodes share a few."""
        if not mapping:
            return {}
        try:
            key = (copy, tuple(mapping.items()))
            found = self._maps.get(key)
        except TypeError:  # an unhashable value: keep a copy of its own
            return copy(mapping)
        if found is None:
            found = self._maps[key] = copy(mapping)
        return found


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
    return nodes_from_pages([list_items(data, "Node", origin)], origin)


def nodes_from_pages(pages: Iterable[Iterable[Any]], origin: str) -> list[Node]:
    """Nodes from a paged list, each page turned into compact records before the next is read (with the
    cyclic collector paused: records and parsed items hold no cycles; 100,000 nodes read about 10% faster)."""
    reader = NodeReader(origin)
    with paused_gc():
        for page in pages:
            for item in page:
                reader.add(item)
    return reader.done()


def read_document(path: str | Path) -> Any:
    """A YAML or JSON file (or '-' for stdin) as data, with errors that name the file."""
    try:
        text = sys.stdin.read() if str(path) == "-" else Path(path).read_text()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if text.lstrip().startswith(("{", "[")):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: not valid JSON: {exc}") from None
    import yaml  # only for YAML: commands reading JSON do without its import

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML: {yaml_error(exc)}") from None


def yaml_error(exc: yaml.YAMLError) -> str:
    """A YAML parse error on one line: where, and what."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}" if mark else problem


def load_nodes_file(path: str | Path) -> list[Node]:
    """Nodes from a file, turned into compact records as they are read (see `read_items`)."""
    return nodes_from_pages([read_items(path, "Node")], str(path))


def read_items(path: str | Path, kind: str) -> Iterator[Any]:
    """The objects of a `kubectl get <kind>s -o json|yaml` file, one Node/Pod, or a list of them.

    A JSON List is streamed item by item (ijson's C parser), so memory follows what the caller keeps of each
    object, not the file: a live cluster's full node status is several hundred MB of JSON. Anything else
    (YAML, one object, stdin) is read whole by `read_document`."""
    if str(path) != "-" and _starts_json_object(path):
        streamed = 0
        for item in _stream_items(path):
            streamed += 1
            yield item
        if streamed or _has_items_list(path):
            return
    yield from list_items(read_document(path), kind, str(path))


def _starts_json_object(path: str | Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4096).lstrip().startswith(b"{")
    except OSError:
        return False  # read_document reports it


def _stream_items(path: str | Path) -> Iterator[Any]:
    import ijson

    try:
        with open(path, "rb") as f:
            yield from ijson.items(f, "items.item", use_float=True)
    except ijson.JSONError as exc:
        raise InputError(f"{path}: not valid JSON: {exc}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _has_items_list(path: str | Path) -> bool:
    """An empty List is a list of no nodes; a document without `items` is something else."""
    import ijson

    with open(path, "rb") as f:
        return any(event == "start_array" for prefix, event, _ in ijson.parse(f) if prefix == "items")
