"""Fabric health from evidence to verdicts: the one path the operator and `topolabel health` both take.

Evidence comes from what topolabel already reaches: a discovery of the fabric (published by the collector, or
an `ibnetdiscover` capture) with its port error counters (`ibqueryerrors`), the port records the agents publish
on their Nodes (or sysfs trees, offline), and conditions other tools set on Nodes. Each becomes findings
(`providers.infiniband.evidence`, `providers.infiniband.portrecord`, `labeler.topology.isolation.condition_findings`),
and `labeler.topology.isolation.decide` turns them, with the history of earlier passes, into verdicts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from labeler.errors import SourceError
from labeler.io.nodes import Node
from labeler.settings.config import Config
from labeler.topology.isolation import Decision, Finding, History, condition_findings, decide
from providers.infiniband.evidence import Readings, fabric_evidence
from providers.infiniband.fabric import Fabric
from providers.infiniband.hosts import GuidMap, add_annotations
from providers.infiniband.place import Request
from providers.infiniband.portrecord import ANNOTATION as PORT_ANNOTATION, Record, decode, findings as port_findings
from providers.infiniband.portrecord import make_record, usual
from providers.infiniband.queryerrors import PortErrors
from providers.infiniband.sysfs import read_port_health

FABRIC_HOSTS, FABRIC_COUNTERS, PORTS = "fabricHosts", "fabricCounters", "ports"  # baselines kept in the history


@dataclass
class Evidence:
    """What one pass has to go on. Records by node come from sysfs trees (offline); without them the agents'
    annotations on the nodes are read (when the config says so)."""

    nodes: list[Node]
    fabric: Fabric | None = None
    fabric_origin: str = "ibnetdiscover"
    errors: PortErrors | None = None  # port error counters: as read (a file), or
    errors_at: float | None = None
    errors_rose: bool = False  # ... already how much they rose (the collector publishes that)
    records: dict[str, Record] = field(default_factory=dict)
    hca_pattern: str | None = None


@dataclass
class Assessment:
    decision: Decision
    history: History
    notices: list[str]
    findings: int

    def to_dict(self) -> dict[str, Any]:
        d = self.decision
        return {"isolated": d.isolated, "held": d.names("held"), "suspect": d.names("suspect"),
                "quarantined": [q.to_dict() for q in d.quarantined], "brake": d.refused,
                "nodes": [d.verdicts[n].to_dict() for n in sorted(d.verdicts)], "notices": self.notices}


def assess(cfg: Config, evidence: Evidence, history: History, now: float, sustained: bool = False) -> Assessment:
    """Every finding of this pass, then the decision; the history returned carries the new baselines."""
    h = cfg.health
    findings: list[Finding] = condition_findings(evidence.nodes, {c.type: c.status for c in h.conditions})
    notices: list[str] = []
    baselines = dict(history.baselines)
    records = dict(evidence.records)
    if h.agent and not records:
        records, bad = records_from_nodes(evidence.nodes)
        notices += bad
    if records:
        norm = usual(records.values())
        for node, record in sorted(records.items()):
            findings += port_findings(node, record, h.counters, norm)
    if evidence.fabric is not None:
        guids = GuidMap()
        add_annotations(guids, evidence.nodes)
        request = Request(evidence.nodes, guids, re.compile(evidence.hca_pattern) if evidence.hca_pattern else None,
                          evidence.fabric_origin)
        readings = None if evidence.errors is None else Readings(
            evidence.errors, None if evidence.errors_rose else baselines.get(FABRIC_COUNTERS), evidence.errors_at)
        seen = fabric_evidence(evidence.fabric, request, h.uplink_loss, h.counters, baselines.get(FABRIC_HOSTS),
                               readings)
        findings += seen.findings
        notices += seen.notices
        baselines[FABRIC_HOSTS] = {**{k: v for k, v in (baselines.get(FABRIC_HOSTS) or {}).items()
                                      if k in {n.name for n in evidence.nodes}}, **seen.hosts}
        if readings is not None and not evidence.errors_rose:
            baselines[FABRIC_COUNTERS] = seen.counters
    labels = {n.name: n.labels for n in evidence.nodes}
    decision, after = decide(findings, labels, cfg.health_policy(), History(history.nodes, baselines), now,
                             sustained)
    return Assessment(decision, after, notices, len(findings))


def records_from_nodes(nodes: list[Node]) -> tuple[dict[str, Record], list[str]]:
    """The agents' port records on the nodes, and a notice per record that cannot be read."""
    records, notices = {}, []
    for node in nodes:
        text = node.annotations.get(PORT_ANNOTATION)
        if text:
            try:
                records[node.name] = decode(text, f"node {node.name}: annotation {PORT_ANNOTATION}")
            except SourceError as exc:
                notices.append(str(exc))
    return records, notices


def records_from_sysfs(trees: Mapping[str, str | Path], counters: list[str], history: History,
                       now: float) -> dict[str, Record]:
    """Each node's record from its sysfs tree, the counters' increases against the reading the history kept
    (none on the first reading); the history's baselines take this reading."""
    kept = dict(history.baselines.get(PORTS) or {})
    records = {}
    for node, tree in sorted(trees.items()):
        ports = read_port_health(tree, counters)
        before = kept.get(node)
        window = now - before["at"] if before else 0.0
        records[node] = make_record(ports, before["counters"] if before else None, window, now)
        kept[node] = {"at": now, "counters": {p.name: p.counters for p in ports}}
    history.baselines[PORTS] = kept
    return records
