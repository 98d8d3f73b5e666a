"""Kueue v0.19's quota: ClusterQueues and Cohorts as a tree of resource nodes, and the checks on it.

A node (ClusterQueue or Cohort) has quotas per (flavor, resource): nominal, borrowingLimit, lendingLimit.
Its subtree quota is its nominal plus what its children lend it (their subtree quota less what their
lending limit keeps local); its usage is what its workloads hold, and a cohort's is what its children use
beyond what they keep local. `available` is what a ClusterQueue can take now, climbing the tree within the
borrowing limits; `potential` is the most it could ever take (nothing in use). These follow
`pkg/cache/scheduler/resource_node.go`, and `lowest_fitting_height` the classical preemption's
`FindHeightOfLowestSubtreeThatFits`, which says how far up the tree a request has to borrow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from labeler.errors import InputError, TopologyError
from labeler.io.documents import mapping, sequence, text

from .capacity import amount

FlavorResource = tuple[str, str]  # (flavor, resource)


@dataclass(frozen=True)
class ResourceQuota:
    """One resource of one flavor in a ClusterQueue or Cohort."""

    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


def read_quotas(spec: Mapping[str, Any], where: str) -> dict[FlavorResource, ResourceQuota]:
    """The quotas of a ClusterQueue's or Cohort's `spec.resourceGroups`, in Kueue's units."""
    out: dict[FlavorResource, ResourceQuota] = {}
    try:
        for group in sequence(spec.get("resourceGroups"), f"{where}: spec.resourceGroups"):
            for flv in sequence(mapping(group, f"{where}: resourceGroups[]").get("flavors"), f"{where}: flavors"):
                flv = mapping(flv, f"{where}: flavors[]")
                name = text(flv.get("name"), f"{where}: flavors[].name")
                for res in sequence(flv.get("resources"), f"{where}: flavors[{name}].resources"):
                    res = mapping(res, f"{where}: flavors[{name}].resources[]")
                    rname = text(res.get("name"), f"{where}: flavors[{name}].resources[].name")

                    def limit(key: str) -> int | None:
                        return None if res.get(key) is None else amount(rname, str(res[key]))
                    out[(name, rname)] = ResourceQuota(amount(rname, str(res.get("nominalQuota", 0))),
                                                       limit("borrowingLimit"), limit("lendingLimit"))
    except InputError as exc:
        raise TopologyError(str(exc)) from None
    return out


@dataclass(eq=False)
class Node:
    """A ClusterQueue or a Cohort in the quota tree."""

    name: str
    is_cohort: bool
    quotas: dict[FlavorResource, ResourceQuota] = field(default_factory=dict)
    parent: "Node | None" = None
    cohorts: list["Node"] = field(default_factory=list)
    queues: list["Node"] = field(default_factory=list)
    subtree: dict[FlavorResource, int] = field(default_factory=dict)
    usage: dict[FlavorResource, int] = field(default_factory=dict)

    @property
    def children(self) -> list["Node"]:
        return [*self.cohorts, *self.queues]

    def path_to_root(self) -> Iterator["Node"]:
        """The ancestors, parent first."""
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def root(self) -> "Node":
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def subtree_queues(self) -> list["Node"]:
        out = list(self.queues)
        for c in self.cohorts:
            out += c.subtree_queues()
        return out

    # -- resource_node.go ---------------------------------------------------------------------------
    def local_quota(self, fr: FlavorResource) -> int:
        """Capacity the lending limit keeps inside this subtree (never lent to the parent)."""
        lending = self.quotas.get(fr, ResourceQuota(0)).lending_limit
        return max(0, self.subtree.get(fr, 0) - lending) if lending is not None else 0

    def local_available(self, fr: FlavorResource) -> int:
        return max(0, self.local_quota(fr) - self.usage.get(fr, 0))

    def borrowing_with(self, fr: FlavorResource, value: int) -> bool:
        """Kueue's `BorrowingWith`: usage plus `value` would exceed the nominal (a cohort: its subtree quota)."""
        limit = self.subtree.get(fr, 0) if self.is_cohort else self.quotas.get(fr, ResourceQuota(0)).nominal
        return limit < self.usage.get(fr, 0) + value

    def available_raw(self, fr: FlavorResource) -> int:
        """Kueue's `available`: may be negative when over-admitted."""
        if self.parent is None:
            return self.subtree.get(fr, 0) - self.usage.get(fr, 0)
        parent = self.parent.available_raw(fr)
        borrowing = self.quotas.get(fr, ResourceQuota(0)).borrowing_limit
        if borrowing is not None:
            lq = self.local_quota(fr)
            stored = self.subtree.get(fr, 0) - lq
            used = max(0, self.usage.get(fr, 0) - lq)
            parent = min(stored - used + borrowing, parent)
        return self.local_available(fr) + parent

    def available(self, fr: FlavorResource) -> int:
        return max(0, self.available_raw(fr))

    def potential(self, fr: FlavorResource) -> int:
        """The most this node could take with nothing in use, within its borrowing limit."""
        if self.parent is None:
            return self.subtree.get(fr, 0)
        avail = self.local_quota(fr) + self.parent.potential(fr)
        borrowing = self.quotas.get(fr, ResourceQuota(0)).borrowing_limit
        if borrowing is not None:
            avail = min(self.subtree.get(fr, 0) + borrowing, avail)
        return avail

    def add_usage(self, fr: FlavorResource, value: int) -> None:
        local = self.local_available(fr)
        self.usage[fr] = self.usage.get(fr, 0) + value
        if self.parent is not None and value > local:
            self.parent.add_usage(fr, value - local)

    def remove_usage(self, fr: FlavorResource, value: int) -> None:
        stored = self.usage.get(fr, 0) - self.local_quota(fr)
        self.usage[fr] = self.usage.get(fr, 0) - value
        if stored <= 0 or self.parent is None:
            return
        self.parent.remove_usage(fr, min(value, stored))

    def within_nominal(self, frs: set[FlavorResource]) -> bool:
        """Kueue's `IsWithinNominalInResources`."""
        return all(self.subtree.get(fr, 0) >= self.usage.get(fr, 0) for fr in frs)

    def height(self) -> int:
        """Kueue's `getNodeHeight` (a cohort)."""
        best = min(len(self.children), 1)
        for c in self.cohorts:
            best = max(best, c.height() + 1)
        return best


def lowest_fitting_height(cq: Node, fr: FlavorResource, value: int) -> tuple[int, bool]:
    """How far up the cohort tree `value` of `fr` has to borrow (0: not at all), and whether a node above the
    one that suffices could be reclaimed from (`FindHeightOfLowestSubtreeThatFits`)."""
    if not cq.borrowing_with(fr, value) or cq.parent is None:
        return 0, cq.parent is not None
    remaining = value - cq.local_available(fr)
    for node in cq.path_to_root():
        if not node.borrowing_with(fr, remaining):
            return node.height(), node.parent is not None
        remaining -= node.local_available(fr)
    assert cq.parent is not None
    return cq.parent.root().height(), False


class QuotaTree:
    """Every ClusterQueue and Cohort, linked, with subtree quotas and usages as Kueue's cache keeps them."""

    def __init__(self, queues: Mapping[str, tuple[str | None, dict[FlavorResource, ResourceQuota]]],
                 cohorts: Mapping[str, tuple[str | None, dict[FlavorResource, ResourceQuota]]]) -> None:
        self.queues: dict[str, Node] = {}
        self.cohorts: dict[str, Node] = {}
        for name, (parent, quotas) in cohorts.items():
            self._cohort(name).quotas = dict(quotas)
            if parent:
                self._link(self._cohort(name), self._cohort(parent), cohort=True)
        for name, (cohort, quotas) in queues.items():
            node = self.queues[name] = Node(name, False, dict(quotas))
            if cohort:
                self._link(node, self._cohort(cohort), cohort=False)
        self._check_cycles()
        for root in {id(c.root()): c.root() for c in self.cohorts.values()}.values():
            self._update(root)
        for q in self.queues.values():
            if q.parent is None:
                self._update(q)

    def _cohort(self, name: str) -> Node:
        if name not in self.cohorts:
            self.cohorts[name] = Node(name, True)
        return self.cohorts[name]

    @staticmethod
    def _link(child: Node, parent: Node, cohort: bool) -> None:
        child.parent = parent
        (parent.cohorts if cohort else parent.queues).append(child)

    def _check_cycles(self) -> None:
        for cohort in self.cohorts.values():
            seen = {cohort.name}
            for node in cohort.path_to_root():
                if node.name in seen:
                    raise TopologyError(f"Cohort {cohort.name}: its parents form a cycle; Kueue admits nothing in it")
                seen.add(node.name)

    def _update(self, node: Node) -> None:
        """Subtree quotas and usages, from the leaves up (`updateCohortResourceNode`)."""
        node.subtree = {fr: q.nominal for fr, q in node.quotas.items()}
        if not node.is_cohort:
            return
        node.usage = {}
        for child in node.children:
            self._update(child)
            for fr, quota in child.subtree.items():
                node.subtree[fr] = node.subtree.get(fr, 0) + quota - child.local_quota(fr)
            for fr, used in child.usage.items():
                node.usage[fr] = node.usage.get(fr, 0) + max(0, used - child.local_quota(fr))

    def charge(self, queue: str, usage: Mapping[FlavorResource, int], sign: int = 1) -> None:
        """Add (or with sign -1 remove) a workload's quota usage in a ClusterQueue, bubbling up as Kueue does."""
        node = self.queues.get(queue)
        if node is None:
            return
        for fr, value in usage.items():
            if sign > 0:
                node.add_usage(fr, value)
            else:
                node.remove_usage(fr, value)
