"""Kueue v0.19's placement of one PodSet (and its leader) in a TAS tree.

The algorithm follows `pkg/cache/scheduler/tas_flavor_snapshot.go` at default feature gates (TASProfileMixed
and TASMultiLayerTopology on, balanced placement off): phase 1 counts, per leaf, how many pods (and
leaders) fit in its free capacity and rolls the counts up, rounding each child down to the inner slice
size where a multi-layer request has one; phase 2 picks domains at the requested level - the one with
most free capacity, or with BestFit the tightest one that still holds everything - climbs a level for
`preferred` when none does, and walks down choosing the fewest domains per level, tightest fit for the
last, in multiples of each slice layer. Unconstrained, slice-only and implied PodSets use
LeastFreeCapacity instead. Taints, nodeSelector and required node affinity are checked only when
`kubernetes.io/hostname` is the lowest level, as in Kueue.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from .annotations import Constraint, TopologyRequest
from .capacity import PODS, Resources, affinity_matches, count_in, pod_requests, taint_string, untolerated_taint
from .tree import Domain, Leaf, TASTree
from .workloads import PodSet

INF = 2**31 - 1


@dataclass
class PodSetRequest:
    """One PodSet as Kueue's TAS sees it (the Workload's `TASPodSetRequests`)."""

    name: str
    count: int
    requests: Resources
    topology: TopologyRequest
    implied: bool = False
    spec: Mapping[str, Any] = field(default_factory=dict)

    @property
    def group(self) -> str | None:
        return self.topology.group

    @property
    def required(self) -> bool:
        return self.topology.required is not None

    @property
    def unconstrained(self) -> bool:
        """Kueue's `isUnconstrained`: LeastFreeCapacity, no climbing."""
        return bool(self.topology.unconstrained) or self.implied or self.topology.slice_only

    @property
    def mode(self) -> str:
        """What a person calls the request: required, preferred, unconstrained, slices-only or implied."""
        t = self.topology
        if t.required is not None:
            return "required"
        if t.preferred is not None:
            return "preferred"
        if t.slice_only:
            return "slices-only"
        if t.unconstrained is not None:
            return "unconstrained" if t.unconstrained else "unconstrained=false"
        return "implied"

    def level(self, keys: tuple[str, ...]) -> str | None:
        return self.topology.level_key(keys, self.implied)


def podset_request(ps: PodSet, topology: TopologyRequest, implied: bool) -> PodSetRequest:
    return PodSetRequest(ps.name, ps.count, pod_requests(ps.spec), topology, implied, ps.spec)


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
    """The PodSet cannot be placed; the message is Kueue's (`most`: pods the best domain at the level holds)."""

    def __init__(self, reason: str, most: int = 0) -> None:
        super().__init__(reason)
        self.most = most


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


@dataclass
class _Query:
    """One run's parameters (Kueue's `topologyAssignmentParameters`)."""

    count: int
    leaders: int
    size: int
    level_idx: int
    slice_idx: int
    required: bool
    unconstrained: bool  # no climbing to a higher level
    lfc: bool  # LeastFreeCapacity (unconstrained, with TASProfileMixed)
    inner: dict[int, int]  # level index -> inner slice size (multi-layer)
    layers: tuple[Constraint, ...]

    @property
    def needed(self) -> int:
        return self.count // self.size


class Placer:
    """Runs Kueue's algorithm for one PodSet group on a tree, with usage assumed by earlier groups."""

    def __init__(self, tree: TASTree, topology: str, tolerations: Sequence[Mapping[str, Any]],
                 assumed: dict[str, Resources], admitted: Mapping[str, Resources] | None = None,
                 profile_mixed: bool = True) -> None:
        self.tree = tree
        self.topology = topology
        self.flavor_tolerations = list(tolerations)
        self.assumed = assumed  # what earlier groups of this Workload took
        self.admitted = admitted or {}  # what Workloads admitted before this one hold
        self.profile_mixed = profile_mixed

    # phase 1 ------------------------------------------------------------------------------------------
    def _feasible(self, leaf: Leaf, tolerations: Sequence[Mapping[str, Any]], selector: Mapping[str, Any],
                  affinity: Mapping[str, Any] | None, stats: Stats,
                  blocking: dict[tuple[int, ...], Mapping[str, Any] | None]) -> bool:
        """Kueue's node checks for one leaf. `blocking` remembers the untolerated taint per set of taint
        objects: nodes read by one NodeReader share them, so 10,000 nodes cost a handful of checks."""
        if not self.tree.hostname_lowest or leaf.node is None:
            return True
        node = leaf.node
        ids = tuple(map(id, node.taints))
        if ids in blocking:
            taint = blocking[ids]
        else:
            taint = blocking[ids] = untolerated_taint(node.taints, tolerations)
        if taint is not None:
            key = taint_string(taint)
            stats.taints[key] = stats.taints.get(key, 0) + 1
            return False
        if selector and any(node.labels.get(k) != str(v) for k, v in selector.items()):
            stats.node_selector += 1
            return False
        if affinity and not affinity_matches(node.labels, affinity, node.name):
            stats.affinity += 1
            return False
        return True

    def fill(self, workers: PodSetRequest, leader: PodSetRequest | None, q: _Query, stats: Stats) -> None:
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
        blocking: dict[tuple[int, ...], Mapping[str, Any] | None] = {}
        assumed = self.assumed
        for leaf in self.tree.leaves.values():
            if not self._feasible(leaf, tolerations, selector, affinity, stats, blocking):
                continue
            remaining = _sub(_sub(leaf.free, self.admitted.get(leaf.id)), assumed.get(leaf.id))
            leaf.pods, limiting = count_in(needs, remaining)
            if leaf.pods == 0 and limiting:
                stats.resources[limiting] = stats.resources.get(limiting, 0) + 1
            if leader_needs is None:
                leaf.pods_wl = leaf.pods  # nothing set aside for a leader: the same count
                continue
            if count_in(leader_needs, remaining)[0] > 0:
                leaf.leaders = 1
                remaining = _sub(remaining, leader_map)
            leaf.pods_wl = count_in(needs, remaining)[0]
        for root in self.tree.roots:
            self._roll_up(root, 0, q, leader is not None)

    def _roll_up(self, d: Domain, level: int, q: _Query, leader_required: bool) -> None:
        if not d.children:
            if level == q.slice_idx:
                d.slices, d.slices_wl = d.pods // q.size, d.pods_wl // q.size
            return
        pods = slices = leaders = 0
        min_pods_diff = min_slices_diff = INF
        contributor = False
        inner = q.inner.get(level + 1)
        for child in d.children:
            self._roll_up(child, level + 1, q, leader_required)
            child_pods, child_wl = child.pods, child.pods_wl
            if inner:
                child_pods, child_wl = child_pods // inner * inner, child_wl // inner * inner
            pods += child_pods
            slices += child.slices
            if not leader_required or child.leaders > 0:
                contributor = True
                min_pods_diff = min(min_pods_diff, child_pods - child_wl)
                min_slices_diff = min(min_slices_diff, child.slices - child.slices_wl)
            leaders = max(leaders, child.leaders)
        d.pods, d.leaders = pods, leaders
        d.pods_wl = pods - min_pods_diff if contributor else 0
        slices_wl = slices - min_slices_diff if contributor else 0
        if level == q.slice_idx:
            slices, slices_wl = d.pods // q.size, d.pods_wl // q.size
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

    # messages -----------------------------------------------------------------------------------------
    def _not_fit(self, q: _Query, level_idx: int, fit: int, stats: Stats) -> NoFit:
        most = max((d.pods for d in self.tree.levels[q.level_idx].values()), default=0)
        if len(q.layers) > 1:
            return NoFit(self._multi_layer_message(level_idx, q) + stats.text(), most)
        return NoFit(not_fit_message(self.topology, fit, q.needed, "slice" if q.size > 1 else "pod") + stats.text(),
                     most)

    def _slices_below(self, d: Domain, level: int, target: int, size: int) -> int:
        if level == target:
            return d.pods // size
        return sum(self._slices_below(c, level + 1, target, size) for c in d.children)

    def _multi_layer_message(self, level_idx: int, q: _Query) -> str:
        """Kueue's `multiLayerNotFitMessage`: slices that fit per layer in the domain with most slices."""
        text = f'topology "{self.topology}" doesn\'t allow to fit'
        domains = list(self.tree.levels[level_idx].values())
        if not domains:
            return text
        best = min(domains, key=lambda d: (-d.slices, self._domain_id(d)))
        for layer in q.layers:
            if layer.topology not in self.tree.keys:
                continue
            target = self.tree.keys.index(layer.topology)
            fit = self._slices_below(best, level_idx, target, layer.size)
            text += f"; {fit}/{q.count // layer.size} slice(s) fit on level {layer.topology}"
        return text

    def _domain_id(self, d: Domain) -> str:
        """Kueue's domain ID: the hostname alone for a hostname leaf, else the values joined by commas."""
        if self.tree.hostname_lowest and len(d.values) == len(self.tree.keys):
            return d.values[-1]
        return ",".join(d.values)

    # phase 2 ------------------------------------------------------------------------------------------
    def find_level(self, idx: int, q: _Query, stats: Stats) -> tuple[int, list[Domain]]:
        domains = list(self.tree.levels[idx].values())
        if not domains:
            raise NoFit(f"no topology domains at level: {self.tree.keys[idx]}")
        ordered = self.sorted_with_leader(domains, q.lfc)
        top = ordered[0]
        needed, leaders = q.needed, q.leaders
        if not q.lfc and top.slices_wl >= needed and top.leaders >= leaders:
            top = self.best_fit(ordered, needed, leaders, True)
        if q.lfc:
            for d in ordered:
                if leaders > 0 and d.leaders < leaders:
                    continue
                if (d.slices_wl if leaders > 0 else d.slices) >= needed:
                    return idx, [d]
            if q.required:
                raise self._not_fit(q, idx, ordered[-1].pods, stats)
        if top.slices_wl < needed or top.leaders < leaders:
            if q.required:
                raise self._not_fit(q, idx, top.slices, stats)
            if idx > 0 and not q.unconstrained:
                return self.find_level(idx - 1, q, stats)
            return idx, self._spread(ordered, q, idx, stats)
        return idx, [top]

    def _spread(self, ordered: list[Domain], q: _Query, idx: int, stats: Stats) -> list[Domain]:
        """Several domains at the top level: leaders first, then the most free (or, LFC, least free) ones."""
        needed = q.needed
        ordered = self.prioritize_leader(ordered, q.count, q.leaders, q.size, True)
        results: list[Domain] = []
        remaining, remaining_leaders = needed, q.leaders
        i = 0
        while remaining_leaders > 0 and i < len(ordered) and ordered[i].leaders > 0:
            d = ordered[i]
            if not q.lfc and d.slices_wl >= remaining:
                d = self.best_fit(ordered[i:], remaining, remaining_leaders, True)
            results.append(d)
            remaining_leaders -= d.leaders
            remaining -= d.slices_wl
            i += 1
        if remaining_leaders > 0:
            raise self._not_fit(q, idx, q.leaders - remaining_leaders, stats)
        rest = self.sorted_domains(ordered[i:], q.lfc)
        for j, d in enumerate(rest):
            if remaining <= 0:
                break
            if not q.lfc and d.slices >= remaining:
                d = self.best_fit(rest[j:], remaining, 0, True)
            results.append(d)
            remaining -= d.slices
        if remaining > 0:
            raise self._not_fit(q, idx, needed - remaining, stats)
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
        # Kueue logs "unexpected remainingCount" and places nothing; an empty PodSet ends here too
        if remaining[0] > 0:
            raise NoFit(f"internal: {remaining[0]} unit(s) left after walking {len(domains)} domain(s)")
        return result

    def _query(self, workers: PodSetRequest, leader: PodSetRequest | None) -> _Query:
        """Kueue's checks before phase 1, in its order, with its messages."""
        keys = self.tree.keys
        layers = workers.topology.constraints
        size = layers[0].size if layers else 1
        if size <= 0:
            raise NoFit("slice topology requested, but slice size not provided")
        level = workers.level(keys)
        if level is None:
            raise NoFit("topology level not specified")
        if level not in keys:
            raise NoFit(f"no requested topology level: {level}")
        slice_key = layers[0].topology if layers else keys[-1]
        if slice_key not in keys:
            raise NoFit(f"no requested topology level for slices: {slice_key}")
        level_idx, slice_idx = keys.index(level), keys.index(slice_key)
        if level_idx > slice_idx:
            raise NoFit(f"podset slice topology {slice_key} is above the podset topology {level}")
        inner: dict[int, int] = {}
        prev_size, prev_idx = size, slice_idx
        for layer in layers[1:]:
            if layer.topology not in keys:
                raise NoFit(f"no requested topology level for additional slice layer: {layer.topology}")
            idx = keys.index(layer.topology)
            if idx <= prev_idx:
                raise NoFit(f"additional slice layer topology {layer.topology} must be at a lower level than "
                            f"{keys[prev_idx]}")
            if layer.size <= 0 or prev_size % layer.size:
                raise NoFit(f"additional slice layer size {layer.size} must evenly divide parent layer size "
                            f"{prev_size}")
            for lvl in range(prev_idx + 1, idx + 1):
                inner[lvl] = layer.size
            prev_size, prev_idx = layer.size, idx
        unconstrained = workers.unconstrained
        return _Query(workers.count, 1 if leader else 0, size, level_idx, slice_idx, workers.required,
                      unconstrained, unconstrained and self.profile_mixed, inner, layers if inner else ())

    def counts(self, workers: PodSetRequest) -> list[list[Domain]]:
        """Phase 1 alone: per level, every domain with how many of these pods it holds (`pods`; slices of a
        multi-layer request rounded as Kueue rounds them), for what a person asks: where is room."""
        q = self._query(workers, None)
        self.fill(workers, None, q, Stats())
        return [list(level.values()) for level in self.tree.levels]

    def place(self, workers: PodSetRequest, leader: PodSetRequest | None) -> tuple[Placement, int, Stats]:
        """Phase 1 and 2 for one group; returns the placement, the most pods in one domain, and the stats."""
        keys = self.tree.keys
        stats = Stats()
        q = self._query(workers, leader)
        self.fill(workers, leader, q, stats)
        most = max((d.pods for d in self.tree.levels[q.level_idx].values()), default=0)
        fit_idx, current = self.find_level(q.level_idx, q, stats)
        current = self.to_minimum(current, q.count, q.leaders, q.size, q.lfc, True)
        idx = fit_idx
        while idx < min(len(keys) - 1, q.slice_idx):
            lower = self.sorted_domains([c for d in current for c in d.children], q.lfc)
            current = self.to_minimum(lower, q.count, q.leaders, q.size, q.lfc, True)
            idx += 1
        while idx < len(keys) - 1:
            size = q.size if idx < q.slice_idx else q.inner.get(idx + 1, 1)
            lower_all: list[Domain] = []
            for d in current:
                children = self.sorted_domains(d.children, q.lfc)
                if size > 1:  # an inner layer: slices counted anew at its size (after sorting, as Kueue does)
                    for c in children:
                        c.slices, c.slices_wl = c.pods // size, c.pods_wl // size
                lower_all += self.to_minimum(children, d.pods, d.leaders, size, q.lfc, size > 1)
            current = lower_all
            idx += 1
        leaves: dict[str, list[tuple[Leaf, int]]] = {}
        ordered = sorted(current, key=lambda d: d.values)
        # the descent ends at the lowest level, so every domain left is a Leaf (mypy sees Domains: the ignores)
        if leader is not None:
            leaves[leader.name] = [(d, d.leaders) for d in ordered if d.leaders > 0]  # type: ignore[misc]
        leaves[workers.name] = [(d, d.pods) for d in ordered if d.pods > 0]  # type: ignore[misc]
        return Placement(fit_idx, leaves), most, stats


def not_fit_message(topology: str, fit: int, total: int, unit: str) -> str:
    """Kueue's wording, so a user can match it to the Workload's pending message."""
    if fit == 0:
        return f'topology "{topology}" doesn\'t allow to fit any of {total} {unit}(s)'
    return f'topology "{topology}" allows to fit only {fit} out of {total} {unit}(s)'
