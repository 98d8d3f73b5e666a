"""What the operator tells people: conditions, the TopologyLabeler's status, and Kubernetes Events.

The status is written only when its content changes and Events only mark changes (a condition turning,
labels or Kueue objects written), so a resync that finds nothing to do writes nothing at all.
"""

from __future__ import annotations

import datetime
import logging
import socket
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from kubernetes.client.exceptions import ApiException

from labeler.cluster.kube import api_error
from labeler.topology.model import Problem, Snapshot

from .kubeapi import Kube
from .metrics import NODE_STATES, Metrics

log = logging.getLogger(__name__)

GROUP, VERSION, PLURAL, KIND = "topolabel.dev", "v1alpha1", "topologylabelers", "TopologyLabeler"
# The TopologyLabeler is cluster-scoped, and the API server takes an Event about a cluster-scoped object only in
# `default` (the namespace client-go's recorder uses for them); in any other it answers 422.
EVENT_NAMESPACE = "default"
# In the order Ready reports them: the first that is not true gives Ready its reason and message.
CONDITIONS = ("ConfigValid", "SourceAvailable", "LabelsInSync", "KueueInSync")
MAX_PROBLEMS = 50
MAX_MESSAGE = 1024


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def resource_path(name: str, subresource: str = "") -> str:
    return f"/apis/{GROUP}/{VERSION}/{PLURAL}/{name}" + (f"/{subresource}" if subresource else "")


@dataclass
class Condition:
    type: str
    status: str
    reason: str
    message: str
    last_transition: str

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "status": self.status, "reason": self.reason, "message": self.message,
                "lastTransitionTime": self.last_transition}


class Conditions:
    def __init__(self) -> None:
        self.items: dict[str, Condition] = {}

    def set(self, type_: str, ok: bool, reason: str, message: str) -> Condition | None:
        """Record a condition; returns it when it turned (status or reason changed), for an Event."""
        status = "True" if ok else "False"
        old = self.items.get(type_)
        message = message[:MAX_MESSAGE]
        if old and old.status == status and old.reason == reason:
            old.message = message
            return None
        cond = Condition(type_, status, reason, message, now_iso())
        self.items[type_] = cond
        return cond if old or not ok else None  # the first True is no news

    def ok(self, type_: str) -> bool:
        cond = self.items.get(type_)
        return cond is not None and cond.status == "True"

    def to_list(self) -> list[dict[str, str]]:
        """The conditions and `Ready`, which is true when all are, and otherwise carries the reason and message
        of the first that is not (a condition not yet reported is `Pending`)."""
        out = [self.items[t].to_dict() for t in CONDITIONS if t in self.items]
        failing = [t for t in CONDITIONS if not self.ok(t)]
        if not failing:
            reason, message = "InSync", "labels and Kueue objects in sync"
        elif failing[0] in self.items:
            first = self.items[failing[0]]
            reason, message = first.reason, f"{first.type}: {first.message}"
        else:
            reason, message = "Pending", f"{failing[0]} not reported yet"
        out.append({"type": "Ready", "status": "False" if failing else "True", "reason": reason,
                    "message": message[:MAX_MESSAGE],
                    "lastTransitionTime": max((c["lastTransitionTime"] for c in out), default=now_iso())})
        return out


def status_body(conditions: Conditions, counts: Mapping[str, int], snapshot: Snapshot | None,
                problems: Iterable[Problem], source: str | None, kueue_objects: int,
                health: Mapping[str, Any] | None = None) -> dict[str, Any]:
    problems = list(problems)
    return {**({"health": dict(health)} if health else {}),
        "source": source or "",
        "levels": [{"name": lv.name, "label": lv.label} for lv in snapshot.levels] if snapshot else [],
        "nodes": {"total": sum(counts.get(s, 0) for s in NODE_STATES), **{s: counts.get(s, 0) for s in NODE_STATES}},
        "nodesLabelled": counts.get("labelled", 0),
        "kueueObjects": kueue_objects,
        "problems": [p.to_dict() for p in problems[:MAX_PROBLEMS]],
        "problemCount": len(problems),
        "conditions": conditions.to_list(),
    }


class Reporter:
    """Patches the TopologyLabeler's status and posts Events about it (in EVENT_NAMESPACE)."""

    def __init__(self, kube: Kube, metrics: Metrics, name: str) -> None:
        self.kube = kube
        self.metrics = metrics
        self.name = name
        self.resource: Mapping[str, Any] | None = None  # the TopologyLabeler, when it exists
        self.source: str | None = None  # the configured source, a field of every logged Event
        self.written: dict[str, Any] | None = None
        self.failed = False  # the last status write failed
        self.instance = socket.gethostname()

    def reference(self) -> dict[str, str]:
        ref = {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "name": self.name}
        uid = ((self.resource or {}).get("metadata") or {}).get("uid")
        return {**ref, "uid": uid} if uid else ref

    def event(self, type_: str, reason: str, message: str) -> None:
        """Post one Event; failing to post is logged, never raised (Events are auxiliary)."""
        (log.warning if type_ == "Warning" else log.info)("%s: %s", reason, message,
                                                          extra={"reason": reason, "source": self.source})
        stamp = now_iso()
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": f"{self.name}.{time.time_ns():x}", "namespace": EVENT_NAMESPACE},
                "involvedObject": self.reference(), "type": type_, "reason": reason,
                "message": message[:MAX_MESSAGE], "source": {"component": "topolabel"},
                "reportingComponent": "topolabel", "reportingInstance": self.instance,
                "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1}
        try:
            self.kube.create(f"/api/v1/namespaces/{EVENT_NAMESPACE}/events", body)
        except ApiException as exc:
            self.metrics.errors.labels(kind="events").inc()
            log.warning("could not post an Event (%s %s): %s", reason, message, api_error(exc))

    def transition(self, cond: Condition | None) -> None:
        if cond is not None:
            self.event("Normal" if cond.status == "True" else "Warning", cond.reason, cond.message)

    def publish(self, status: dict[str, Any], generation: int | None) -> None:
        """Write the status when it differs from the last one written (and the resource exists).
        `generation` is the spec generation the operator works with: one it refused does not count."""
        if self.resource is None:
            return
        status = {**status, "observedGeneration": generation} if generation is not None else dict(status)
        if status == self.written:
            return
        try:
            self.kube.merge_patch(resource_path(self.name, "status"), {"status": {**status, "lastSync": now_iso()}})
        except ApiException as exc:
            self.metrics.errors.labels(kind="status").inc()
            self.failed = True
            log.warning("could not write the status of %s %s: %s", KIND, self.name, api_error(exc))
            return
        self.failed = False
        self.written = status
