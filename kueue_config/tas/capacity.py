"""Free capacity per node, pod requests, and the node checks Kueue's TAS makes before placing a pod.

Amounts are integers in Kueue's units: CPU in millicores, everything else rounded up to whole units.
Free capacity is allocatable minus what every pod bound to the node and not finished holds: its requests
and one `pods` slot. Kueue gets there by two roads - a non-TAS pod (DaemonSets, static pods, anything
without TAS annotations) through its non-TAS usage cache, which charges requests plus one slot; a TAS
pod through its admitted Workload's topology assignment, which charges the same - so from the pods
alone the sum is the same.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable, Mapping, Sequence

from labeler.errors import InputError, TopologyError
from labeler.io.documents import mapping
from labeler.io.nodes import Node, list_items
from labeler.settings.quantities import stored

from .workloads import check_metadata, check_pod_spec

PODS = "pods"
POD_LEVEL = ("cpu", "memory")
HUGEPAGES = "hugepages-"
SCHEDULING_EFFECTS = ("NoSchedule", "NoExecute")
TERMINAL_PHASES = ("Succeeded", "Failed")
# Kueue's `utiltas.IsTAS`: a pod carrying one of these was placed by TAS
TAS_POD_ANNOTATIONS = tuple("kueue.x-k8s.io/podset-" + a for a in (
    "required-topology", "preferred-topology", "slice-required-topology", "slice-required-topology-constraints",
    "unconstrained-topology"))

Resources = dict[str, int]


@lru_cache(maxsize=65536)
def amount(resource: str, quantity: str) -> int:
    """One quantity in Kueue's units; cached because a cluster repeats the same few strings."""
    value = stored(str(quantity), f"{resource} quantity")
    return math.ceil(value * 1000) if resource == "cpu" else math.ceil(value)


def resource_list(raw: Mapping[str, Any] | None) -> Resources:
    return {str(k): amount(str(k), str(v)) for k, v in (raw or {}).items()}


def _add(total: Resources, more: Mapping[str, int]) -> None:
    for key, value in more.items():
        total[key] = total.get(key, 0) + value


def _max_into(total: Resources, other: Mapping[str, int]) -> None:
    for key, value in other.items():
        total[key] = max(total.get(key, 0), value)


def container_requests(container: Mapping[str, Any]) -> Resources:
    """Requests, with limits standing in for missing requests (as the API server and Kueue default them).

    The answer is shared between containers asking the same (50,000 pods have a few dozen shapes), so
    callers read it and never change it."""
    resources = container.get("resources") or {}
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
    try:
        return _requests_of(tuple(limits.items()), tuple(requests.items()))
    except TypeError:  # an unhashable quantity (a malformed file): reported by resource_list, not cached
        return _merged(limits, requests)


@lru_cache(maxsize=4096)
def _requests_of(limits: tuple[tuple[Any, Any], ...], requests: tuple[tuple[Any, Any], ...]) -> Resources:
    return _merged(dict(limits), dict(requests))


def _merged(limits: Mapping[str, Any], requests: Mapping[str, Any]) -> Resources:
    out = resource_list(limits)
    out.update(resource_list(requests))
    return out


def pod_requests(spec: Mapping[str, Any]) -> Resources:
    """A pod's effective requests, as Kubernetes computes them (`resourcehelpers.PodRequests`).

    Containers add up; a sidecar (init container with restartPolicy Always) adds to them and to every
    later init container; the largest init step wins if larger; pod-level requests (cpu, memory,
    hugepages) replace the containers' sum; the RuntimeClass overhead is added.
    """
    total: Resources = {}
    for container in spec.get("containers") or []:
        _add(total, container_requests(container or {}))
    sidecars: Resources = {}
    init_peak: Resources = {}
    for container in spec.get("initContainers") or []:
        reqs = container_requests(container or {})
        if (container or {}).get("restartPolicy") == "Always":
            _add(total, reqs)
            _add(sidecars, reqs)
            step = dict(sidecars)
        else:
            step = dict(reqs)
            _add(step, sidecars)
        _max_into(init_peak, step)
    _max_into(total, init_peak)
    pod_level = resource_list(((spec.get("resources") or {}).get("requests")))
    total.update({k: v for k, v in pod_level.items() if k in POD_LEVEL or k.startswith(HUGEPAGES)})
    _add(total, resource_list(spec.get("overhead")))
    return total


@dataclass(frozen=True)
class PodUsage:
    """A pod that holds capacity on a node: where and how much (its requests; the slot is added later).

    `tas`: TAS placed it (it carries TAS annotations), so Kueue counts its Workload instead; `owner`: the uid
    of its controller (a Job), which ties it to that job's Workload."""

    node: str
    requests: Mapping[str, int]
    tas: bool = False
    owner: str | None = None


def parse_pods(data: Any, origin: str) -> list[PodUsage]:
    """Bound, unfinished pods from `kubectl get pods -A -o yaml|json` (a List) or a list of Pods."""
    return pods_from_items(list_items(data, "Pod", origin), origin)


def pods_from_items(items: Iterable[Any], origin: str) -> list[PodUsage]:
    """Bound, unfinished pods from Pod objects, keeping only where each runs and what it holds."""
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or item.get("kind", "Pod") != "Pod":  # JSON and YAML give dicts
            raise TopologyError(f"{origin}: item {i} is not a Pod")
        try:
            check_metadata(item.get("metadata"), f"{origin}: item {i} metadata")
            check_pod_spec(item.get("spec"), f"{origin}: item {i} spec")
            phase = mapping(item.get("status"), f"{origin}: item {i} status").get("phase")
        except InputError as exc:
            raise TopologyError(str(exc)) from None
        spec = item.get("spec") or {}
        node = spec.get("nodeName")
        if not node or phase in TERMINAL_PHASES:
            continue
        try:
            requests = pod_requests(spec)
        except ValueError as exc:
            raise TopologyError(f"{origin}: item {i}: {exc}") from None
        meta = item.get("metadata") or {}
        owner = next((str(ref.get("uid")) for ref in meta.get("ownerReferences") or []
                      if isinstance(ref, dict) and ref.get("controller")), None)
        out.append(PodUsage(str(node), requests, is_tas_pod(meta.get("annotations") or {}), owner))
    return out


def is_tas_pod(annotations: Mapping[str, Any]) -> bool:
    """Kueue's `utiltas.IsTAS`: TAS placed the pod, so its Workload, not the pod, holds the capacity."""
    return any(a in annotations for a in TAS_POD_ANNOTATIONS)


def allocatable(nodes: Sequence[Node]) -> dict[str, Resources]:
    """Each node's allocatable in Kueue's units, by node name."""
    out = {}
    for node in nodes:
        try:
            out[node.name] = resource_list(node.allocatable)
        except ValueError as exc:
            raise TopologyError(f"node {node.name}: {exc}") from None
    return out


def free_capacity(nodes: Sequence[Node], pods: Iterable[PodUsage], tas_by_workload: bool = False
                  ) -> dict[str, Resources]:
    """Allocatable minus what bound pods hold (requests and one `pods` slot each), per node name.

    Pods on nodes not in `nodes` are ignored. With `tas_by_workload` (the admitted Workloads are known), pods
    TAS placed are left out, as Kueue leaves them out: their Workloads' topology assignments hold the capacity.
    """
    used: dict[str, Resources] = defaultdict(dict)
    for pod in pods:
        if tas_by_workload and pod.tas:
            continue
        _add(used[pod.node], pod.requests)
        _add(used[pod.node], {PODS: 1})
    free = allocatable(nodes)
    for name, capacity in free.items():
        for key, value in used.get(name, {}).items():
            capacity[key] = capacity.get(key, 0) - value
    return free


def count_in(requests: Sequence[tuple[str, int]], capacity: Mapping[str, int]) -> tuple[int, str]:
    """How many times `requests` fit in `capacity`, and the resource that limits it (Kueue's CountIn).

    `requests` are (name, amount) pairs sorted by name, so ties name the first resource, as Kueue does.
    """
    best, limiting = None, ""
    for name, need in requests:
        fits = 2**31 - 1 if need == 0 else max(0, capacity.get(name, 0) // need)
        if best is None or fits < best:
            best, limiting = fits, name
    return (best if best is not None else 2**31 - 1), limiting


def taint_string(taint: Mapping[str, Any]) -> str:
    """`key=value:effect` as Kubernetes prints a taint (Kueue's exclusion message uses it)."""
    text = str(taint.get("key", ""))
    if taint.get("value"):
        text += f"={taint['value']}"
    return text + (f":{taint['effect']}" if taint.get("effect") else "")


_DECIMAL = re.compile(r"-?(0|[1-9][0-9]*)\Z", re.ASCII)


def _decimal(text: str) -> int | None:
    """A taint or toleration value Kubernetes compares with Lt/Gt: a decimal int64 without leading zeros."""
    if not _DECIMAL.match(text) or text == "-0":
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Kubernetes' ToleratesTaint: effect and key match, and Exists, an equal value, or Lt/Gt numerically."""
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("key") and toleration.get("key") != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator in ("Lt", "Gt"):
        bound, value = _decimal(str(toleration.get("value") or "")), _decimal(str(taint.get("value") or ""))
        if bound is None or value is None:
            return False
        return value < bound if operator == "Lt" else value > bound
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated_taint(taints: Iterable[Mapping[str, Any]],
                      tolerations: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The first NoSchedule/NoExecute taint no toleration covers (PreferNoSchedule never blocks)."""
    for taint in taints:
        if taint.get("effect") in SCHEDULING_EFFECTS and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def _expression_matches(labels: Mapping[str, str], expr: Mapping[str, Any]) -> bool:
    key: Any = expr.get("key")  # the document's: a missing key is in no node's labels
    op, values = expr.get("operator"), [str(v) for v in expr.get("values") or []]
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and values:
        try:
            left, right = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return left > right if op == "Gt" else left < right
    return False


def _term_matches(labels: Mapping[str, str], node_name: str, term: Mapping[str, Any]) -> bool:
    """One node selector term: every label expression and field (only `metadata.name`) matches; empty never does."""
    expressions, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not expressions and not fields:
        return False
    names = {"metadata.name": node_name}
    return (all(_expression_matches(labels, e) for e in expressions)
            and all(f.get("key") in names and _expression_matches(names, f) for f in fields))


def affinity_matches(labels: Mapping[str, str], required: Mapping[str, Any] | None, node_name: str = "") -> bool:
    """Required node affinity (`nodeaffinity.NewNodeSelector`): any of its terms matches."""
    if not required:
        return True
    return any(_term_matches(labels, node_name, term) for term in required.get("nodeSelectorTerms") or [])
