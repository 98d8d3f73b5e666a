"""The label plan: which labels to set and remove on which nodes, computed without touching the cluster.

Safety rules, in one place:
- topolabel owns on a node only what it wrote: keys listed in the managed-labels annotation, and keys it
  adds. A key the node already carries with a value topolabel did not set is never claimed: with the
  same value it is left unclaimed, with another value it is left as it is and reported (a conflict);
- only owned keys are ever rewritten or removed: keys the snapshot's `Ownership` allows (topolabel's prefixes
  and the config's keys, an allowlist), and never a key of Kubernetes, a cloud or another tool, whatever the
  annotation says;
- a node the source did not place keeps every label, and is reported;
- a plan that rewrites or removes existing labels on more than a set share of nodes is refused unless forced;
  nodes in a contested claim (an HCA, chassis or switch two sources give to different nodes) count in that
  share too, though their labels stay: many of them at once is what an attack looks like.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from operator import attrgetter
from typing import Any, Sequence

from ..errors import PlanRefused, TopologyError
from ..gcpause import paused_gc
from ..io.nodes import MANAGED_ANNOTATION, Keep, Node
from .labelvalues import level_key_problems
from .model import Ownership, Problem, Snapshot


@dataclass(slots=True)  # a first labelling of 100,000 nodes holds 100,000 of them
class NodeChange:
    """One node's change. The changes of a plan share equal `remove` and `managed` lists, so they are never
    modified in place."""

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
        """For printing: shares this change's mapping and list."""
        return {"node": self.node, "set": self.set, "remove": self.remove}


@dataclass
class Plan:
    changes: list[NodeChange]
    unchanged: int
    problems: list[Problem]
    total: int
    conflicts: list[Problem] = field(default_factory=list)  # also in `problems`
    claimed: set[str] = field(default_factory=set)  # cluster nodes in a contested claim (their problems say which)

    @property
    def disruptive(self) -> int:
        return sum(c.disruptive for c in self.changes)

    def report(self) -> dict[str, Any]:
        """`to_dict` with the changes and problems as they are, for a writer that turns each into its mapping
        as it writes it (`topolabel.output.emit`): a first labelling of 1,000,000 nodes holds no million
        mappings at once."""
        return {"changes": self.changes, "unchanged": self.unchanged, "problems": self.problems}

    @paused_gc()  # a dict per change: 100,000 of them took 0.39 CPU s with the collector walking them, 0.02 without
    def to_dict(self) -> dict[str, Any]:
        return {"changes": [c.to_dict() for c in self.changes], "unchanged": self.unchanged,
                "problems": [p.to_dict() for p in self.problems]}


def owned_keys(node: Node, listed: list[str] | None = None, ownership: Ownership = Ownership()) -> set[str]:
    """Keys the annotation says topolabel wrote (`listed`, when already read), less any it does not own (a
    crafted or stale annotation, a key outside `ownership`)."""
    return {k for k in (node.managed() if listed is None else listed) if _ownable(k, ownership)}


@lru_cache(maxsize=4096)
def _ownable(key: str, ownership: Ownership) -> bool:
    """A key topolabel may own (remembered: every node of a cluster lists the same few)."""
    return ownership.owns(key) and not level_key_problems(key)


def conflicts(node: Node, desired: dict[str, str], owned: set[str] | None = None,
              ownership: Ownership = Ownership()) -> dict[str, str]:
    """Desired keys the node carries with another value that topolabel did not write: key -> that value
    (`owned`: the node's `owned_keys`, when already known)."""
    owned = owned_keys(node, ownership=ownership) if owned is None else owned
    labels = node.labels
    return {k: labels[k] for k in sorted(desired.keys() & labels.keys()) if k not in owned and labels[k] != desired[k]}


def plan_node(node: Node, desired: dict[str, str], before: list[str] | None = None,
              owned: set[str] | None = None, ownership: Ownership = Ownership()) -> NodeChange | None:
    """The change that brings one node to `desired` on the keys topolabel owns, or None when it is there
    (`before`, `owned`: the node's listed and owned keys, when the caller read them already)."""
    before = node.managed() if before is None else before
    owned = owned_keys(node, before, ownership) if owned is None else owned
    labels = node.labels
    managed = sorted(desired.keys() - (labels.keys() - owned))  # owned, or not on the node: never a foreign value
    to_set = {k: desired[k] for k in managed if labels.get(k) != desired[k]}
    to_remove = sorted((owned - desired.keys()) & labels.keys())
    if not to_set and not to_remove and before == managed:
        return None
    rewrites = not labels.keys().isdisjoint(to_set)
    return NodeChange(node.name, to_set, to_remove, managed, disruptive=rewrites or bool(to_remove))


def check_owned(snapshot: Snapshot, ownership: Ownership) -> None:
    """Every level key of the snapshot one topolabel may write (a snapshot file may name any key)."""
    for lv in snapshot.levels:
        why = ownership.problem(lv.label)
        if why:
            raise TopologyError(f"label key {lv.label!r} for level {lv.name!r} {why}")


def reads(snapshot: Snapshot, ownership: Ownership = Ownership()) -> Keep:
    """What `make_plan` reads of each node: the labels of the snapshot's level keys and of keys `ownership`
    allows (all it may write or remove), and the managed-labels annotation; names and the values topolabel
    wrote shared with the snapshot."""
    levels = frozenset(lv.label for lv in snapshot.levels)
    return Keep(labels=lambda key: key in levels or ownership.owns(key),
                annotations=MANAGED_ANNOTATION.__eq__, strings=snapshot.strings())


@paused_gc()  # a NodeChange and its dict and lists per node, no cycles: the collector would only walk them
def make_plan(snapshot: Snapshot, nodes: Sequence[Node], ownership: Ownership = Ownership(),
              consume: bool = False) -> Plan:
    """The changes that bring `nodes` to the snapshot, writing and removing only keys `ownership` allows.

    With `consume`, for a caller that has no further use for the snapshot, each node's values leave
    `snapshot.nodes` as its change is made, so a change takes the memory its values held (a first labelling of
    1,000,000 nodes: 260 MB less at plan's peak) and `snapshot.nodes` keeps only the nodes not in `nodes`."""
    check_owned(snapshot, ownership)
    problems = list(snapshot.problems)
    reported = {p.node for p in problems if p.node}
    planner = _Planner(snapshot, ownership)
    changes: list[NodeChange] = []
    unchanged = found = 0
    placed = len(snapshot.nodes)
    values_of = snapshot.nodes.pop if consume else snapshot.nodes.get
    for node in sorted(nodes, key=attrgetter("name")):
        values = values_of(node.name, None)
        if values is None:
            if node.name not in reported:
                problems.append(Problem("plan", "not placed by the source; its labels are kept", node.name))
            unchanged += 1
            continue
        found += 1
        change = planner.change(node, values)
        if change is None:
            unchanged += 1
        else:
            changes.append(change)
    if found < placed:  # a set of every name only then (1,000,000 nodes: 40 MB at plan's peak)
        missing = snapshot.nodes.keys() - {n.name for n in nodes}
        problems += [Problem("plan", "placed by the source but not in the cluster", name) for name in sorted(missing)]
    claims = {p.node for p in snapshot.problems if p.claim and p.node}
    claimed = {n.name for n in nodes if n.name in claims} if claims else set()
    return Plan(changes, unchanged, problems + planner.clashes, len(nodes), planner.clashes, claimed)


class _Planner:
    """The changes of one plan, node by node. What every node shares is worked out once: the label keys, sorted
    as changes list them. Equal `remove` and `managed` lists are one list (100,000 changes: 14 MB less)."""

    def __init__(self, snapshot: Snapshot, ownership: Ownership) -> None:
        self.pairs = sorted((lv.label, lv.name) for lv in snapshot.levels)  # label key, level
        self.keys = [key for key, _ in self.pairs]
        self.lists: dict[tuple[str, ...], list[str]] = {(): [], tuple(self.keys): self.keys}
        self.clashes: list[Problem] = []
        self.ownership = ownership

    def change(self, node: Node, values: dict[str, str]) -> NodeChange | None:
        """`node`'s change to the labels for its level `values`, or None when it has them; clashes noted."""
        desired = {key: values[level] for key, level in self.pairs}
        if MANAGED_ANNOTATION not in node.annotations and desired and node.labels.keys().isdisjoint(desired):
            return NodeChange(node.name, desired, self.lists[()], self.keys)  # never labelled, nothing in the way
        before = node.managed()
        owned = owned_keys(node, before, self.ownership)
        self.clashes += [Problem("plan", f"carries {key}={value!r}, which topolabel did not write; left as it is "
                                         f"(remove the label to let topolabel write {desired[key]!r})", node.name)
                         for key, value in conflicts(node, desired, owned).items()]
        change = plan_node(node, desired, before, owned)
        if change is not None:
            change.remove = self.lists.setdefault(tuple(change.remove), change.remove)
            change.managed = self.lists.setdefault(tuple(change.managed), change.managed)
        return change


MAX_CHANGE_FRACTION = 0.25  # plan.maxChangeFraction's default


def check_share(plan: Plan, max_fraction: float, force: bool = False,
                remedy: str = "check the source, then rerun with --force") -> None:
    """Refuse a plan that rewrites or removes labels on too many nodes (new labels do not count), counting the
    nodes in contested claims with them; the error ends with `remedy`, what the caller's user can do about it."""
    if force or plan.total == 0:
        return
    claimed = len(plan.claimed - {c.node for c in plan.changes if c.disruptive})
    if plan.disruptive + claimed > max_fraction * plan.total:
        more = (f" and {claimed} more are in contested claims (an HCA, chassis or switch that two sources give to "
                "different nodes; their problems say which)") if claimed else ""
        raise PlanRefused(
            f"the plan rewrites or removes labels on {plan.disruptive} of {plan.total} nodes{more}, more than the "
            f"allowed {max_fraction:.0%} (plan.maxChangeFraction); {remedy}")
