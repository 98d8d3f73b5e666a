"""Kubernetes Node objects as the rest of topolabel sees them, read from a file or a live cluster."""

from __future__ import annotations

import io
import os
import stat
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, cast

from ..errors import InputError
from ..gcpause import paused_gc
from .files import read_bytes, text_of

if TYPE_CHECKING:  # the readers below load when nodes are read (start-up time of commands reading none)
    from pathlib import Path

    from .jsonlist import RawItem, RunDecoder


# The kubelet's own conditions: Ready is `Node.ready`; the others Kubernetes acts on by itself (taints).
KUBELET_CONDITIONS = frozenset({"Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"})
# The labels or annotations of a node that keeps none: records are never changed in place, so they share one.
EMPTY: Mapping[str, str] = {}
# Distinct projected label or annotation mappings a reader remembers to share (`Keep`): a cluster's pools are a
# few; a value unique to each node (a host) would only fill the table.
SHARED_PROJECTIONS = 4096
# The label keys topolabel wrote on a node, comma-separated: what it owns there, and all it may ever remove.
MANAGED_ANNOTATION = "topolabel.dev/managed-labels"


@dataclass(frozen=True)
class Keep:
    """What node records keep besides the name, allocatable, taints and conditions: a command that reads only
    part of each Node says which part, and the rest is not kept (1,000,000 nodes: a label mapping each is
    about 350 MB). `labels`/`annotations`: a test of the keys kept, None for all. `strings`: copies to share,
    e.g. the names and values of a snapshot read before (filled further as the nodes are read)."""

    provider_ids: bool = True
    labels: Callable[[str], bool] | None = None
    annotations: Callable[[str], bool] | None = None
    strings: dict[str, str] | None = field(default=None, compare=False)


ALL = Keep()


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
    conditions: tuple[tuple[str, str, str, str], ...] = ()  # (type, status, reason, message), not the kubelet's

    def condition(self, type_: str) -> tuple[str, str, str] | None:
        """(status, reason, message) of the condition `type_` (not one of the kubelet's), None when it has none."""
        return next(((s, r, m) for t, s, r, m in self.conditions if t == type_), None)

    @classmethod
    def from_object(cls, obj: Mapping[str, Any], origin: str = "nodes") -> "Node":
        """Build from a Node as the API serves it (camelCase JSON); wrong types are errors naming the field."""
        return NodeReader(origin).node(obj)

    def managed(self) -> list[str]:
        """The keys the managed-labels annotation lists (unchecked: `labeler.topology.plan` decides what it owns)."""
        return [k for k in self.annotations.get(MANAGED_ANNOTATION, "").split(",") if k]


class NodeReader:
    """Compact Node records from API objects, one list at a time (a file, or a cluster's pages). The objects
    are untrusted: a field of the wrong type is an `InputError` naming the node and the field."""

    def __init__(self, origin: str = "nodes", keep: Keep = ALL) -> None:
        """What the records keep: `keep` (without provider ids, a command whose source reads none keeps no copy
        of a string unique to each node: 1,000,000 nodes, 100 MB)."""
        from . import nodejson

        self._json = nodejson
        self.origin = origin
        self._provider_ids = keep.provider_ids
        self._label_keys = None if keep.labels is None else _KeyTest(keep.labels)
        self._annotation_keys = None if keep.annotations is None else _KeyTest(keep.annotations)
        self._projections: dict[tuple[tuple[str, str], ...], Mapping[str, str]] = {}
        self.nodes: list[Node] = []
        self._maps: dict[tuple[Any, tuple[tuple[Any, Any], ...]], dict[str, Any]] = {}
        self._taint_lists: dict[tuple[int, ...], tuple[Mapping[str, str], ...]] = {}
        self._condition_lists: dict[tuple[tuple[str, str, str, str], ...], tuple[tuple[str, str, str, str], ...]] = {}
        self._texts: dict[tuple[Callable[[Any], Any], bytes], Any] = {}  # see `_decoded`
        # One copy of each string (names, label keys and values), for this list only: unlike sys.intern, whose
        # table lives as long as the process (two entries a node: 90 MB at 1,000,000), it goes with the reader.
        self._strings: dict[str, str] = {} if keep.strings is None else keep.strings
        self._same = self._strings.setdefault

    def node(self, obj: Mapping[str, Any]) -> Node:
        from .documents import mapping, sequence, text

        meta = mapping(obj.get("metadata"), f"{self.origin}: metadata")
        name = meta.get("name")
        if type(name) is not str or not name:
            raise InputError(f"{self.origin}: a Node without metadata.name")
        where = f"{self.origin}: node {name}"
        spec = mapping(obj.get("spec"), f"{where}: spec")
        status = mapping(obj.get("status"), f"{where}: status")
        conditions = [mapping(c, f"{where}: status.conditions[]")
                      for c in sequence(status.get("conditions"), f"{where}: status.conditions")]
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions) \
            if conditions else True
        taints = sequence(spec.get("taints"), f"{where}: spec.taints")
        return Node(self._same(name, name),
                    self._kept(self._strings_of(meta.get("labels"), f"{where}: metadata.labels"), self._label_keys),
                    self._kept(self._strings_of(meta.get("annotations"), f"{where}: metadata.annotations"),
                               self._annotation_keys),
                    text(spec.get("providerID") or "", f"{where}: spec.providerID") if self._provider_ids else "",
                    self._shared(status.get("allocatable"), self._strings_of, f"{where}: status.allocatable"),
                    self._taints([self._shared(t, _taint, f"{where}: spec.taints[]") for t in taints]), ready,
                    bool(spec.get("unschedulable")),
                    self._conditions([tuple(text(c.get(k) or "", f"{where}: status.conditions[].{k}")
                                            for k in ("type", "status", "reason", "message"))
                                      for c in conditions]))

    def add(self, item: Any) -> None:
        """One item of a list: it must be a Node object. A raw JSON item (`read_items(raw=True)`) of the usual
        shape is decoded straight into its record; any other is decoded whole and read field by field. A record
        `run` made is taken as it is."""
        if type(item) is Node:
            self.nodes.append(item)
            return
        if isinstance(item, self._json.RAW_ITEMS):
            node = self._typed(item)
            if node is not None:
                self.nodes.append(node)
                return
            from .jsonlist import decode

            item = decode(item, self.origin)
        i = len(self.nodes)
        if not isinstance(item, dict):
            raise InputError(f"{self.origin}: item {i} is not an object")
        if item.get("kind", "Node") != "Node":
            raise InputError(f"{self.origin}: item {i} is a {str(item.get('kind'))[:60]}, not a Node")
        self.nodes.append(self.node(item))

    def run(self, array: memoryview) -> list[Node] | None:
        """The records of a run of items (the JSON array `array`), decoded in one pass (a `jsonlist.RunDecoder`);
        None when one of them is not of the usual shape, so that each is read (`add`) and refused, if it must
        be, with the message naming its field. Not one JSON array: msgspec's DecodeError."""
        try:
            found = list(map(self._record, self._json.decode_run(array)))
        except self._json.ValidationError:
            return None
        return cast("list[Node]", found) if all(found) else None

    def _typed(self, raw: RawItem) -> Node | None:
        """The record of a Node whose fields all have the types the API serves (msgspec checks them as it
        decodes only those fields: about a tenth of reading it as dicts); None for anything else, which `node`
        then reads or refuses with its messages."""
        try:
            obj = self._json.decode(raw)
        except self._json.DECODE_ERRORS:
            return None
        return self._record(obj)

    def _record(self, obj: Any) -> Node | None:
        """`_typed`'s record from the decoded fields (a `nodejson.NodeJSON`)."""
        meta, spec, status = obj.metadata, obj.spec, obj.status
        if obj.kind != "Node" or not meta.name:
            return None
        ready = True
        others: tuple[tuple[str, str, str, str], ...] = ()
        if status.conditions:  # one walk for both (a comprehension and a call per node: 0.2 CPU s at 100,000)
            ready = False
            found: list[tuple[str, ...]] = []
            for c in status.conditions:
                if c.type == "Ready":
                    ready = ready or c.status == "True"
                elif c.type not in KUBELET_CONDITIONS:
                    found.append((c.type, c.status, c.reason, c.message))
            others = self._conditions(found) if found else ()
        allocatable = self._decoded(status.allocatable, self._json.decode_allocatable, dict)
        taints = self._decoded(spec.taints, self._json.decode_taints, tuple)
        if allocatable is None or taints is None:
            return None
        # `_strings_of`'s copy inlined: at 100,000 nodes its 200,000 calls cost 0.06 CPU s (6% of reading)
        labels, annotations = meta.labels, meta.annotations
        labels = self._shared_strings(labels) if self._label_keys is None else self._kept(labels, self._label_keys)
        if annotations:
            annotations = self._shared_strings(annotations) if self._annotation_keys is None else \
                self._kept(annotations, self._annotation_keys)
        return Node(self._same(meta.name, meta.name), labels, annotations or EMPTY,
                    spec.providerID if self._provider_ids else "", allocatable, taints, ready, spec.unschedulable, others)

    def done(self) -> list[Node]:
        """The nodes read, refusing a list that names a node twice."""
        names = {n.name for n in self.nodes}
        if len(names) != len(self.nodes):
            dupes = sorted(name for name, count in Counter(n.name for n in self.nodes).items() if count > 1)
            raise InputError(f"{self.origin}: node(s) listed twice: {', '.join(dupes[:5])}")
        return self.nodes

    def _strings_of(self, value: Any, where: str) -> dict[str, str]:
        """A string-to-string copy with one copy of each key and value (a cluster repeats them); YAML may have
        typed `gpu: 8` as an int, JSON from the API never does. Not a mapping of scalars: an `InputError`."""
        if type(value) is dict and set(map(type, value)) <= {str} and set(map(type, value.values())) <= {str}:
            return self._shared_strings(value)
        from .documents import mapping, string_map

        if type(value) is not dict:
            return mapping(value, where)  # {} for null, else the error
        return self._shared_strings(string_map(value, where))

    def _shared_strings(self, value: Mapping[str, str]) -> dict[str, str]:
        """A copy of a mapping of strings with this list's one copy of each (no call per entry)."""
        same, values = self._same, value.values()
        return dict(zip(map(same, value, value), map(same, values, values)))

    def _kept(self, value: Mapping[str, str], keys: _KeyTest | None) -> Mapping[str, str]:
        """The entries of `value` whose keys `keys` keeps, with this list's strings: equal projections are one
        mapping (the first SHARED_PROJECTIONS distinct ones), and an empty one is EMPTY. Without a test,
        `value` itself, already a copy with this list's strings (`_strings_of`)."""
        if keys is None:
            return value
        kept = tuple(filter(keys.__getitem__, value))
        if not kept:
            return EMPTY
        items = tuple(zip(kept, map(value.__getitem__, kept)))
        found = self._projections.get(items)
        if found is None:
            found = self._shared_strings(dict(items))
            if len(self._projections) < SHARED_PROJECTIONS:
                self._projections[items] = found
        return found

    def _taints(self, taints: list[dict[str, str]]) -> tuple[Mapping[str, str], ...]:
        """One tuple of each distinct list of (shared) taints: the nodes of a pool carry the same ones. Keyed
        by the taints' identities, which stay unique: every taint in a kept tuple stays alive with it."""
        return self._taint_lists.setdefault(tuple(map(id, taints)), tuple(taints)) if taints else ()

    def _conditions(self, found: list[tuple[str, ...]]) -> tuple[tuple[str, str, str, str], ...]:
        """Other tools' conditions (not the kubelet's), one tuple of each distinct list."""
        kept = tuple(tuple(map(self._same, c, c)) for c in found if c[0] not in KUBELET_CONDITIONS)
        return self._condition_lists.setdefault(kept, kept) if kept else ()  # type: ignore[arg-type]  # 4 fields each

    def _decoded(self, text: Any, decode: Callable[[Any], Any], keep: Callable[[Any], Any]) -> Any:
        """A field kept as its JSON text (allocatable, taints), decoded and checked once per distinct text: the
        nodes of a pool share one copy. None when it does not have the type the API serves."""
        key = (decode, bytes(text))
        found = self._texts.get(key, self)
        if found is self:
            try:
                found = keep(decode(text))
            except self._json.DECODE_ERRORS:
                found = None
            self._texts[key] = found
        return found

    def _shared(self, value: Any, copy: Callable[[Any, str], dict[str, Any]], where: str) -> dict[str, Any]:
        """One `copy` of each distinct small mapping (allocatable, a taint): thousands of nodes share a few."""
        if type(value) is not dict or not value:
            return copy(value, where)
        try:
            key = (copy, tuple(value.items()))
            found = self._maps.get(key)
        except TypeError:  # an unhashable value: keep a copy of its own
            return copy(value, where)
        if found is None:
            found = self._maps[key] = copy(value, where)
        return found


class _KeyTest(dict[str, bool]):
    """A test of label or annotation keys, remembered per key (a cluster's nodes repeat a few dozen), so that
    `filter` applies it to a node's keys without a Python call per key."""

    def __init__(self, test: Callable[[str], bool]) -> None:
        super().__init__()
        self.test = test

    def __missing__(self, key: str) -> bool:
        found = self[key] = bool(self.test(key))
        return found


def _taint(value: Any, where: str) -> dict[str, str]:
    """A taint as its own copy of strings (`timeAdded` and all)."""
    from .documents import string_map

    return dict(string_map(value, where))


def list_items(data: Any, kind: str, origin: str) -> Iterable[Any]:
    """The objects of a `kubectl get <kind>s -o yaml|json` document (a List), of one object, or of a list."""
    if isinstance(data, Mapping) and data.get("kind") == kind:
        return [data]
    if isinstance(data, Mapping) and isinstance(data.get("items"), list):
        items: list[Any] = data["items"]
        return items
    if isinstance(data, list):
        return data
    raise InputError(f"{origin}: expected a {kind}List (kubectl get {kind.lower()}s -o yaml) or a list of {kind}s")


def parse_nodes(data: Any, origin: str) -> list[Node]:
    """Nodes from a `kubectl get nodes -o yaml|json` document (a List), one Node, or a plain list."""
    return nodes_from_pages([list_items(data, "Node", origin)], origin)


def nodes_from_pages(pages: Iterable[Iterable[Any]], origin: str, reader: NodeReader | None = None) -> list[Node]:
    """Nodes from a paged list, each page turned into compact records before the next is read (with the
    cyclic collector paused: records and parsed items hold no cycles; 100,000 nodes read about 10% faster)."""
    reader = reader or NodeReader(origin)
    with paused_gc():
        for page in pages:
            for item in page:
                reader.add(item)
    return reader.done()


def load_nodes_file(path: str | Path, keep: Keep = ALL) -> list[Node]:
    """Nodes from a file, turned into compact records as they are read (see `read_items`), runs of items
    straight into records (`NodeReader.run`), keeping what `keep` says."""
    reader = NodeReader(str(path), keep)
    return nodes_from_pages([read_items(path, "Node", raw=True, runs=reader.run)], str(path), reader)


def read_items(path: str | Path, kind: str, raw: bool = False, runs: RunDecoder | None = None) -> Iterator[Any]:
    """The objects of a `kubectl get <kind>s -o json|yaml` file, one Node/Pod, or a list of them.

    A JSON List is streamed item by item (`labeler.io.jsonlist`), so memory follows what the caller keeps of each
    object, not the file: a live cluster's full node status is several hundred MB of JSON. Anything else
    (YAML, one object) is read whole by `load`. A file that can be read only once (stdin, a pipe, `<(...)`,
    /dev/stdin) is read into memory first, once, and then the same way. With `raw`, streamed items come as
    their JSON bytes (memoryviews) for the caller to decode, and with `runs` runs of them as it decodes them."""
    from .documents import load, read_document
    from .jsonlist import decode, raw_items

    origin = str(path)
    data = None if _regular(path) else read_bytes(path)
    if data is not None or _starts_json_object(path):
        with raw_items(path if data is None else io.BytesIO(data), origin, runs if raw else None) as items:
            if items is not None:
                yield from items if raw else (decode(item, origin) for item in items)
                return
    yield from list_items(read_document(path) if data is None else load(text_of(data, origin), origin), kind, origin)


def _regular(path: str | Path) -> bool:
    """Whether `path` is a regular file, which can be read twice (a peek, then the read); '-', a pipe or a
    device cannot."""
    try:
        return str(path) != "-" and stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return True  # the read reports it


def _starts_json_object(path: str | Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4096).lstrip().startswith(b"{")
    except OSError:
        return False  # read_document reports it
