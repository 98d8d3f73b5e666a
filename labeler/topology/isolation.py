"""Which fabric observations take nodes out of placement: hysteresis per node, quarantine per domain, a brake.

Pure: findings (bad observations, one per node and reason, from `providers.infiniband` or node conditions),
the nodes' topology labels, the policy and the history of earlier passes in; a verdict per node and the next
history out. The operator and `topolabel health` call the same `decide`, so they give the same answer.

- A node is **degraded** after `degrade_after` bad observations within `window` seconds, and healthy again
  only after `recover_after` seconds without one (then its count starts afresh). An observation counts once: a counter window by the time
  the evidence was taken (`Finding.at`, so a record read on two passes is one observation), a state (a link
  down, a slow port, a leaf without uplinks) by the pass that saw it. A link that flaps adds one each time.
- A **domain** is quarantined when `nodes` (or a `fraction`) of its nodes at a level are degraded: all its
  nodes are isolated while that holds. A leaf switch that lost its uplinks reports every node behind it, so
  they go together.
- The **brake**: when isolating the new candidates would leave more than `max_fraction` of the nodes (or of
  one level's domains) isolated, nothing new is isolated in this pass; nodes isolated before stay isolated.
  A spine outage that takes a third of the fabric then drains nothing: it is reported instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from ..io.nodes import Node

# Port error counters (as /sys/class/infiniband/*/ports/*/counters names them) and the increase within one
# observation window that makes it a bad one: infiniband-diags' sample thresholds (error_thresholds), except
# link_downed, where one increase is a flap, and a link that flaps counts.
COUNTERS = {"symbol_error": 10, "link_error_recovery": 10, "link_downed": 1, "port_rcv_errors": 10,
            "port_rcv_remote_physical_errors": 100, "port_rcv_switch_relay_errors": 100, "port_xmit_discards": 100,
            "port_xmit_constraint_errors": 100, "port_rcv_constraint_errors": 100, "local_link_integrity_errors": 10,
            "excessive_buffer_overrun_errors": 10, "VL15_dropped": 100}
CONDITION = "FabricHealthy"  # the node condition the operator writes: False where topolabel isolates the node
HEALTHY, SUSPECT, ISOLATED, HELD = "healthy", "suspect", "isolated", "held"
NODE_SCOPE = "node"


@dataclass(frozen=True)
class Finding:
    """One bad observation about one node: what was seen, and where the trouble sits.

    `at` is when a counted window ended (a counter increase: the same record read twice is one observation);
    None for a state seen now (a port down, a link slow, a host gone from the fabric). `scope` names what
    takes the node along when it is not the node itself (`leaf p1-ibleaf-01`)."""

    node: str
    kind: str
    message: str
    at: float | None = None
    scope: str = NODE_SCOPE


@dataclass(frozen=True)
class DomainRule:
    """Quarantine a domain of `level` (label `key`) when `nodes` of its nodes, or `fraction` of them, are degraded."""

    level: str
    key: str
    nodes: int | None = None
    fraction: float | None = None

    def threshold(self, size: int) -> int:
        counts = [n for n in (self.nodes, math.ceil(self.fraction * size) if self.fraction is not None else None)
                  if n is not None]
        return max(1, min(counts)) if counts else size + 1


@dataclass(frozen=True)
class Policy:
    degrade_after: int = 3
    window: float = 1800.0
    recover_after: float = 3600.0
    max_fraction: float = 0.1
    domains: tuple[DomainRule, ...] = ()


@dataclass
class NodeHistory:
    """What earlier passes saw of one node: the times of its bad observations, and whether it is isolated."""

    bad: list[float] = field(default_factory=list)
    last_bad: float | None = None
    isolated: bool = False
    seen: list[str] = field(default_factory=list)  # what the last bad observation said

    def to_dict(self) -> dict[str, Any]:
        return {"bad": self.bad, "lastBad": self.last_bad, "isolated": self.isolated, "seen": self.seen}


@dataclass
class History:
    """Every node's history, and evidence baselines the callers keep with it (counters read last time)."""

    nodes: dict[str, NodeHistory] = field(default_factory=dict)
    baselines: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"version": 1, "nodes": {n: h.to_dict() for n, h in sorted(self.nodes.items())},
                "baselines": self.baselines}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "History":
        """From `to_dict`'s form; raises ValueError, TypeError or KeyError on any other (the caller names the file)."""
        if data.get("version") != 1:
            raise ValueError(f"version {data.get('version')!r}, expected 1")
        nodes = {}
        for name, item in dict(data.get("nodes") or {}).items():
            bad = [float(t) for t in item.get("bad") or []]
            last = item.get("lastBad")
            seen = [str(s)[:500] for s in item.get("seen") or []]
            nodes[str(name)] = NodeHistory(bad, None if last is None else float(last), bool(item.get("isolated")),
                                           seen)
        baselines = data.get("baselines", {})
        if not isinstance(baselines, dict):
            raise TypeError("baselines is not a mapping")
        return cls(nodes, baselines)


@dataclass
class Verdict:
    node: str
    state: str  # healthy, suspect (bad, not yet degraded), isolated, held (degraded; the brake kept it in)
    reasons: list[str] = field(default_factory=list)
    scope: str = NODE_SCOPE  # what took it out: the node, a leaf, or a quarantined domain (`block=b1`)

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "state": self.state, "healthy": self.state != ISOLATED, "scope": self.scope,
                "reasons": self.reasons}


@dataclass
class Quarantine:
    level: str
    value: str
    degraded: int
    members: list[str]

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def name(self) -> str:
        return f"{self.level}={self.value}"

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "value": self.value, "degraded": self.degraded, "nodes": self.size}


@dataclass
class Decision:
    verdicts: dict[str, Verdict]
    quarantined: list[Quarantine] = field(default_factory=list)
    refused: str | None = None  # the brake's message when it refused new isolations

    def names(self, state: str) -> list[str]:
        return sorted(n for n, v in self.verdicts.items() if v.state == state)

    @property
    def isolated(self) -> list[str]:
        return self.names(ISOLATED)

    def by_scope(self, state: str = ISOLATED) -> dict[str, int]:
        """Nodes in `state` per kind of scope: `node`, `leaf`, or a quarantined domain's level."""
        out: dict[str, int] = {}
        for v in self.verdicts.values():
            if v.state == state:
                kind = v.scope.split("=", 1)[0] if "=" in v.scope else v.scope.split(" ", 1)[0]
                out[kind] = out.get(kind, 0) + 1
        return out


def decide(findings: Iterable[Finding], nodes: Mapping[str, Mapping[str, str]], policy: Policy,
           history: History, now: float, sustained: bool = False) -> tuple[Decision, History]:
    """The verdicts for `nodes` (name -> labels) from this pass's findings and the history of earlier ones.

    `sustained` reads every finding as if it had been seen `degrade_after` times (`topolabel health` with no
    state file: what the operator would do once the evidence persists)."""
    found: dict[str, list[Finding]] = {}
    for f in findings:
        if f.node in nodes:
            found.setdefault(f.node, []).append(f)
    nodes_after: dict[str, NodeHistory] = {}
    degraded: dict[str, str] = {}  # node -> scope
    verdicts: dict[str, Verdict] = {}
    for name in nodes:
        mine = found.get(name, [])
        h = _observe(history.nodes.get(name), mine, policy, now)
        reasons = list(dict.fromkeys(f.message for f in mine))
        count = policy.degrade_after if sustained and mine else len(h.bad)
        if h.isolated and not (h.last_bad is not None and now - h.last_bad < policy.recover_after):
            h.bad, h.isolated, count = [], False, 0  # clean for the whole period: a fresh start
        if count >= policy.degrade_after or h.isolated:
            degraded[name] = NODE_SCOPE
            if not reasons and h.last_bad is not None:
                seen = f" ({'; '.join(h.seen)})" if h.seen else ""
                reasons = [f"recovering: last bad observation {now - h.last_bad:.0f}s ago{seen}, healthy after "
                           f"{policy.recover_after:.0f}s without one"]
        state = SUSPECT if (mine or h.bad) and name not in degraded else HEALTHY
        if state == SUSPECT and mine:
            reasons.append(f"{count} of {policy.degrade_after} bad observations within {policy.window:.0f}s")
        verdicts[name] = Verdict(name, state, reasons, next((f.scope for f in mine if f.scope != NODE_SCOPE),
                                                            NODE_SCOPE))
        if h.bad or h.isolated:
            nodes_after[name] = h
    for name in degraded:
        degraded[name] = verdicts[name].scope
    candidates = dict(degraded)
    quarantined = _quarantine(policy.domains, nodes, degraded, candidates, verdicts)
    before = {n for n, h in history.nodes.items() if h.isolated and n in nodes}
    new = set(candidates) - before
    refused = _brake(policy, len(nodes), candidates, new, quarantined, nodes) if new else None
    for name, scope in candidates.items():
        v = verdicts[name]
        if refused and name in new:
            v.state, v.scope = HELD, scope
            v.reasons.append(refused)
            continue
        v.state, v.scope = ISOLATED, scope
    for name, h in nodes_after.items():
        h.isolated = verdicts[name].state == ISOLATED
    for name in candidates:
        if verdicts[name].state == ISOLATED and name not in nodes_after:
            nodes_after[name] = NodeHistory(isolated=True)  # a healthy member of a quarantined domain
    if refused:
        quarantined = [q for q in quarantined if any(verdicts[n].state == ISOLATED for n in q.members)]
    return Decision(verdicts, quarantined, refused), History(nodes_after, history.baselines)


def _observe(old: NodeHistory | None, mine: Sequence[Finding], policy: Policy, now: float) -> NodeHistory:
    """The node's history with this pass's findings added and observations older than the window dropped."""
    h = NodeHistory(list(old.bad), old.last_bad, old.isolated, list(old.seen)) if old else NodeHistory()
    times = {now if f.at is None else f.at for f in mine}
    if mine:
        h.seen = list(dict.fromkeys(f.message for f in mine))
    h.bad = sorted(t for t in set(h.bad) | times if t >= now - policy.window)
    if times:
        h.last_bad = max([*times, *([h.last_bad] if h.last_bad is not None else [])])
    return h


def _quarantine(rules: Sequence[DomainRule], nodes: Mapping[str, Mapping[str, str]], degraded: Mapping[str, str],
                candidates: dict[str, str], verdicts: dict[str, Verdict]) -> list[Quarantine]:
    """Domains with enough degraded nodes: every member becomes a candidate, with the domain as its scope."""
    out = []
    for rule in rules:
        members: dict[str, list[str]] = {}
        for name, labels in nodes.items():
            value = labels.get(rule.key)
            if value is not None:
                members.setdefault(value, []).append(name)
        for value, names in sorted(members.items()):
            bad = sum(1 for n in names if n in degraded)
            if bad and bad >= rule.threshold(len(names)):
                q = Quarantine(rule.level, value, bad, names)
                out.append(q)
                for n in names:
                    if n not in degraded:
                        candidates.setdefault(n, q.name)
                        verdicts[n].reasons.append(f"domain {q.name} quarantined: {bad} of {len(names)} nodes degraded")
    return out


def _brake(policy: Policy, total: int, candidates: Mapping[str, str], new: set[str], quarantined: list[Quarantine],
           nodes: Mapping[str, Mapping[str, str]]) -> str | None:
    """The brake's refusal (None when the new isolations stay within the share)."""
    allowed = math.floor(policy.max_fraction * total)
    if len(candidates) > allowed:
        return (f"brake: isolating {len(new)} more node(s) would isolate {len(candidates)} of {total} "
                f"(more than {policy.max_fraction:.0%}, at most {allowed}); nothing new is isolated - a fault this "
                "wide (a spine, a subnet manager) needs a person")
    for rule in policy.domains:
        domains = {labels[rule.key] for labels in nodes.values() if rule.key in labels}
        held = [q for q in quarantined if q.level == rule.level]
        limit = math.floor(policy.max_fraction * len(domains))
        if held and len(held) > limit:
            return (f"brake: {len(held)} of {len(domains)} {rule.level} domains would be quarantined (more than "
                    f"{policy.max_fraction:.0%}, at most {limit}); nothing new is isolated")
    return None


def condition_findings(nodes: Iterable[Node], bad: Mapping[str, str]) -> list[Finding]:
    """A finding per node condition another tool set to a bad status (`bad`: condition type -> status)."""
    out = []
    for node in nodes:
        for type_, status, reason, message in node.conditions:
            if bad.get(type_) == status:
                why = f" ({reason}: {message})" if reason or message else ""
                out.append(Finding(node.name, "condition", f"condition {type_}={status}{why}"[:300]))
    return out
