"""Kueue v0.19's placement of one PodSet (and its leader) in a TAS tree.

The algorithm follows `pkg/cache/scheduler/tas_flavor_snapshot.go` (TASProfileMixed on, as by default):
phase 1 counts, per leaf, how many pods (and leaders) fit in its free capacity and rolls the counts up;
phase 2 picks domains at the requested level - the one with most free capacity, or with BestFit the
tightest one that still holds everything - climbs a level for `preferred` when none does, and walks down
choosing the fewest domains per level, tightest fit for the last. Unconstrained and implied PodSets use
LeastFreeCapacity instead. Taints, nodeSelector and required node affinity are checked only when
`kubernetes.io/hostname` is the lowest level, as in Kueue.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from .capacity import PODS, Resources, affinity_matches, count_in, pod_requests, taint_string, untolerated_taint
from .tree import Domain, Leaf, TASTree
from .workloads import GROUP_NAME, PREFERRED, REQUIRED, SLICE_REQUIRED, SLICE_SIZE, UNCONSTRAINED, PodSet, ascii_int

INF = 2**31 - 1
TRUE = {"1", "t", "T", "TRUE", "true", "True"}


@dataclass
class PodSetRequest:
    """One PodSet as Kueue's TAS sees it (the Workload's `PodSetTopologyRequest` plus its pod needs)."""

    name: str
    count: int
    requests: Resources
    mode: str  # required | preferred | unconstrained | slices-only | implied | invalid
    level: str | None
    slice_level: str | None = None
    slice_size: int = 1
    group: str | None = None
    spec: Mapping[str, Any] = field(default_factory=dict)

    @property
    def required(self) -> bool:
        return self.mode == "required"

    @property
    def unconstrained(self) -> bool:
        return self.mode in ("unconstrained", "slices-only", "implied")


def podset_request(ps: PodSet, keys: Sequence[str], tas_only: bool = True) -> PodSetRequest | None:
    """Kueue's topology request for a PodSet (`NewPodSetTopologyRequest(...).Build()` and `levelKey`).

    None when the PodSet does not use TAS (no annotation, and the ClusterQueue is not TAS-only).
    """
    ann = ps.annotations
    slice_level, slice_size = None, 1
    size = ascii_int(ann.get(SLICE_SIZE)) if SLICE_REQUIRED in ann else None
    if size is not None:
        slice_level, slice_size = str(ann[SLICE_REQUIRED]), max(size, 1)
    if REQUIRED in ann:
        mode, level = "required", str(ann[REQUIRED])
    elif PREFERRED in ann:
        mode, level = "preferred", str(ann[PREFERRED])
    elif UNCONSTRAINED in ann:
        truthy = str(ann[UNCONSTRAINED]) in TRUE
        mode, level = ("unconstrained", keys[-1]) if truthy else ("invalid", None)
    elif slice_level:
        mode, level = "slices-only", keys[0]
    elif tas_only:
        mode, level = "implied", keys[-1]
    else:
        return None
    group = str(ann[GROUP_NAME]) if GROUP_NAME in ann and mode in ("required", "preferred") else None
    return PodSetRequest(ps.name, ps.count, pod_requests(ps.spec), mode, level, slice_level, slice_size, group,
                         ps.spec)


@dataclass
class Stats:
    """Kueue's exclusion statistics, appended to its "doesn't fit" message."""

    total: int = 0
    node_selector: int = 0
    affinity: int = 0
    taints: dict[str, int] = field(default_factory=dict)
    resources: dict[str, int] = field(default_factory=dict)

    def text(self) -> str:
        reasons = []
        if self.node_selector:
            reasons.append(f"nodeSelector: {self.node_selector}")
        if self.affinity:
            reasons.append(f"affinity: {self.affinity}")
        reasons += [f'taint "{t}": {n}' for t, n in self.taints.items()]
        reasons += [f'resource "{r}": {n}' for r, n in self.resources.items()]
        return f". Total nodes: {self.total}; excluded: {', '.join(sorted(reasons))}" if reasons else ""


class NoFit(Exception):
    """The PodSet cannot be placed; `fit_count` of `total` units (pods or slices) fit."""

    def __init__(self, reason: str, fit_count: int = 0, total: int = 0, unit: str = "pod") -> None:
        super().__init__(reason)
        self.fit_count, self.total, self.unit = fit_count, total, unit
        self.most = 0  # pods that fit in the best domain at the requested level


@dataclass
class Placement:
    """Where a PodSet (or a leader-worker group) lands: the level it fit at and pods per leaf, per PodSet."""

    level_idx: int
    leaves: dict[str, list[tuple[Leaf, int]]]

    def domains(self, podset: str) -> list[tuple[tuple[str, ...], int]]:
        """The PodSet's pods per domain at the placement level."""
        out: dict[tuple[str, ...], int] = {}
        for leaf, n in self.leaves.get(podset, []):
            key = leaf.values[: self.level_idx + 1]
            out[key] = out.get(key, 0) + n
        return sorted(out.items())


def _sub(free: Resources, used: Mapping[str, int] | None) -> Resources:
    if not used:
        return free
    out = dict(free)
    for key, value in used.items():
        out[key] = out.get(key, 0) - value
    return out


class Placer:
    """Runs Kueue's algorithm for one PodSet group on a tree, with usage assumed by earlier groups."""

    def __init__(self, tree: TASTree, topology: str, tolerations: Sequence[Mapping[str, Any]],
                 assumed: dict[str, Resources]) -> None:
        self.tree = tree
        self.topology = topology
        self.flavor_tolerations = list(tolerations)
        self.assumed = assumed

    # phase 1 ------------------------------------------------------------------------------------------
    def _feasible(self, leaf: Leaf, tolerations: Sequence[Mapping[str, Any]], selector: Mapping[str, Any],
                  affinity: Mapping[str, Any] | None, stats: Stats) -> bool:
        if not self.tree.hostname_lowest or leaf.node is None:
            return True
        node = leaf.node
        taint = untolerated_taint(node.taints, tolerations)
        if taint is not None:
            key = taint_string(taint)
            stats.taints[key] = stats.taints.get(key, 0) + 1
            return False
        if any(node.labels.get(k) != str(v) for k, v in selector.items()):
            stats.node_selector += 1
            return False
        if not affinity_matches(node.labels, affinity):
            stats.affinity += 1
            return False
        return True

    def fill(self, workers: PodSetRequest, leader: PodSetRequest | None, slice_idx: int, stats: Stats) -> None:
        needs = sorted({**workers.requests, PODS: workers.requests.get(PODS, 0) + 1}.items())
        leader_map = {**leader.requests, PODS: leader.requests.get(PODS, 0) + 1} if leader else None
        leader_needs = sorted(leader_map.items()) if leader_map else None
        spec = workers.spec  # Kueue checks the workers' template for the whole group
        tolerations = [*(spec.get("tolerations") or []), *self.flavor_tolerations]
        selector = spec.get("nodeSelector") or {}
        affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution")
        for level in self.tree.levels:
            for domain in level.values():
                domain.reset()
        stats.total += len(self.tree.leaves)
        for leaf in self.tree.leaves.values():
            if not self._feasible(leaf, tolerations, selector, affinity, stats):
                continue
            remaining = _sub(leaf.free, self.assumed.get(leaf.id))
            leaf.pods, limiting = count_in(needs, remaining)
            if leaf.pods == 0 and limiting:
                stats.resources[limiting] = stats.resources.get(limiting, 0) + 1
            if leader_needs is not None and count_in(leader_needs, remaining)[0] > 0:
                leaf.leaders = 1
                remaining = _sub(remaining, leader_map)
            leaf.pods_wl = count_in(needs, remaining)[0]
        for root in self.tree.roots:
            self._roll_up(root, 0, slice_idx, workers.slice_size, leader is not None)

    def _roll_up(self, d: Domain, level: int, slice_idx: int, size: int, leader_required: bool) -> None:
        if not d.children:
            if level == slice_idx:
                d.slices, d.slices_wl = d.pods // size, d.pods_wl // size
            return
        pods = slices = leaders = 0
        min_pods_diff = min_slices_diff = INF
        contributor = False
        for child in d.children:
            self._roll_up(child, level + 1, slice_idx, size, leader_required)
            pods += child.pods
            slices += child.slices
            if not leader_required or child.leaders > 0:
                contributor = True
                min_pods_diff = min(min_pods_diff, child.pods - child.pods_wl)
                min_slices_diff = min(min_slices_diff, child.slices - child.slices_wl)
            leaders = max(leaders, child.leaders)
        d.pods, d.leaders = pods, leaders
        d.pods_wl = pods - min_pods_diff if contributor else 0
        slices_wl = slices - min_slices_diff if contributor else 0
        if level == slice_idx:
            slices, slices_wl = d.pods // size, d.pods_wl // size
        d.slices, d.slices_wl = slices, slices_wl

    # ordering -----------------------------------------------------------------------------------------
    @staticmethod
    def sorted_with_leader(domains: Iterable[Domain], lfc: bool) -> list[Domain]:
        sign = 1 if lfc else -1
        return sorted(domains, key=lambda d: (-d.leaders, sign * d.slices_wl, d.pods_wl, d.values))

    @staticmethod
    def sorted_domains(domains: Iterable[Domain], lfc: bool) -> list[Domain]:
        sign = 1 if lfc else -1
        return sorted(domains, key=lambda d: (sign * d.slices, d.pods, d.values))

    @staticmethod
    def best_fit(domains: Sequence[Domain], needed: int, leaders: int, slices: bool) -> Domain:
        """The first domain with the smallest count that still holds `needed` (BestFit), else the first."""
        def count(d: Domain) -> int:
            if slices:
                return d.slices_wl if leaders > 0 else d.slices
            return d.pods_wl if leaders > 0 else d.pods
        best, best_count = domains[0], INF
        for d in domains:
            if d.leaders < leaders:
                continue
            c = count(d)
            if needed <= c < best_count:
                best, best_count = d, c
        return best

    @staticmethod
    def prioritize_leader(domains: list[Domain], count: int, leaders: int, size: int, slices: bool) -> list[Domain]:
        if leaders == 0 or len(domains) < 2:
            return domains
        required = count // size if slices else count
        available = sum(d.slices if slices else d.pods for d in domains)
        for i, d in enumerate(domains):
            if d.leaders < leaders:
                continue
            penalty = (d.slices - d.slices_wl) if slices else (d.pods - d.pods_wl)
            if available - penalty < required:
                continue
            return domains if i == 0 else [d, *domains[:i], *domains[i + 1:]]
        return domains

    # phase 2 ------------------------------------------------------------------------------------------
    def find_level(self, idx: int, count: int, leaders: int, size: int, required: bool,
                   lfc: bool) -> tuple[int, list[Domain]]:
        domains = list(self.tree.levels[idx].values())
        if not domains:
            raise NoFit(f"no topology domains at level: {self.tree.keys[idx]}")
        ordered = self.sorted_with_leader(domains, lfc)
        top = ordered[0]
        needed = count // size
        unit = "slice" if size > 1 else "pod"
        if not lfc and top.slices_wl >= needed and top.leaders >= leaders:
            top = self.best_fit(ordered, needed, leaders, True)
        if lfc:
            for d in ordered:
                if leaders > 0 and d.leaders < leaders:
                    continue
                if (d.slices_wl if leaders > 0 else d.slices) >= needed:
                    return idx, [d]
            if required:
                raise NoFit("", ordered[-1].pods, needed, unit)
        if top.slices_wl < needed or top.leaders < leaders:
            if required:
                raise NoFit("", top.slices, needed, unit)
            if idx > 0 and not lfc:
                return self.find_level(idx - 1, count, leaders, size, required, lfc)
            return idx, self._spread(ordered, count, leaders, size, lfc)
        return idx, [top]

    def _spread(self, ordered: list[Domain], count: int, leaders: int, size: int, lfc: bool) -> list[Domain]:
        """Several domains at the top level: leaders first, then the most free (or, LFC, least free) ones."""
        needed = count // size
        unit = "slice" if size > 1 else "pod"
        ordered = self.prioritize_leader(ordered, count, leaders, size, True)
        results: list[Domain] = []
        remaining, remaining_leaders = needed, leaders
        idx = 0
        while remaining_leaders > 0 and idx < len(ordered) and ordered[idx].leaders > 0:
            d = ordered[idx]
            if not lfc and d.slices_wl >= remaining:
                d = self.best_fit(ordered[idx:], remaining, remaining_leaders, True)
            results.append(d)
            remaining_leaders -= d.leaders
            remaining -= d.slices_wl
            idx += 1
        if remaining_leaders > 0:
            raise NoFit("", leaders - remaining_leaders, needed, unit)
        rest = self.sorted_domains(ordered[idx:], lfc)
        for i, d in enumerate(rest):
            if remaining <= 0:
                break
            if not lfc and d.slices >= remaining:
                d = self.best_fit(rest[i:], remaining, 0, True)
            results.append(d)
            remaining -= d.slices
        if remaining > 0:
            raise NoFit("", needed - remaining, needed, unit)
        return results

    def _consume_with_leaders(self, d: Domain, rest: Sequence[Domain], remaining: list[int], lfc: bool,
                              size: int, slices: bool) -> tuple[Domain, bool]:
        """Take a domain while leaders are still to place; `remaining` is [units, leaders], updated in place."""
        def with_leader(x: Domain) -> int:
            return x.slices_wl if slices else x.pods_wl
        if not lfc and with_leader(d) >= remaining[0] and d.leaders >= remaining[1]:
            d = self.best_fit(rest, remaining[0], remaining[1], slices)
        if with_leader(d) >= remaining[0] and d.leaders >= remaining[1]:
            self._set_primary(d, remaining[0], slices)
            d.leaders = remaining[1]
            d.pods = remaining[0] * size
            return d, True
        taken = min(with_leader(d), remaining[0])
        d.leaders = min(d.leaders, remaining[1])
        self._set_primary(d, taken, slices)
        if slices:
            d.slices_wl = taken
        else:
            d.pods_wl = taken
        d.pods = taken * size
        remaining[1] -= d.leaders
        remaining[0] -= taken
        return d, False

    @staticmethod
    def _set_primary(d: Domain, value: int, slices: bool) -> None:
        if slices:
            d.slices = value
        else:
            d.pods = value

    def to_minimum(self, domains: list[Domain], count: int, leaders: int, size: int, lfc: bool,
                   slices: bool) -> list[Domain]:
        """Fewest domains that hold `count` pods (in slices of `size`), tightest fit for the last one."""
        domains = self.prioritize_leader(domains, count, leaders, size, slices)
        remaining = [count // size if slices else count, leaders]
        result: list[Domain] = []
        if not domains and remaining == [0, 0]:
            return result
        for i, d in enumerate(domains):
            if remaining[1] > 0:
                d, done = self._consume_with_leaders(d, domains[i:], remaining, lfc, size if slices else 1, slices)
                result.append(d)
                if done:
                    return result
                continue
            have = (lambda x: x.slices) if slices else (lambda x: x.pods)
            if not lfc and have(d) >= remaining[0]:
                d = self.best_fit(domains[i:], remaining[0], 0, slices)
            d.leaders = 0
            if have(d) >= remaining[0]:
                if slices:
                    d.pods, d.slices = remaining[0] * size, remaining[0]
                else:
                    d.pods = remaining[0]
                result.append(d)
                return result
            if slices:
                d.pods = d.slices * size
            remaining[0] -= have(d)
            result.append(d)
        raise NoFit(f"internal: {remaining[0]} unit(s) left after walking {len(domains)} domain(s)")

    def place(self, workers: PodSetRequest, leader: PodSetRequest | None) -> tuple[Placement, int, Stats]:
        """Phase 1 and 2 for one group; returns the placement, the most pods in one domain, and the stats."""
        keys = self.tree.keys
        stats = Stats()
        if workers.level is None:
            raise NoFit("topology level not specified")
        if workers.level not in keys:
            raise NoFit(f"no requested topology level: {workers.level}")
        level_idx = keys.index(workers.level)
        slice_key = workers.slice_level or keys[-1]
        if slice_key not in keys:
            raise NoFit(f"no requested topology level for slices: {slice_key}")
        slice_idx = keys.index(slice_key)
        if level_idx > slice_idx:
            raise NoFit(f"podset slice topology {slice_key} is above the podset topology {workers.level}")
        leaders = 1 if leader else 0
        lfc, size = workers.unconstrained, workers.slice_size
        self.fill(workers, leader, slice_idx, stats)
        most = max((d.pods for d in self.tree.levels[level_idx].values()), default=0)
        try:
            fit_idx, current = self.find_level(level_idx, workers.count, leaders, size, workers.required, lfc)
        except NoFit as exc:
            if not str(exc):
                exc.args = (not_fit_message(self.topology, exc.fit_count, exc.total, exc.unit) + stats.text(),)
            exc.most = most
            raise
        current = self.to_minimum(current, workers.count, leaders, size, lfc, True)
        idx = fit_idx
        while idx < min(len(keys) - 1, slice_idx):
            lower = self.sorted_domains([c for d in current for c in d.children], lfc)
            current = self.to_minimum(lower, workers.count, leaders, size, lfc, True)
            idx += 1
        while idx < len(keys) - 1:
            current = [c for d in current
                       for c in self.to_minimum(self.sorted_domains(d.children, lfc), d.pods, d.leaders, 1, lfc, False)]
            idx += 1
        leaves: dict[str, list[tuple[Leaf, int]]] = {}
        ordered = sorted(current, key=lambda d: d.values)
        if leader is not None:
            leaves[leader.name] = [(d, d.leaders) for d in ordered if d.leaders > 0]  # type: ignore[misc]
        leaves[workers.name] = [(d, d.pods) for d in ordered if d.pods > 0]  # type: ignore[misc]
        return Placement(fit_idx, leaves), most, stats


def not_fit_message(topology: str, fit: int, total: int, unit: str) -> str:
    """Kueue's wording, so a user can match it to the Workload's pending message."""
    if fit == 0:
        return f'topology "{topology}" doesn\'t allow to fit any of {total} {unit}(s)'
    return f'topology "{topology}" allows to fit only {fit} out of {total} {unit}(s)'
