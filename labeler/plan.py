"""The label plan: which labels to set and remove on which nodes, computed without touching the cluster.

Safety rules, in one place:
- only keys topolabel wrote before (listed in the managed-labels annotation) are ever removed;
- a node the source did not place keeps every label, and is reported;
- a plan that rewrites or removes existing labels on more than a set share of nodes is refused unless forced.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from .errors import PlanRefused
from .model import Problem, Snapshot
from .nodes import Node

MANAGED_ANNOTATION = "topolabel.dev/managed-labels"


@dataclass(slots=True)  # a first labelling of 100,000 nodes holds 100,000 of them
class NodeChange:
    node: str
    set: dict[str, str] = field(default_factory=dict)
    remove: list[str] = field(default_factory=list)
    managed: list[str] = field(default_factory=list)
    disruptive: bool = False

    def patch(self) -> dict[str, Any]:
        """The JSON merge patch that makes this change: small, and touching no other key."""
        labels: dict[str, Any] = dict(self.set)
        labels.update({key: None for key in self.remove})
        return {"metadata": {"labels": labels, "annotations": {MANAGED_ANNOTATION: ",".join(self.managed)}}}

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "set": dict(self.set), "remove": list(self.remove)}


@dataclass
class Plan:
    changes: list[NodeChange]
    unchanged: int
    problems: list[Problem]
    total: int

    @property
    def disruptive(self) -> int:
        return sum(c.disruptive for c in self.changes)

    def to_dict(self) -> dict[str, Any]:
        return {"changes": [c.to_dict() for c in self.changes], "unchanged": self.unchanged,
                "problems": [p.to_dict() for p in self.problems]}


def managed_keys(node: Node) -> list[str]:
    raw = node.annotations.get(MANAGED_ANNOTATION, "")
    return [k for k in raw.split(",") if k]


def plan_node(node: Node, desired: dict[str, str]) -> NodeChange | None:
    """The change that brings one node to `desired`, or None when it is already there."""
    managed = sorted(desired)
    labels = node.labels
    to_set = {k: desired[k] for k in managed if labels.get(k) != desired[k]}
    before = managed_keys(node)
    to_remove = sorted(k for k in before if k not in desired and k in labels)
    if not to_set and not to_remove and before == managed:
        return None
    rewrites = any(k in node.labels for k in to_set)
    return NodeChange(node.name, to_set, to_remove, managed, disruptive=rewrites or bool(to_remove))


def make_plan(snapshot: Snapshot, nodes: Sequence[Node]) -> Plan:
    problems = list(snapshot.problems)
    reported = {p.node for p in problems if p.node}
    changes: list[NodeChange] = []
    unchanged = 0
    for node in sorted(nodes, key=lambda n: n.name):
        if node.name not in snapshot.nodes:
            if node.name not in reported:
                problems.append(Problem("plan", "not placed by the source; its labels are kept", node.name))
            unchanged += 1
            continue
        change = plan_node(node, snapshot.labels_for(node.name))
        if change is None:
            unchanged += 1
        else:
            changes.append(change)
    cluster = {n.name for n in nodes}
    for name in sorted(set(snapshot.nodes) - cluster):
        problems.append(Problem("plan", "placed by the source but not in the cluster", name))
    return Plan(changes, unchanged, problems, len(nodes))


def check_share(plan: Plan, max_fraction: float, force: bool = False) -> None:
    """Refuse a plan that rewrites or removes labels on too many nodes (new labels do not count)."""
    if force or plan.total == 0:
        return
    if plan.disruptive > max_fraction * plan.total:
        raise PlanRefused(
            f"the plan rewrites or removes labels on {plan.disruptive} of {plan.total} nodes, more than the "
            f"allowed {max_fraction:.0%} (plan.maxChangeFraction); check the source, then rerun with --force")
