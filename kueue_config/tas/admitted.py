"""Workloads Kueue has reserved quota for: what each holds, as Kueue's cache counts it.

A Workload with `status.admission` and its QuotaReserved condition True, neither finished nor deactivated,
holds quota in its ClusterQueue - per (flavor, resource), the `resourceUsage` of each PodSet assignment -
and, for a TAS PodSet, capacity in every domain of its `topologyAssignment`: per pod, the requests of its
pod template plus one `pods` slot. Kueue counts these instead of the Workload's pods (a pod carrying TAS
annotations is left out of the capacity pods take), so what is read here replaces those pods.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from labeler.errors import InputError, TopologyError
from labeler.io.documents import mapping, sequence, string_map, text
from labeler.topology.names import HOSTNAME

from .capacity import Resources, amount, pod_requests
from .quota import FlavorResource
from .workloads import check_pod_spec

@dataclass(frozen=True)
class DomainUsage:
    """Pods of one PodSet in one topology domain (leaf id as the TAS tree names it)."""

    leaf: str
    count: int
    requests: Mapping[str, int]


@dataclass
class Admitted:
    """One Workload holding quota: where, how much, and what preemption orders it by."""

    namespace: str
    name: str
    uid: str
    cluster_queue: str
    priority: int = 0
    reserved_at: str = ""  # the QuotaReserved transition (RFC 3339); preemption takes newer ones first
    created_at: str = ""
    evicted: bool = False
    quota: dict[FlavorResource, int] = field(default_factory=dict)
    tas: dict[str, list[DomainUsage]] = field(default_factory=dict)  # flavor -> domains

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    def uses(self, frs: Iterable[FlavorResource]) -> bool:
        """Kueue's `WorkloadUsesResources`."""
        return any(fr in self.quota for fr in frs)

    def tas_usage(self) -> dict[str, dict[str, Resources]]:
        """flavor -> leaf -> resources (a `pods` slot per pod included)."""
        out: dict[str, dict[str, Resources]] = {}
        for flavor, domains in self.tas.items():
            leaves = out.setdefault(flavor, {})
            for d in domains:
                used = leaves.setdefault(d.leaf, {})
                for key, value in {**d.requests, "pods": d.requests.get("pods", 0) + 1}.items():
                    used[key] = used.get(key, 0) + value * d.count
        return out


def _level_values(level: Mapping[str, Any], count: int, where: str) -> list[str]:
    if "universal" in level:
        return [text(level["universal"], f"{where}.universal")] * count
    individual = mapping(level.get("individual"), f"{where}.individual")
    prefix, suffix = str(individual.get("prefix") or ""), str(individual.get("suffix") or "")
    return [prefix + text(root, f"{where}.individual.roots[]") + suffix
            for root in sequence(individual.get("roots"), f"{where}.individual.roots")]


def decode_assignment(assignment: Mapping[str, Any], where: str = "topologyAssignment"
                      ) -> tuple[tuple[str, ...], dict[tuple[str, ...], int]]:
    """(levels, {domain values: pods}) from a v1beta2 `topologyAssignment` (slices of universal or individual
    values per level, and pod counts). With `kubernetes.io/hostname` lowest, Kueue records that level alone."""
    levels = tuple(text(lv, f"{where}.levels[]") for lv in sequence(assignment.get("levels"), f"{where}.levels"))
    domains: dict[tuple[str, ...], int] = {}
    for i, piece in enumerate(sequence(assignment.get("slices"), f"{where}.slices")):
        at = f"{where}.slices[{i}]"
        piece = mapping(piece, at)
        count = piece.get("domainCount")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InputError(f"{at}.domainCount: expected a count")
        values = [_level_values(mapping(lv, f"{at}.valuesPerLevel[]"), count, f"{at}.valuesPerLevel[]")
                  for lv in sequence(piece.get("valuesPerLevel"), f"{at}.valuesPerLevel")]
        pods = mapping(piece.get("podCounts"), f"{at}.podCounts")
        per_domain = [pods["universal"]] * count if "universal" in pods else list(
            sequence(pods.get("individual"), f"{at}.podCounts.individual"))
        if len(values) != len(levels) or any(len(v) != count for v in values) or len(per_domain) != count \
                or not all(isinstance(n, int) and not isinstance(n, bool) for n in per_domain):
            raise InputError(f"{at}: the values and pod counts do not match domainCount {count}")
        for j in range(count):
            domain = tuple(v[j] for v in values)
            domains[domain] = domains.get(domain, 0) + per_domain[j]
    return levels, domains


def leaf_id(levels: tuple[str, ...], values: tuple[str, ...]) -> str:
    """The TAS tree's leaf id for a domain of an assignment (the node name when the hostname is lowest)."""
    return values[-1] if levels and levels[-1] == HOSTNAME else "/".join(values)


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for c in status.get("conditions") or []:
        if isinstance(c, Mapping) and c.get("type") == kind:
            return c
    return None


def _true(status: Mapping[str, Any], kind: str) -> bool:
    found = _condition(status, kind)
    return bool(found and found.get("status") == "True")


def read_admitted(obj: Mapping[str, Any], origin: str) -> Admitted | None:
    """The quota a Workload object holds, or None when it holds none (pending, finished, deactivated)."""
    meta = mapping(obj.get("metadata"), f"{origin}: Workload metadata")
    name = str(meta.get("name") or "")
    where = f"{origin}: Workload {meta.get('namespace', '')}/{name}"
    spec = mapping(obj.get("spec"), f"{where}: spec")
    status = mapping(obj.get("status"), f"{where}: status")
    admission = status.get("admission")
    if not admission or not _true(status, "QuotaReserved") or _true(status, "Finished") or spec.get("active") is False:
        return None
    admission = mapping(admission, f"{where}: status.admission")
    templates = {str(ps.get("name")): mapping(ps, f"{where}: spec.podSets[]").get("template") or {}
                 for ps in sequence(spec.get("podSets"), f"{where}: spec.podSets") if isinstance(ps, Mapping)}
    reserved = _condition(status, "QuotaReserved") or {}
    priority = spec.get("priority")
    out = Admitted(str(meta.get("namespace") or "default"), name, str(meta.get("uid") or ""),
                   text(admission.get("clusterQueue"), f"{where}: status.admission.clusterQueue"),
                   priority if isinstance(priority, int) and not isinstance(priority, bool) else 0,
                   str(reserved.get("lastTransitionTime") or ""), str(meta.get("creationTimestamp") or ""),
                   _true(status, "Evicted"))
    for i, psa in enumerate(sequence(admission.get("podSetAssignments"), f"{where}: podSetAssignments")):
        at = f"{where}: status.admission.podSetAssignments[{i}]"
        psa = mapping(psa, at)
        flavors = string_map(psa.get("flavors"), f"{at}.flavors")
        for res, quantity in string_map(psa.get("resourceUsage"), f"{at}.resourceUsage").items():
            if res in flavors:
                fr = (flavors[res], res)
                out.quota[fr] = out.quota.get(fr, 0) + amount(res, quantity)
        if psa.get("topologyAssignment"):
            template = mapping(templates.get(str(psa.get("name")), {}), f"{at}: template")
            check_pod_spec(template.get("spec"), f"{at}: template.spec")
            single = pod_requests(template.get("spec") or {})
            levels, domains = decode_assignment(mapping(psa["topologyAssignment"], f"{at}.topologyAssignment"),
                                                f"{at}.topologyAssignment")
            for flavor in dict.fromkeys(flavors.values()):
                out.tas.setdefault(flavor, []).extend(
                    DomainUsage(leaf_id(levels, values), n, single) for values, n in domains.items())
    return out


def admitted_workloads(objects: Iterable[Any], origin: str) -> list[Admitted]:
    """Every Workload among `objects` that holds quota; a malformed one is an error naming it."""
    out = []
    for obj in objects:
        if not isinstance(obj, Mapping) or obj.get("kind") != "Workload":
            continue
        try:
            found = read_admitted(obj, origin)
        except InputError as exc:
            raise TopologyError(str(exc)) from None
        if found is not None:
            out.append(found)
    return out
