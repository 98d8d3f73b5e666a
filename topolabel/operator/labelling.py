"""Which nodes to patch, given the topology and the watched nodes.

The watch shows the operator's own patches a little later than they land, and an event sent just before a
patch can arrive just after it. So each successful patch is overlaid on the watched node until an event
shows it (or PENDING_SECONDS pass, after which the watched state is trusted again): no patch is sent twice,
even when a busy operator's watch lags minutes behind its writes. Events after that one are newer than the
patch, so a label changed by hand is put back at once.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Sequence

from labeler.cluster.apply import ApplyResult
from labeler.io.nodes import MANAGED_ANNOTATION, Node
from labeler.topology.model import Ownership, Problem, Snapshot
from labeler.topology.plan import NodeChange, Plan, make_plan, plan_node

PENDING_SECONDS = 300.0


@dataclass
class Pending:
    change: NodeChange
    until: float


class Labeller:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.pending: dict[str, Pending] = {}
        self.failed: dict[str, str] = {}
        self.conflicts: list[Problem] = []  # labels the last full plan left alone: topolabel did not write them

    def effective(self, node: Node) -> Node:
        """The node as it is once the operator's last patch to it shows."""
        entry = self.pending.get(node.name)
        if entry is None:
            return node
        change = entry.change
        if shows(node, change) or self.clock() > entry.until:
            del self.pending[node.name]
            return node
        labels = {k: v for k, v in node.labels.items() if k not in change.remove}
        labels.update(change.set)
        annotations = {**node.annotations, MANAGED_ANNOTATION: ",".join(change.managed)}
        return replace(node, labels=labels, annotations=annotations)

    def observe(self, node: Node) -> None:
        """A watch event: once one shows the last patch, the overlay goes (later events are newer)."""
        entry = self.pending.get(node.name)
        if entry is not None and shows(node, entry.change):
            del self.pending[node.name]

    def forget(self, name: str) -> None:
        self.pending.pop(name, None)
        self.failed.pop(name, None)

    def full_plan(self, snapshot: Snapshot, nodes: Iterable[Node], ownership: Ownership = Ownership()) -> Plan:
        plan = make_plan(snapshot, [self.effective(n) for n in nodes], ownership)
        self.conflicts = plan.conflicts
        return plan

    def plan_for(self, snapshot: Snapshot, nodes: Sequence[Node], total: int,
                 ownership: Ownership = Ownership()) -> Plan:
        """The plan for a few nodes (those an event touched); unplaced ones are left alone."""
        changes, unchanged = [], 0
        for node in nodes:
            if node.name not in snapshot.nodes:
                continue
            change = plan_node(self.effective(node), snapshot.labels_for(node.name), ownership=ownership)
            if change is None:
                unchanged += 1
            else:
                changes.append(change)
        return Plan(changes, unchanged, [], total)

    def record(self, plan: Plan, result: ApplyResult) -> None:
        until = self.clock() + PENDING_SECONDS
        written = set(result.written)
        for change in plan.changes:
            if change.node in written:
                self.pending[change.node] = Pending(change, until)
                self.failed.pop(change.node, None)
            elif change.node in result.failed:
                self.failed[change.node] = result.failed[change.node]

    def states(self, snapshot: Snapshot | None, nodes: Iterable[Node],
               ownership: Ownership = Ownership()) -> Counter[str]:
        """Nodes by state, for the metric and the status (see `metrics.NODE_STATES`)."""
        counts: Counter[str] = Counter()
        for node in nodes:
            if snapshot is None or node.name not in snapshot.nodes:
                counts["unplaced"] += 1
            elif plan_node(self.effective(node), snapshot.labels_for(node.name), ownership=ownership) is None:
                counts["labelled"] += 1
            elif node.name in self.failed:
                counts["failed"] += 1
            else:
                counts["pending"] += 1
        return counts


def shows(node: Node, change: NodeChange) -> bool:
    """True when the node already carries everything the change wrote."""
    return (all(node.labels.get(k) == v for k, v in change.set.items())
            and not any(k in node.labels for k in change.remove)
            and node.annotations.get(MANAGED_ANNOTATION) == ",".join(change.managed))
