"""Kueue objects in the cluster: what to create, apply or delete, and doing it.

Objects with immutable fields carry a hash of those fields in their names (`kueue_config.objects`), so a
change is a new object plus a moved ClusterQueue reference, never an edit the server refuses. A LocalQueue's
`spec.clusterQueue` is immutable too: it is replaced (deleted, then created) when no workload is queued in
it. Superseded objects that topolabel made are deleted only when nothing uses them: no admitted workload
holds quota in a ResourceFlavor or ClusterQueue, no workload waits in a LocalQueue, and no remaining
ClusterQueue, LocalQueue or ResourceFlavor refers to them. Objects topolabel did not make are never touched.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from kubernetes.client.exceptions import ApiException

from kueue_config.objects import KueueObjects
from labeler.cluster.kube import api_error
from labeler.settings.quantities import read_quantity
from labeler.topology.model import Problem
from labeler.topology.names import KUEUE_API_VERSION, is_managed

from .kubeapi import Kube

log = logging.getLogger(__name__)

API = f"/apis/{KUEUE_API_VERSION}"
PLURALS = {"Topology": "topologies", "ResourceFlavor": "resourceflavors", "Cohort": "cohorts",
           "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues"}
IMMUTABLE = frozenset({"Topology", "ResourceFlavor"})
DELETE_ORDER = ("LocalQueue", "ClusterQueue", "Cohort", "ResourceFlavor", "Topology")  # users before what they use
QUANTITIES = frozenset({"nominalQuota", "borrowingLimit", "lendingLimit"})  # compared by value
OPTIONAL = frozenset({"Cohort"})  # kinds an older Kueue does not serve; a 404 listing them means "none"
SOURCE = "kueue"

Key = tuple[str, str | None, str]
Obj = dict[str, Any]


def key(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return obj["kind"], meta.get("namespace"), meta["name"]


def describe(obj: Obj) -> str:
    kind, namespace, name = key(obj)
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def path(kind: str, namespace: str | None = None, name: str | None = None) -> str:
    scope = f"/namespaces/{namespace}" if namespace else ""
    return f"{API}{scope}/{PLURALS[kind]}" + (f"/{name}" if name else "")


def object_path(obj: Obj) -> str:
    return path(*key(obj))


def covers(have: Any, want: Any, field_name: str = "") -> bool:
    """True when `have` holds everything in `want`; extra keys (server defaults, status) do not count, nor
    how a quota is written: Kueue's webhook stores a created ClusterQueue's `4000` as `4k`."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(k in have and covers(have[k], v, k) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(have) == len(want) and all(covers(h, w) for h, w in zip(have, want))
    if field_name in QUANTITIES and have != want:
        return same_quantity(have, want)
    return have == want


def same_quantity(have: Any, want: Any) -> bool:
    try:
        return read_quantity(str(have)) == read_quantity(str(want))
    except (ValueError, ArithmeticError):
        return False


def _spec(obj: Obj) -> dict[str, Any]:
    return obj.get("spec") or {}


@dataclass
class Usage:
    """What workloads hold: read only when something might be deleted or replaced."""

    flavors: set[str] = field(default_factory=set)
    cluster_queues: set[str] = field(default_factory=set)
    local_queues: set[tuple[str, str]] = field(default_factory=set)
    unknown: str | None = None  # why workloads could not be read; then nothing counts as unused

    @classmethod
    def from_workloads(cls, workloads: Iterable[Obj]) -> "Usage":
        usage = cls()
        for wl in workloads:
            status = wl.get("status") or {}
            if any(c.get("type") == "Finished" and c.get("status") == "True" for c in status.get("conditions") or []):
                continue
            queue = _spec(wl).get("queueName")
            if queue:
                usage.local_queues.add(((wl.get("metadata") or {}).get("namespace") or "", queue))
            admission = status.get("admission") or {}
            if admission.get("clusterQueue"):
                usage.cluster_queues.add(admission["clusterQueue"])
            for assignment in admission.get("podSetAssignments") or []:
                usage.flavors.update((assignment.get("flavors") or {}).values())
        return usage

    def holder(self, obj: Obj, remaining: Sequence[Obj]) -> str | None:
        """Why `obj` is still in use (None when nothing uses it)."""
        kind, namespace, name = key(obj)
        if self.unknown:
            return f"workloads could not be read ({self.unknown})"
        if kind == "LocalQueue" and (namespace or "", name) in self.local_queues:
            return "workloads are queued in it"
        if kind == "ClusterQueue" and name in self.cluster_queues:
            return "admitted workloads use it"
        if kind == "ResourceFlavor" and name in self.flavors:
            return "admitted workloads hold quota in it"
        for other in remaining:
            if refers(other, kind, name):
                return f"{describe(other)} refers to it"
        return None


def refers(obj: Obj, kind: str, name: str) -> bool:
    spec = _spec(obj)
    if kind == "ClusterQueue" and obj["kind"] == "LocalQueue":
        return spec.get("clusterQueue") == name
    if kind == "ResourceFlavor" and obj["kind"] == "ClusterQueue":
        return any(f.get("name") == name for g in spec.get("resourceGroups") or [] for f in g.get("flavors") or [])
    if kind == "Topology" and obj["kind"] == "ResourceFlavor":
        return spec.get("topologyName") == name
    return False


@dataclass
class KueueChanges:
    apply: list[Obj] = field(default_factory=list)  # create or update, in dependency order
    replace: list[Obj] = field(default_factory=list)  # LocalQueues whose clusterQueue changes
    delete: list[Obj] = field(default_factory=list)  # superseded, unused, in DELETE_ORDER
    conflicts: list[str] = field(default_factory=list)  # generated objects that could not be put in place
    kept: list[str] = field(default_factory=list)  # superseded objects still in use


def superseded(desired: Sequence[Obj], existing: Sequence[Obj]) -> list[Obj]:
    wanted = {key(o) for o in desired}
    return [o for o in existing if is_managed(o) and key(o) not in wanted]


def needs_usage(desired: Sequence[Obj], existing: Sequence[Obj]) -> bool:
    """Workloads matter only when something may be deleted or a LocalQueue replaced."""
    have = {key(o): o for o in existing}
    moved = any(k[0] == "LocalQueue" and k in have and _spec(have[k]).get("clusterQueue") != _spec(o).get("clusterQueue")
                for o in desired for k in [key(o)])
    return moved or bool(superseded(desired, existing))


def plan_changes(desired: Sequence[Obj], existing: Sequence[Obj], usage: Usage | None = None) -> KueueChanges:
    usage = usage or Usage()
    have = {key(o): o for o in existing}
    changes = KueueChanges()
    for obj in desired:
        current = have.get(key(obj))
        if current is None:
            changes.apply.append(obj)
        elif not is_managed(current):
            changes.conflicts.append(f"{describe(obj)} exists and was not made by topolabel; left as it is")
        elif covers(current, obj):
            continue
        elif obj["kind"] in IMMUTABLE:
            changes.conflicts.append(f"{describe(obj)} differs from what topolabel generates, and Kueue does not "
                                     "allow changing it; delete it to have it made again")
        elif obj["kind"] == "LocalQueue" and _spec(current).get("clusterQueue") != _spec(obj).get("clusterQueue"):
            why = usage.holder(current, ())
            if why:
                changes.conflicts.append(f"{describe(obj)} should point at ClusterQueue "
                                         f"{_spec(obj).get('clusterQueue')}, which cannot be changed in place; "
                                         f"kept as it is because {why}")
            else:
                changes.replace.append(obj)
        else:
            changes.apply.append(obj)
    remaining = list(desired) + [o for o in existing if not is_managed(o)]
    old = superseded(desired, existing)
    for kind in DELETE_ORDER:
        for obj in (o for o in old if o["kind"] == kind):
            why = usage.holder(obj, remaining)
            if why:
                changes.kept.append(f"superseded {describe(obj)} is kept: {why}")
                remaining.append(obj)
            else:
                changes.delete.append(obj)
    return changes


@dataclass
class KueueResult:
    changes: KueueChanges
    writes: list[str] = field(default_factory=list)  # "created Topology x", "deleted ResourceFlavor y"
    errors: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[Problem]:
        return [Problem(SOURCE, m) for m in self.changes.conflicts + self.changes.kept + self.errors]


class KueueSync:
    """Reads the Kueue objects, applies the plan; deletes only after every create and update succeeded.

    It remembers what the last clean run left on the server (`applied`), so an unchanged generation costs
    no call between full passes, and the problems and object count the operator's status shows.
    """

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.applied: list[Obj] | None = None
        self.problems: list[Problem] = []
        self.count = 0
        self.missing_namespaces: set[str] = set()  # LocalQueues could not be written: their namespace is not there

    def forget(self) -> None:
        """The server's objects are unknown (generation or a read failed): the next sync reads them again."""
        self.applied = None

    def sync(self, generated: KueueObjects, verify: bool) -> KueueResult | None:
        """Bring the server to `generated`; None when it is what the last clean run applied and `verify`
        (a full pass reads the server anyway) is off. ApiException when the objects cannot be read."""
        if not verify and generated.objects == self.applied:
            return None
        self.missing_namespaces = set()
        try:
            result = self.run(generated.objects)
        except ApiException:
            self.forget()
            raise
        self.applied = None if result.errors else generated.objects
        self.problems = generated.problems + result.problems
        self.count = len(generated.objects)
        return result

    def existing(self) -> list[Obj]:
        out = []
        for kind in PLURALS:
            try:
                listed = self.kube.list(path(kind))
            except ApiException as exc:
                if exc.status != 404 or kind not in OPTIONAL:
                    raise
                listed = []
            for obj in listed:
                obj.setdefault("kind", kind)
                out.append(obj)
        return out

    def usage(self) -> Usage:
        try:
            return Usage.from_workloads(self.kube.list(f"{API}/workloads"))
        except ApiException as exc:
            if exc.status == 404:
                return Usage()  # no Workload kind served: nothing can be admitted
            return Usage(unknown=api_error(exc))

    def run(self, desired: Sequence[Obj]) -> KueueResult:
        existing = self.existing()
        usage = self.usage() if needs_usage(desired, existing) else None
        result = KueueResult(plan_changes(desired, existing, usage))
        changes = result.changes
        replacing = {key(o) for o in changes.replace}
        applying = {key(o) for o in changes.apply}
        for obj in desired:  # in dependency order: Topology, ResourceFlavors, Cohorts, ClusterQueues, LocalQueues
            if key(obj) in replacing:
                self._write(result, "replaced", obj)
            elif key(obj) in applying:
                self._write(result, "applied", obj)
        if result.errors:
            return result
        for obj in changes.delete:
            self._write(result, "deleted", obj)
        return result

    def _write(self, result: KueueResult, verb: str, obj: Obj) -> None:
        where = object_path(obj)
        try:
            if verb == "applied":
                self.kube.apply(where, obj)
            else:
                self.kube.delete(where)
                if verb == "replaced":
                    self.kube.create(where.rsplit("/", 1)[0], obj)
        except ApiException as exc:
            namespace = key(obj)[1]
            if exc.status == 404 and namespace:
                self.missing_namespaces.add(namespace)
            result.errors.append(f"could not write {describe(obj)}: {api_error(exc)}")
            log.warning("kueue: %s", result.errors[-1], extra={"reason": "KueueWriteFailed"})
            return
        result.writes.append(f"{verb} {describe(obj)}")
        self.kube.metrics.kueue_writes.labels(kind=obj["kind"], verb=verb).inc()
