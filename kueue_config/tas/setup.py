"""The Kueue TAS set-up in force (Topology, ResourceFlavors, ClusterQueues, LocalQueues) and level names.

The objects come from the YAML `topolabel kueue` wrote, from a snapshot (generated in memory the same
way), or from the cluster. A job reaches its Topology through its queue: LocalQueue -> ClusterQueue ->
ResourceFlavors -> `spec.topologyName`; this module follows that chain, and turns a level name a person
types (`block`) into the node label key Kueue wants in the annotation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from labeler.documents import mapping, sequence, string_map, text
from labeler.errors import InputError, TopologyError
from labeler.model import Level
from labeler.names import HOSTNAME

HOSTNAME_NAMES = ("hostname", "node", "host-name")


@dataclass(frozen=True)
class Flavor:
    name: str
    node_labels: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]
    topology: str | None


@dataclass
class TASSetup:
    """Kueue objects by name; `queue_flavors` maps (namespace, LocalQueue) to its flavors in CQ order."""

    topologies: dict[str, tuple[str, ...]] = field(default_factory=dict)
    flavors: dict[str, Flavor] = field(default_factory=dict)
    cluster_queues: dict[str, list[str]] = field(default_factory=dict)
    local_queues: dict[tuple[str, str], str] = field(default_factory=dict)

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
            topology = spec.get("topologyName")
            self.flavors[name] = Flavor(name, string_map(spec.get("nodeLabels"), f"{where}: spec.nodeLabels"),
                                        tolerations, None if topology is None else text(topology, f"{where}: spec.topologyName"))
        elif kind == "ClusterQueue":
            groups = [mapping(g, f"{where}: spec.resourceGroups[]")
                      for g in sequence(spec.get("resourceGroups"), f"{where}: spec.resourceGroups")]
            self.cluster_queues[name] = [text(mapping(f, f"{where}: flavors[]").get("name"), f"{where}: flavors[].name")
                                         for g in groups for f in sequence(g.get("flavors"), f"{where}: flavors")]
        elif kind == "LocalQueue":
            namespace = text(meta.get("namespace") or "default", f"{where}: metadata.namespace")
            self.local_queues[(namespace, name)] = text(spec.get("clusterQueue"), f"{where}: spec.clusterQueue")

    def flavors_for(self, queue: str | None, namespace: str) -> list[Flavor]:
        """The TAS flavors a job on `queue` can get, in the ClusterQueue's order.

        Without a queue that resolves here, every flavor that names a Topology is a candidate.
        """
        cq = self.local_queues.get((namespace, queue or ""))
        names = self.cluster_queues.get(cq or "") if cq else None
        if names is None:
            names = list(self.flavors)
        return [self.flavors[n] for n in names if n in self.flavors and self.flavors[n].topology]

    def tas_only(self, queue: str | None, namespace: str) -> bool:
        """Whether every flavor of the queue's ClusterQueue is a TAS flavor (then untagged PodSets use TAS)."""
        cq = self.local_queues.get((namespace, queue or ""))
        names = self.cluster_queues.get(cq or "", list(self.flavors))
        return all(self.flavors[n].topology for n in names if n in self.flavors)

    def topology_for(self, queue: str | None, namespace: str, name: str | None = None) -> tuple[str, tuple[str, ...]]:
        """The Topology a job on `queue` is placed in: named, reached through the queue, or the only one."""
        if name:
            if name not in self.topologies:
                raise TopologyError(f"no Topology {name!r}; known: {', '.join(sorted(self.topologies)) or 'none'}")
            return name, self.topologies[name]
        reached = {f.topology for f in self.flavors_for(queue, namespace) if f.topology in self.topologies}
        candidates = sorted(reached) or sorted(self.topologies)
        if not candidates:
            raise TopologyError("no Kueue Topology found; give --kueue-dir, --snapshot or a cluster with Kueue TAS")
        if len(candidates) > 1:
            raise TopologyError(f"several Topologies apply ({', '.join(candidates)}); choose one with --topology")
        return candidates[0], self.topologies[candidates[0]]


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
