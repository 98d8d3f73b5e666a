"""The Kueue TAS set-up in force (Topology, ResourceFlavors, ClusterQueues, LocalQueues) and level names.

The objects come from the YAML `topolabel kueue` wrote, from a snapshot (generated in memory the same
way), or from the cluster. A job reaches its Topology through its queue: LocalQueue -> ClusterQueue ->
ResourceFlavors -> `spec.topologyName`; this module follows that chain, and turns a level name a person
types (`block`) into the node label key Kueue wants in the annotation.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from labeler.errors import InputError, TopologyError
from labeler.io.documents import load_all, mapping, sequence, string_map, text
from labeler.io.files import read_text
from labeler.topology.model import Level
from labeler.topology.names import HOSTNAME

HOSTNAME_NAMES = ("hostname", "node", "host-name")


@dataclass(frozen=True)
class Flavor:
    """A ResourceFlavor as TAS reads it; `levels` is its Topology's keys when Kueue has both (a TAS flavor)."""

    name: str
    node_labels: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]
    topology: str | None
    node_taints: tuple[Mapping[str, Any], ...] = ()
    levels: tuple[str, ...] | None = None

    @property
    def tas(self) -> bool:
        return self.levels is not None


@dataclass(frozen=True)
class Queue:
    """What a job's queue reaches: its ClusterQueue's flavors in the order Kueue tries them.

    `covered` maps each flavor to the resources of its resource group; `cluster_queue` is None when no
    LocalQueue resolved and every known flavor stands in.
    """

    cluster_queue: str | None
    flavors: tuple[Flavor, ...]
    covered: Mapping[str, frozenset[str]] = field(default_factory=dict)
    local_queue: str | None = None

    @property
    def tas_only(self) -> bool:
        """Kueue's `isTASOnly`: every flavor is a TAS flavor, so PodSets without annotations use TAS too."""
        return bool(self.flavors) and all(f.tas for f in self.flavors)

    def only(self, flavor: str | None = None, topology: str | None = None) -> "Queue":
        """The queue narrowed to one flavor or one Topology's flavors (`--flavor`, `--topology`)."""
        kept = tuple(f for f in self.flavors if flavor in (None, f.name) and topology in (None, f.topology))
        return replace(self, flavors=kept)

    @classmethod
    def of(cls, flavors: Sequence[Flavor]) -> "Queue":
        """A ClusterQueue of these flavors in this order, in one resource group covering everything."""
        return cls("cq", tuple(flavors), {})


@dataclass
class TASSetup:
    """Kueue objects by name; a ClusterQueue maps to its (flavor, covered resources) in order."""

    topologies: dict[str, tuple[str, ...]] = field(default_factory=dict)
    flavors: dict[str, Flavor] = field(default_factory=dict)
    cluster_queues: dict[str, list[tuple[str, frozenset[str]]]] = field(default_factory=dict)
    local_queues: dict[tuple[str, str], str] = field(default_factory=dict)
    # the objects themselves, for what admission reads beyond flavors (quotas, policies, status)
    cluster_queue_objects: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    cohort_objects: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    local_queue_objects: dict[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    workload_priority_classes: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_objects(cls, objects: Iterable[Mapping[str, Any]], origin: str) -> "TASSetup":
        """The set-up from Kueue objects; a field of the wrong type is an error naming the object and field."""
        setup = cls()
        for obj in objects:
            if not isinstance(obj, Mapping) or not str(obj.get("apiVersion", "")).startswith("kueue.x-k8s.io/"):
                continue
            try:
                setup._add(obj, origin)
            except InputError as exc:
                raise TopologyError(str(exc)) from None
        for fname, flavor in setup.flavors.items():
            if flavor.topology in setup.topologies:
                setup.flavors[fname] = replace(flavor, levels=setup.topologies[flavor.topology])
        return setup

    def _add(self, obj: Mapping[str, Any], origin: str) -> None:
        kind = obj.get("kind")
        meta = mapping(obj.get("metadata"), f"{origin}: {str(kind)[:40]} metadata")
        name = text(meta.get("name") or "", f"{origin}: {str(kind)[:40]} metadata.name")
        where = f"{origin}: {kind} {name}"
        spec = mapping(obj.get("spec"), f"{where}: spec")
        if kind == "Topology":
            levels = tuple(text(lv.get("nodeLabel"), f"{where}: spec.levels[].nodeLabel")
                           for lv in (mapping(lv, f"{where}: spec.levels[]")
                                      for lv in sequence(spec.get("levels"), f"{where}: spec.levels"))
                           if lv.get("nodeLabel"))
            if not levels:
                raise TopologyError(f"{origin}: Topology {name} has no levels")
            self.topologies[name] = levels
        elif kind == "ResourceFlavor":
            tolerations = tuple(string_map(t, f"{where}: spec.tolerations[]")
                                for t in sequence(spec.get("tolerations"), f"{where}: spec.tolerations"))
            taints = tuple(string_map(t, f"{where}: spec.nodeTaints[]")
                           for t in sequence(spec.get("nodeTaints"), f"{where}: spec.nodeTaints"))
            topology = spec.get("topologyName")
            self.flavors[name] = Flavor(name, string_map(spec.get("nodeLabels"), f"{where}: spec.nodeLabels"),
                                        tolerations, None if topology is None else text(topology, f"{where}: spec.topologyName"),
                                        taints)
        elif kind == "ClusterQueue":
            groups = [mapping(g, f"{where}: spec.resourceGroups[]")
                      for g in sequence(spec.get("resourceGroups"), f"{where}: spec.resourceGroups")]
            self.cluster_queue_objects[name] = obj
            self.cluster_queues[name] = [
                (text(mapping(f, f"{where}: flavors[]").get("name"), f"{where}: flavors[].name"),
                 frozenset(text(r, f"{where}: coveredResources[]")
                           for r in sequence(g.get("coveredResources"), f"{where}: coveredResources")))
                for g in groups for f in sequence(g.get("flavors"), f"{where}: flavors")]
        elif kind == "LocalQueue":
            namespace = text(meta.get("namespace") or "default", f"{where}: metadata.namespace")
            self.local_queues[(namespace, name)] = text(spec.get("clusterQueue"), f"{where}: spec.clusterQueue")
            self.local_queue_objects[(namespace, name)] = obj
        elif kind == "Cohort":
            self.cohort_objects[name] = obj
        elif kind == "WorkloadPriorityClass":
            value = obj.get("value")
            if isinstance(value, bool) or not isinstance(value, int):
                raise TopologyError(f"{where}: value: expected an integer")
            self.workload_priority_classes[name] = value

    def queue(self, queue: str | None, namespace: str) -> Queue:
        """The flavors a job on `queue` can get, in the ClusterQueue's order (every flavor when it does not resolve)."""
        cq = self.local_queues.get((namespace, queue or ""))
        entries = self.cluster_queues.get(cq) if cq else None
        if entries is None:
            return Queue(None, tuple(self.flavors.values()))
        seen: dict[str, frozenset[str]] = {}
        for name, covered in entries:
            if name in self.flavors and name not in seen:
                seen[name] = covered
        return Queue(cq, tuple(self.flavors[n] for n in seen), seen, queue)

    def level_keys(self, queue: str | None, namespace: str, topology: str | None = None) -> list[tuple[str, ...]]:
        """The distinct level keys of the Topologies a job on `queue` can be placed in (or of `topology`)."""
        if topology:
            if topology not in self.topologies:
                raise TopologyError(f"no Topology {topology!r}; known: {', '.join(sorted(self.topologies)) or 'none'}")
            return [self.topologies[topology]]
        found = [f.levels for f in self.queue(queue, namespace).flavors if f.levels is not None]
        if not found:
            found = list(self.topologies.values())
        if not found:
            raise TopologyError("no Kueue Topology found; give --kueue-dir, --snapshot or a cluster with Kueue TAS")
        return list(dict.fromkeys(found))


def level_names(keys: Sequence[str], known: Iterable[Level] = ()) -> dict[str, str]:
    """Names a person may type for each level key: the snapshot's or config's names, and each key's last part.

    `topolabel.dev/block` answers to `block`; `kubernetes.io/hostname` also to `node`. A name shared by two
    keys is left out, so it can never pick the wrong one silently.
    """
    names: dict[str, set[str]] = {}
    for level in known:
        if level.label in keys:
            names.setdefault(level.name, set()).add(level.label)
    for key in keys:
        names.setdefault(key.rsplit("/", 1)[-1], set()).add(key)
        if key == HOSTNAME:
            for alias in HOSTNAME_NAMES:
                names.setdefault(alias, set()).add(key)
    return {name: next(iter(found)) for name, found in names.items() if len(found) == 1}


def resolve_level(level: str, keys: Sequence[str] | None, known: Iterable[Level] = ()) -> str:
    """The node label key for `level` (a name or a key), checked against the Topology's keys when known."""
    if keys is None:
        if "/" in level or level == HOSTNAME:
            return level
        raise TopologyError(f"level {level!r} is a name; give --kueue-dir, --snapshot or --kubeconfig so it can be "
                            "resolved through the Topology, or pass the node label key itself")
    if level in keys:
        return level
    names = level_names(keys, known)
    if level in names:
        return names[level]
    raise TopologyError(f"level {level!r} is not in the Topology; its levels are "
                        + ", ".join(f"{key} ({name})" for key in keys for name in [_name_of(key, names)]))


def _name_of(key: str, names: Mapping[str, str]) -> str:
    return next((n for n, k in names.items() if k == key and n not in HOSTNAME_NAMES), key)


def read_kueue_objects(path: str) -> list[dict[str, Any]]:
    """Every object in a directory of YAML files, or in one multi-document file."""
    target = Path(path)
    try:
        files = sorted([*target.glob("*.yaml"), *target.glob("*.yml")]) if target.is_dir() else [target]
    except OSError as exc:
        raise TopologyError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not files or not all(f.is_file() for f in files):
        raise TopologyError(f"{path}: no YAML files (run `topolabel kueue --output-dir {path}` first)")
    return [doc for file in files for doc in load_all(read_text(file), str(file)) if isinstance(doc, dict)]
