"""What Kueue decided, read from the API: a Job's Workload, its admission and where TAS placed each pod set.

Kueue v1beta2 writes a pod set's placement as `status.admission.podSetAssignments[].topologyAssignment`:
`levels` (node label keys, coarsest first) and `slices`, each covering `domainCount` domains with, per level,
one `universal` value or `individual` values (`prefix` + each of `roots` + `suffix`), and `podCounts`
(`universal` for every domain, or `individual`). `decode` turns that into {domain: pods}, a domain being its
tuple of values, one per level, so tests can compare it with what topolabel predicts. When the Topology's
lowest level is kubernetes.io/hostname, Kueue records that level alone (a node name implies the rest), so
`levels` is then just ("kubernetes.io/hostname",).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kubernetes import client

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
Domain = tuple[str, ...]


@dataclass(frozen=True)
class PodSetAdmission:
    """One pod set as Kueue admitted it."""

    name: str
    count: int
    flavors: dict[str, str]  # resource -> ResourceFlavor
    levels: tuple[str, ...]  # empty without a topology assignment
    domains: dict[Domain, int]  # (value per level) -> pods placed there


def _level_values(level: dict[str, Any], count: int) -> list[str]:
    if "universal" in level:
        return [level["universal"]] * count
    individual = level["individual"]
    prefix, suffix = individual.get("prefix") or "", individual.get("suffix") or ""
    return [prefix + root + suffix for root in individual["roots"]]


def decode(assignment: dict[str, Any]) -> tuple[tuple[str, ...], dict[Domain, int]]:
    """(levels, {domain: pods}) from a v1beta2 topologyAssignment."""
    levels = tuple(assignment["levels"])
    domains: dict[Domain, int] = {}
    for piece in assignment.get("slices") or []:
        count = piece["domainCount"]
        values = [_level_values(level, count) for level in piece["valuesPerLevel"]]
        pods = piece["podCounts"]
        per_domain = [pods["universal"]] * count if "universal" in pods else pods["individual"]
        if len(values) != len(levels) or any(len(v) != count for v in values) or len(per_domain) != count:
            raise ValueError(f"malformed topology assignment slice: {piece}")
        for i in range(count):
            domain = tuple(v[i] for v in values)
            domains[domain] = domains.get(domain, 0) + per_domain[i]
    return levels, domains


def admission(workload: dict[str, Any]) -> dict[str, PodSetAdmission] | None:
    """Pod set name -> its admission, or None while the Workload is not admitted."""
    admitted = (workload.get("status") or {}).get("admission")
    if not admitted:
        return None
    out = {}
    for assigned in admitted.get("podSetAssignments") or []:
        levels, domains = decode(assigned["topologyAssignment"]) if assigned.get("topologyAssignment") else ((), {})
        out[assigned["name"]] = PodSetAdmission(assigned["name"], assigned.get("count", 0),
                                                dict(assigned.get("flavors") or {}), levels, domains)
    return out


def condition(workload: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (workload.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


def is_admitted(workload: dict[str, Any]) -> bool:
    found = condition(workload, "Admitted")
    return bool(found and found["status"] == "True")


def pending_message(workload: dict[str, Any]) -> str | None:
    """Why Kueue has not reserved quota for the Workload (its QuotaReserved=False message), if it says."""
    found = condition(workload, "QuotaReserved")
    return found["message"] if found and found["status"] == "False" else None


def workloads(api: client.ApiClient, namespace: str) -> list[dict[str, Any]]:
    resp = client.CustomObjectsApi(api).list_namespaced_custom_object(GROUP, VERSION, namespace, "workloads",
                                                                      _preload_content=False)
    return json.loads(resp.data)["items"]


def workload_of(api: client.ApiClient, namespace: str, owner_uid: str) -> dict[str, Any] | None:
    """The Workload Kueue made for the object with `owner_uid` (a Job, a JobSet), once it exists."""
    for item in workloads(api, namespace):
        if any(ref.get("uid") == owner_uid for ref in item["metadata"].get("ownerReferences") or []):
            return item
    return None


def event_messages(api: client.ApiClient, workload: dict[str, Any], reason: str = "Pending") -> list[str]:
    """The messages of the Events Kueue posted about a Workload for `reason`, oldest first: one "Pending"
    Event per scheduling cycle that did not admit it, with that cycle's QuotaReserved message."""
    meta = workload["metadata"]
    resp = client.CoreV1Api(api).list_namespaced_event(
        meta["namespace"], field_selector=f"involvedObject.kind=Workload,involvedObject.name={meta['name']},"
        f"reason={reason}", _preload_content=False)
    items = json.loads(resp.data)["items"]
    return [e["message"] for e in sorted(items, key=lambda e: e.get("eventTime") or e.get("firstTimestamp") or "")]

