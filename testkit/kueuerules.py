"""Would Kueue v0.19.2 accept this object? Its CRD schema (with CEL, via testkit.crdschema) and the rules its
validating webhooks add for ClusterQueues and Cohorts (pkg/webhooks in its Go module), checked client-side.

The webhook rules, as read from clusterqueue_webhook.go, cohort_webhook.go and common.go:
- a resource and a flavor each appear in one resource group only, across all groups;
- each flavor lists the group's coveredResources, in that order (the CEL rule checks only the count);
- quotas are not negative; borrowingLimit and lendingLimit only with a cohort (a Cohort: with a parent);
  a ClusterQueue's lendingLimit is at most its nominalQuota;
- at most 256 flavors and 256 covered resources across the groups, 512 flavor-resource pairs per group;
- a fair-sharing weight is not negative and, when not 0, more than 1e-9;
- preemption: reclaimWithinCohort Never with a borrowWithinCohort policy other than Never is refused.

The CRDs come from Kueue's Go module, as hack/build-test-stack links it (testkit.environment.kueue_crd).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

from testkit.environment import kueue_crd
from testkit.crdschema import validate

PLURALS = {"Topology": "topologies", "ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues",
           "LocalQueue": "localqueues", "Cohort": "cohorts"}


def crd(kind: str) -> str:
    return str(kueue_crd(PLURALS[kind]))


def problems(obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    """Everything Kueue's API (CRD schema, CEL, webhooks) would refuse in `obj` (empty when it accepts it)."""
    return validate(obj, crd(obj["kind"]), old=old) + webhook_problems(obj)


def webhook_problems(obj: dict[str, Any]) -> list[str]:
    spec = obj.get("spec") or {}
    if obj["kind"] == "ClusterQueue":
        out = _groups(spec.get("resourceGroups") or [], bool(spec.get("cohortName")), "cohort", lending_cap=True)
        pre = spec.get("preemption") or {}
        if pre.get("reclaimWithinCohort") == "Never" and (pre.get("borrowWithinCohort") or {}).get(
                "policy", "Never") != "Never":
            out.append("spec.preemption: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never")
        return out + _weight(spec.get("fairSharing"))
    if obj["kind"] == "Cohort":
        return (_groups(spec.get("resourceGroups") or [], bool(spec.get("parentName")), "parent", lending_cap=False)
                + _weight(spec.get("fairSharing")))
    return []


def _q(text: Any) -> Decimal:
    return Decimal(parse_quantity(str(text)))


def _groups(groups: list[dict[str, Any]], has_parent: bool, parent: str, lending_cap: bool) -> list[str]:
    out: list[str] = []
    resources: set[str] = set()
    flavors: set[str] = set()
    for i, group in enumerate(groups):
        covered = group.get("coveredResources") or []
        for name in covered:
            if name in resources:
                out.append(f"spec.resourceGroups[{i}].coveredResources: duplicate {name}")
            resources.add(name)
        pairs = 0
        for j, flavor in enumerate(group.get("flavors") or []):
            if flavor["name"] in flavors:
                out.append(f"spec.resourceGroups[{i}].flavors[{j}].name: duplicate {flavor['name']}")
            flavors.add(flavor["name"])
            pairs += len(flavor.get("resources") or [])
            for k, quota in enumerate((flavor.get("resources") or [])[:len(covered)]):
                where = f"spec.resourceGroups[{i}].flavors[{j}].resources[{k}]"
                if quota.get("name") != covered[k]:
                    out.append(f"{where}.name: must match the name in coveredResources")
                for field in ("nominalQuota", "borrowingLimit", "lendingLimit"):
                    if field in quota and _q(quota[field]) < 0:
                        out.append(f"{where}.{field}: must be greater than or equal to 0")
                for field in ("borrowingLimit", "lendingLimit"):
                    if field in quota and not has_parent:
                        out.append(f"{where}.{field}: must be nil when {parent} is empty")
                if lending_cap and "lendingLimit" in quota and _q(quota["lendingLimit"]) > _q(quota["nominalQuota"]):
                    out.append(f"{where}.lendingLimit: must be less than or equal to the nominalQuota")
        if pairs > 512:
            out.append(f"spec.resourceGroups[{i}]: more than 512 flavor-resource combinations")
    if len(flavors) > 256 or sum(len(g.get("flavors") or []) for g in groups) > 256:
        out.append("spec.resourceGroups: more than 256 flavors")
    if sum(len(g.get("coveredResources") or []) for g in groups) > 256:
        out.append("spec.resourceGroups: more than 256 covered resources")
    return out


def _weight(fair: dict[str, Any] | None) -> list[str]:
    if not fair or "weight" not in fair:
        return []
    weight = _q(fair["weight"])
    if weight < 0:
        return ["spec.fairSharing: must be greater than or equal to 0"]
    if 0 < weight <= Decimal("1e-9"):
        return ["spec.fairSharing: When not 0, weight must be > 10e-9"]
    return []
