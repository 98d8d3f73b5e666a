"""Fabric health in the operator: after each full pass, evidence -> verdicts (`topolabel.fabrichealth`) -> the
`FabricHealthy` condition on every node, the taint where the config asks for one, metrics, status and Events.

Ownership: the condition is written by strategic merge patch of the node's status (conditions merge by type)
with field manager `topolabel`, so no other condition is touched. Taints are one list per node with no merge
key, so a taint change reads the node and writes the whole list back with the resourceVersion it read (a
conflict reads again); the annotation `topolabel.dev/managed-taints` lists the taints topolabel added, and
only those are ever removed. A taint someone else set is left alone, even one with topolabel's key.

A restarted operator has no history: nodes whose condition says topolabel isolated them start isolated, with
the clean period counted from the restart, so a restart never lifts an isolation early.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

from kubernetes.client.exceptions import ApiException

from labeler.cluster.kube import api_error
from labeler.errors import TopolabelError
from labeler.io.nodes import Node
from labeler.settings.config import Config, TaintConfig
from labeler.topology.isolation import CONDITION, HELD, HEALTHY, ISOLATED, SUSPECT, History, NodeHistory, Verdict
from providers.infiniband import DEFAULT_NAMESPACE
from providers.infiniband.options import InfinibandOptions

from ..fabrichealth import FABRIC_HOSTS, Assessment, Evidence, assess
from .kubeapi import FIELD_MANAGER, Kube
from .metrics import Metrics
from .status import MAX_MESSAGE, now_iso

log = logging.getLogger(__name__)

MANAGED_TAINTS = "topolabel.dev/managed-taints"  # key:effect of each taint topolabel added, comma-separated
STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
REASONS = {"node": "FabricDegraded", "leaf": "LeafDegraded"}  # isolated, by scope; a domain: DomainQuarantined
STATE_REASONS = {HELD: "IsolationHeld", SUSPECT: "FabricSuspect", HEALTHY: "FabricOK"}
OURS = {"FabricDegraded", "LeafDegraded", "DomainQuarantined"}  # reasons of an isolation topolabel made
WRITTEN = OURS | set(STATE_REASONS.values())  # every reason topolabel writes
TAINT_ATTEMPTS = 5
LOGGED = 20


def condition_for(verdict: Verdict) -> tuple[str, str, str]:
    """(status, reason, message): False only where topolabel isolates the node, so that mapping the condition
    to a taint elsewhere (Node Readiness Controller) isolates exactly what topolabel would."""
    if verdict.state == ISOLATED:
        kind = verdict.scope.split(" ", 1)[0]
        reason = REASONS.get(kind, "DomainQuarantined")
        status = "False"
    else:
        reason, status = STATE_REASONS[verdict.state], "True"
    message = "; ".join(verdict.reasons) or "no fabric problem seen"
    return status, reason, message[:MAX_MESSAGE]


def taint_key(taint: Mapping[str, Any]) -> str:
    return f"{taint.get('key', '')}:{taint.get('effect', '')}"


def managed_taints(annotations: Mapping[str, str]) -> list[str]:
    return [t for t in (annotations.get(MANAGED_TAINTS) or "").split(",") if t]


def wants_taint(taint: TaintConfig | None, verdict: Verdict | None, node: Node) -> bool:
    return (taint is not None and verdict is not None and verdict.state == ISOLATED
            and all(node.labels.get(k) == v for k, v in taint.node_selector.items()))


def new_taints(taints: list[dict[str, Any]], managed: list[str], want: dict[str, Any] | None) -> tuple[list[dict[str, Any]], list[str]]:
    """The node's taints and the managed list after the change: topolabel's taints it no longer wants removed,
    the wanted one added unless someone else already set a taint with its key and effect (then not claimed)."""
    wanted = taint_key(want) if want else None
    kept = [t for t in taints if taint_key(t) not in managed or taint_key(t) == wanted]
    still = [m for m in managed if m == wanted and any(taint_key(t) == m for t in kept)]
    if want is not None and not any(taint_key(t) == wanted for t in kept):
        kept.append(dict(want))
        still.append(wanted)  # type: ignore[arg-type]
    return kept, still


@dataclass
class HealthReport:
    """What the pass found and did, for the status and Events."""

    assessment: Assessment | None = None
    conditions_written: int = 0
    tainted: list[str] = field(default_factory=list)
    untainted: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)

    def status(self) -> dict[str, Any]:
        a = self.assessment
        if a is None:
            return {}
        d = a.decision
        return {"isolated": len(d.isolated), "held": len(d.names(HELD)), "suspect": len(d.names(SUSPECT)),
                "quarantined": [q.name for q in d.quarantined][:50], "brake": d.refused or "",
                "isolatedNodes": d.isolated[:50]}


class HealthKeeper:
    """The history between passes and the writes of one pass (blocking: the controller runs it in a thread)."""

    def __init__(self, kube: Kube, metrics: Metrics, clock: Any = time.time) -> None:
        self.kube, self.metrics, self.clock = kube, metrics, clock
        self.history = History()
        self.seeded = False

    def run(self, cfg: Config, source: str, options: Mapping[str, Any], nodes: Mapping[str, Node]) -> HealthReport:
        report = HealthReport()
        if not cfg.health.enabled:
            self.retire(nodes, report)
            return report
        now = self.clock()
        if not self.seeded:
            self.seed(nodes.values(), now)
        evidence = Evidence(list(nodes.values()))
        self.read_fabric(cfg, source, options, evidence, report)
        report.assessment = assess(cfg, evidence, self.history, now)
        self.history = report.assessment.history
        report.notices += report.assessment.notices
        verdicts = report.assessment.decision.verdicts
        for name, node in sorted(nodes.items()):
            verdict = verdicts.get(name)
            if verdict is not None:
                self.write_condition(node, condition_for(verdict), report)
            self.write_taint(node, cfg.health.taint, verdict, report)
        self.metrics.set_health(report.assessment.decision)
        return report

    def seed(self, nodes: Any, now: float) -> None:
        """Nodes topolabel isolated before a restart stay isolated, the clean period counted from now; their
        absence from the fabric is looked for as if an earlier discovery had seen them."""
        self.seeded = True
        for node in nodes:
            found = node.condition(CONDITION)
            if found and found[0] == "False" and found[1] in OURS:
                self.history.nodes[node.name] = NodeHistory([], now, True)
                self.history.baselines.setdefault(FABRIC_HOSTS, {}).setdefault(node.name, [])

    def read_fabric(self, cfg: Config, source: str, options: Mapping[str, Any], evidence: Evidence,
                    report: HealthReport) -> None:
        """The published fabric (and its port error counters) the health section or the infiniband source
        names; a stale or unreadable one gives no fabric evidence this pass, and a notice."""
        from_source = source == "infiniband" and options.get("ib_fabric")
        name = cfg.health.fabric or (options.get("ib_fabric") if from_source else None)
        if not name:
            return
        from providers.infiniband.published import decode_errors, read_fabric_from

        namespace = cfg.health.fabric_namespace or (options.get("ib_namespace") if from_source else None) \
            or DEFAULT_NAMESPACE
        max_age = float(options.get("ib_max_age") or InfinibandOptions.ib_max_age) if from_source \
            else InfinibandOptions.ib_max_age
        try:
            found = read_fabric_from(self.kube.api, namespace, name, max_age)
            evidence.fabric = found.fabric
            evidence.fabric_origin = found.origin
            errors = decode_errors(found.info, found.origin)
        except TopolabelError as exc:
            report.notices.append(f"fabric health: no fabric evidence this pass: {exc}")
            return
        if errors is not None:
            evidence.errors, evidence.errors_at, evidence.errors_rose = *errors, True
        evidence.hca_pattern = options.get("hca_pattern") if from_source else None

    def write_condition(self, node: Node, wanted: tuple[str, str, str], report: HealthReport) -> None:
        current = node.condition(CONDITION)
        if current == wanted:
            return
        status, reason, message = wanted
        entry = {"type": CONDITION, "status": status, "reason": reason, "message": message,
                 "lastHeartbeatTime": now_iso()}
        if current is None or current[0] != status:
            entry["lastTransitionTime"] = now_iso()
        try:
            self.kube.request("patch", f"/api/v1/nodes/{node.name}/status", body={"status": {"conditions": [entry]}},
                              content_type=STRATEGIC, query=[("fieldManager", FIELD_MANAGER)])
            report.conditions_written += 1
        except ApiException as exc:
            self.fail(node.name, f"condition {CONDITION}: {api_error(exc)}", report)

    def write_taint(self, node: Node, taint: TaintConfig | None, verdict: Verdict | None,
                    report: HealthReport) -> None:
        want = {"key": taint.key, "effect": taint.effect} if taint and wants_taint(taint, verdict, node) else None
        managed = managed_taints(node.annotations)
        taints = [dict(t) for t in node.taints]
        if new_taints(taints, managed, want) == (taints, managed):
            return  # the cached node needs nothing: no read, no write
        for _ in range(TAINT_ATTEMPTS):
            try:
                obj = self.kube.request("get", f"/api/v1/nodes/{node.name}")
                meta = obj.get("metadata") or {}
                taints = list((obj.get("spec") or {}).get("taints") or [])
                managed = managed_taints(meta.get("annotations") or {})
                kept, still = new_taints(taints, managed, want)
                if (kept, still) == (taints, managed):
                    return
                body = {"metadata": {"resourceVersion": meta.get("resourceVersion"),
                                     "annotations": {MANAGED_TAINTS: ",".join(still) or None}},
                        "spec": {"taints": kept}}
                self.kube.request("patch", f"/api/v1/nodes/{node.name}", body=body, content_type=MERGE,
                                  query=[("fieldManager", FIELD_MANAGER)], retries=0)
            except ApiException as exc:
                if exc.status == 409:
                    continue  # changed since it was read: read it again
                self.fail(node.name, f"taint: {api_error(exc)}", report)
                return
            (report.tainted if want is not None else report.untainted).append(node.name)
            return
        self.fail(node.name, f"taint: still conflicting after {TAINT_ATTEMPTS} attempts", report)

    def retire(self, nodes: Mapping[str, Node], report: HealthReport) -> None:
        """With health off: topolabel's condition (one with a reason topolabel writes) and taints go; another
        tool's stay."""
        self.history, self.seeded = History(), False
        for name, node in sorted(nodes.items()):
            found = node.condition(CONDITION)
            if found is not None and found[1] in WRITTEN:
                try:
                    self.kube.request("patch", f"/api/v1/nodes/{name}/status",
                                      body={"status": {"conditions": [{"type": CONDITION, "$patch": "delete"}]}},
                                      content_type=STRATEGIC, query=[("fieldManager", FIELD_MANAGER)])
                    report.conditions_written += 1
                except ApiException as exc:
                    self.fail(name, f"condition {CONDITION}: {api_error(exc)}", report)
            if managed_taints(node.annotations):
                self.write_taint(node, None, None, report)
        self.metrics.set_health(None)

    def fail(self, node: str, message: str, report: HealthReport) -> None:
        self.metrics.errors.labels(kind="health").inc()
        report.failed[node] = message
        if len(report.failed) <= LOGGED:
            log.warning("fabric health: node %s: %s", node, message, extra={"node": node, "reason": "WriteFailed"})
