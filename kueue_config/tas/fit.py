"""Would Kueue admit this job now, and where? A model of Kueue v0.19's flavor choice and TAS placement.

A workload's PodSets are grouped as Kueue groups them (PodSets sharing a `podset-group-name`). Each group
gets a flavor per resource group the way Kueue's flavor assigner picks one: the first, from where its last
attempt stopped, that passes the TAS, taint and node-affinity checks (quota is not modelled). The PodSets
that use TAS are then placed by `placer.Placer` in their flavor's `tree.TASTree`, flavors in name order.
When a placement fails, Kueue moves every group on to its next flavor in a later scheduling cycle; `fit`
follows those cycles until one admits the Workload or they come round again, and then reports the last
cycle's message, the one the pending Workload keeps. A LeaderWorkerSet makes
one Workload per replica; they are admitted one after another, each seeing what the earlier ones took.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

from labeler.errors import TopologyError
from labeler.names import HOSTNAME
from labeler.nodes import Node

from .annotations import RequestError, TopologyRequest, build_request
from .capacity import PODS, Resources, affinity_matches, pod_requests, untolerated_taint
from .gates import Gates
from .placer import NoFit, Placement, Placer, PodSetRequest, podset_request
from .setup import Flavor, Queue
from .tree import Exclusions, TASTree, build_tree
from .workloads import ELASTIC_JOB, PodSet, Workload


class CannotJudge(TopologyError):
    """Kueue would do something `fit` does not model (a gate that is off by default): no guess, exit 2."""


@dataclass
class PodSetFit:
    """The answer for one PodSet: its flavor, whether and where it fits, and Kueue's message when not."""

    workload: int
    podset: str
    pods: int
    mode: str
    level: str | None
    fits: bool
    flavor: str | None = None
    placed_level: str | None = None
    placed_pods: int = 0
    domains: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    max_pods_in_one_domain: int = 0
    message: str = ""
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Attempt:
    """One scheduling cycle Kueue would run for a Workload: the flavors it tried and what came of it."""

    workload: int
    flavors: list[str]
    fits: bool
    message: str = ""


@dataclass
class FitReport:
    """Everything `topolabel fit` prints; `to_dict` is the `-o json` form."""

    fits: bool
    topology: str | None
    flavor: str | None
    levels: tuple[str, ...]
    podsets: list[PodSetFit]
    excluded: Exclusions
    nodes_counted: int
    kueue_message: str = ""
    flavor_labels: Mapping[str, str] = field(default_factory=dict)
    attempts: list[Attempt] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def deciding(self) -> PodSetFit | None:
        """The PodSet the headline is about: the first that fails, else the largest."""
        failed = [p for p in self.podsets if not p.fits]
        return failed[0] if failed else max(self.podsets, key=lambda p: p.pods, default=None)

    def to_dict(self) -> dict[str, Any]:
        main = self.deciding
        domains: dict[tuple[str, ...], int] = {}
        for p in self.podsets:
            for d in p.domains:
                domains[tuple(d["values"])] = domains.get(tuple(d["values"]), 0) + d["pods"]
        return {
            "fits": self.fits,
            "level": main.level if main else None,
            "placed_level": main.placed_level if main else None,
            "pods": sum(p.pods for p in self.podsets),
            "max_pods_in_one_domain": main.max_pods_in_one_domain if main else 0,
            "domains": [{"values": list(v), "pods": n} for v, n in domains.items()],
            "message": main.message if main and not main.fits else "",
            "kueue_message": self.kueue_message,
            "topology": self.topology,
            "flavor": self.flavor,
            "levels": list(self.levels),
            "nodes_counted": self.nodes_counted,
            "nodes_excluded": asdict(self.excluded),
            "podsets": [p.to_dict() for p in self.podsets],
            "attempts": [asdict(a) for a in self.attempts],
            "problems": list(self.problems),
        }


# -- flavor choice (Kueue's flavor assigner) ---------------------------------------------------------------

@dataclass
class _Member:
    """A PodSet of the workload with its topology request and whether it uses TAS in this ClusterQueue."""

    podset: PodSet
    topology: TopologyRequest
    implied: bool
    requests: Resources

    @property
    def tas(self) -> bool:
        return self.topology.explicit or self.implied

    @property
    def request(self) -> PodSetRequest:
        return podset_request(self.podset, self.topology, self.implied)

    @property
    def mode(self) -> str:
        return self.request.mode if self.tas else "none"


def _has_level(flavor: Flavor, t: TopologyRequest) -> bool:
    """Kueue's `HasLevel`: the main level, the slice level and every slice layer are in the flavor's Topology."""
    keys = flavor.levels or ()
    level = t.level_key(keys, False)
    slice_key = t.constraints[0].topology if t.constraints else keys[-1]
    return level in keys and slice_key in keys and all(c.topology in keys for c in t.constraints)


def _flavor_selector_matches(spec: Mapping[str, Any], flavor: Flavor) -> bool:
    """Kueue's `flavorSelector`: the pod's nodeSelector and required affinity, cut to the flavor's label keys."""
    keys = set(flavor.node_labels)
    if any(k in keys and flavor.node_labels[k] != str(v) for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution")) or {}
    terms = []
    for term in required.get("nodeSelectorTerms") or []:
        kept = [e for e in term.get("matchExpressions") or [] if e.get("key") in keys]
        if not kept:  # a term with none of the flavor's keys matches every flavor
            return True
        terms.append({"matchExpressions": kept})
    return not terms or affinity_matches(dict(flavor.node_labels), {"nodeSelectorTerms": terms})


def _flavor_problem(flavor: Flavor, members: Sequence[_Member], covered: frozenset[str] | None) -> str | None:
    """Why Kueue's `checkFlavorForPodSets` skips this flavor for the group, in its words; None when it may take it."""
    for m in members:
        if m.tas and not m.implied:
            if not flavor.tas:
                if flavor.topology:
                    return f'Flavor "{flavor.name}" information missing in TAS cache'
                if covered is None or set(m.requests) & covered:
                    return f'Flavor "{flavor.name}" does not support TopologyAwareScheduling'
            elif not _has_level(flavor, m.topology):
                return f'Flavor "{flavor.name}" does not contain the requested level'
        elif not m.tas and flavor.topology:
            return f'Flavor "{flavor.name}" supports only TopologyAwareScheduling'
        spec = m.podset.spec
        taint = untolerated_taint(flavor.node_taints, [*(spec.get("tolerations") or []), *flavor.tolerations])
        if taint is not None:
            return (f"untolerated taint {{{taint.get('key', '')} {taint.get('value', '')} {taint.get('effect', '')} "
                    f"<nil>}} in flavor {flavor.name}")
        if not _flavor_selector_matches(spec, flavor):
            return f"flavor {flavor.name} doesn't match node affinity"
    return None


ResourceGroup = tuple[frozenset[str] | None, tuple[Flavor, ...]]


def _resource_groups(queue: Queue, requests: Resources) -> tuple[list[ResourceGroup], list[str]]:
    """The ClusterQueue's resource groups the requests touch, and the requested resources no group covers."""
    if not queue.covered:
        return [(None, queue.flavors)], []
    groups: dict[frozenset[str], list[Flavor]] = {}
    for f in queue.flavors:
        groups.setdefault(queue.covered.get(f.name, frozenset()), []).append(f)
    used: list[ResourceGroup] = [(cov, tuple(fl)) for cov, fl in groups.items() if cov & set(requests)]
    missing = sorted(r for r, v in requests.items() if v and not any(r in cov for cov in groups))
    return used, missing


class _Group:
    """PodSets Kueue assigns flavors to together (one, or two sharing a group name), and their resource groups."""

    def __init__(self, members: list[_Member], queue: Queue) -> None:
        self.members = members
        requests: Resources = {}
        for m in members:
            for key, value in m.requests.items():
                requests[key] = requests.get(key, 0) + value
        self.resource_groups, self.missing = _resource_groups(queue, requests)

    def choose(self, starts: Sequence[int]) -> tuple[list[tuple[int, Flavor]], str]:
        """The flavor per resource group, each searched from its start; ([], Kueue's reasons) when one finds none."""
        if self.missing:
            return [], f"resource {self.missing[0]} unavailable in ClusterQueue"
        if not self.resource_groups:
            return [], "no flavor in the ClusterQueue covers its resources"
        picks, reasons = [], []
        for (covered, flavors), start in zip(self.resource_groups, starts):
            for idx in range(start, len(flavors)):
                problem = _flavor_problem(flavors[idx], self.members, covered)
                if problem is None:
                    picks.append((idx, flavors[idx]))
                    break
                reasons.append(problem)
            else:
                return [], ", ".join(sorted(reasons))
        return picks, ""

    def after(self, picks: list[tuple[int, Flavor]]) -> list[int]:
        """Where the next cycle starts each search: past the flavor tried, back at the first after the last one."""
        return [0 if idx == len(flavors) - 1 else idx + 1
                for (idx, _), (_, flavors) in zip(picks, self.resource_groups)]


# -- placement ----------------------------------------------------------------------------------------------

@dataclass
class _Trees:
    """One tree per TAS flavor, built on first use, and the usage of Workloads already admitted (by leaf)."""

    nodes: Sequence[Node]
    free: Mapping[str, Resources]
    gates: Gates
    admitted: dict[str, Resources] = field(default_factory=dict)
    built: dict[str, TASTree] = field(default_factory=dict)

    def tree(self, flavor: Flavor) -> TASTree:
        if flavor.name not in self.built:
            self.built[flavor.name] = build_tree(flavor.levels or (), self.nodes, self.free, flavor.node_labels)
        return self.built[flavor.name]


def _add_usage(usage: dict[str, Resources], leaf_id: str, requests: Mapping[str, int], pods: int) -> None:
    """Charge `pods` pods of `requests` (and a `pods` slot each) to a leaf, as Kueue's TAS usage does."""
    used = usage.setdefault(leaf_id, {})
    for key, value in {**requests, PODS: requests.get(PODS, 0) + 1}.items():
        used[key] = used.get(key, 0) + value * pods


def _leader_and_workers(reqs: list[PodSetRequest]) -> tuple[PodSetRequest, PodSetRequest | None]:
    """Kueue's `findLeaderAndWorkers`: the first two requests of a group; the one with more pods works."""
    workers, leader = reqs[0], (reqs[1] if len(reqs) > 1 else None)
    if leader is not None and leader.count > workers.count:
        workers, leader = leader, workers
    return workers, leader


def _placed(index: int, req: PodSetRequest, flavor: Flavor, tree: TASTree, placement: Placement,
            most: int) -> PodSetFit:
    chosen = placement.leaves.get(req.name)
    placed = sum(n for _, n in chosen or [])
    note = ""
    if chosen is None:
        note = ("Kueue places only two PodSets of a group; this one gets no topology assignment, so kube-scheduler "
                "places its pods anywhere the flavor allows")
    elif placed < req.count:
        note = (f"Kueue treats this grouped PodSet as a one-pod leader: it places {placed} of its {req.count} pods; "
                f"the other {req.count - placed} keep their scheduling gate and never start")
    return PodSetFit(index, req.name, req.count, req.mode, req.level(tree.keys), True, flavor.name,
                     tree.keys[placement.level_idx], placed,
                     [{"values": list(v), "pods": n} for v, n in placement.domains(req.name)],
                     [{"node" if tree.hostname_lowest else "domain": leaf.id, "pods": n} for leaf, n in chosen or []],
                     most, note=note)


def _place_flavor(trees: _Trees, flavor: Flavor, reqs: list[PodSetRequest], assumed: dict[str, Resources],
                  index: int) -> tuple[list[PodSetFit], str]:
    """Kueue's `FindTopologyAssignmentsForFlavor`: groups in order, each after the ones before; stops at a failure."""
    tree = trees.tree(flavor)
    placer = Placer(tree, str(flavor.topology), flavor.tolerations, assumed, trees.admitted,
                    trees.gates.profile_mixed)
    groups: dict[str, list[PodSetRequest]] = {}
    for i, req in enumerate(reqs):
        groups.setdefault(req.group or f"#{i}", []).append(req)
    out: list[PodSetFit] = []
    for members in groups.values():
        workers, leader = _leader_and_workers(members)
        try:
            placement, most, _ = placer.place(workers, leader)
        except NoFit as exc:
            out += [PodSetFit(index, r.name, r.count, r.mode, r.level(tree.keys), False, flavor.name,
                              max_pods_in_one_domain=exc.most, message=str(exc)) for r in members]
            return out, str(exc)
        for req in members:
            result = _placed(index, req, flavor, tree, placement, most)
            out.append(result)
            for leaf, n in placement.leaves.get(req.name, []):
                _add_usage(assumed, leaf.id, req.requests, n)
    return out, ""


@dataclass
class _Cycle:
    """One scheduling cycle's outcome for one Workload, and where each group's next search starts."""

    fits: bool
    podsets: list[PodSetFit]
    message: str
    flavors: list[str]
    next_starts: list[list[int]]
    usage: dict[str, Resources] = field(default_factory=dict)
    hopeless: bool = False  # a group found no flavor from the very first one: no later cycle helps


class _WorkloadFit:
    """Kueue's scheduling cycles for one Workload of the object (one per LeaderWorkerSet replica)."""

    def __init__(self, workload: Workload, queue: Queue, trees: _Trees, index: int) -> None:
        self.trees, self.index = trees, index
        self.members = [self._member(ps, workload, queue, trees.gates) for ps in workload.podsets]
        order: dict[str, list[_Member]] = {}
        for i, m in enumerate(self.members):
            order.setdefault(m.topology.group or f"#{i}", []).append(m)
        self.groups = [_Group(members, queue) for members in order.values()]

    @staticmethod
    def _member(ps: PodSet, workload: Workload, queue: Queue, gates: Gates) -> _Member:
        try:
            topology = build_request(ps.annotations, gates.multi_layer)
        except RequestError as exc:
            raise TopologyError(f"{workload.ref} PodSet {ps.name}: Kueue cannot build its Workload: {exc}") from None
        return _Member(ps, topology, not topology.explicit and queue.tas_only, pod_requests(ps.spec))

    def first_starts(self) -> list[list[int]]:
        return [[0] * len(g.resource_groups) for g in self.groups]

    def cycle(self, starts: list[list[int]]) -> _Cycle:
        picks_per_group: list[list[tuple[int, Flavor]]] = []
        for g, group in enumerate(self.groups):
            picks, reason = group.choose(starts[g])
            if not picks:
                # Kueue stops at this group: the earlier ones move on, this one and the later ones start over
                nxt = [grp.after(p) for grp, p in zip(self.groups, picks_per_group)]
                nxt += [[0] * len(grp.resource_groups) for grp in self.groups[g:]]
                failed = [self._failed(m, reason) for m in group.members]
                return _Cycle(False, failed, f"couldn't assign flavors to pod set {group.members[0].podset.name}: "
                              f"{reason}", [], nxt, hopeless=not any(starts[g]))
            picks_per_group.append(picks)
        results: dict[str, PodSetFit] = {}
        by_flavor: dict[str, tuple[Flavor, list[PodSetRequest]]] = {}
        nxt = [grp.after(p) for grp, p in zip(self.groups, picks_per_group)]
        names = sorted({f.name for picks in picks_per_group for _, f in picks})
        for group, picks in zip(self.groups, picks_per_group):
            tas = list({f.name: f for _, f in picks if f.tas}.values())
            for m in group.members:
                if not m.tas or m.podset.count == 0:
                    results[m.podset.name] = self._without_tas(m, picks)
                elif len(tas) != 1:
                    text = ("more than one TAS flavor assigned: " + ", ".join(sorted(f.name for f in tas))
                            if tas else "no TAS flavor assigned")
                    return _Cycle(False, [self._failed(m, text)],
                                  f"failed to assign flavors to pod set {m.podset.name}: {text}", names, nxt)
                else:
                    by_flavor.setdefault(tas[0].name, (tas[0], []))[1].append(m.request)
        shared: dict[str, Resources] = {}
        used: dict[str, Resources] = {}
        message = ""
        for name in sorted(by_flavor):
            flavor, reqs = by_flavor[name]
            # TASHandleOverlappingFlavors: flavors placing by hostname share what this Workload took
            assumed = shared if flavor.levels and flavor.levels[-1] == HOSTNAME else {}
            placed, reason = _place_flavor(self.trees, flavor, reqs, assumed, self.index)
            results.update({p.podset: p for p in placed})
            if reason and not message:
                first = next(p for p in placed if not p.fits)
                message = f"couldn't assign flavors to pod set {first.podset}: {reason}"
            if assumed is not shared:
                _merge(used, assumed)
        _merge(used, shared)
        podsets = [results.get(m.podset.name) or self._failed(m, "not placed: Kueue stopped at an earlier failure")
                   for m in self.members]
        return _Cycle(not message, podsets, message, names, nxt, used)

    def _without_tas(self, m: _Member, picks: list[tuple[int, Flavor]]) -> PodSetFit:
        flavor = picks[0][1].name if picks else None
        if not m.podset.count:
            note = "no pods to place"
        else:
            note = f"no TAS: Kueue admits it on flavor {flavor} and kube-scheduler places the pods"
        return PodSetFit(self.index, m.podset.name, m.podset.count, m.mode, None, True, flavor, note=note)

    def _failed(self, m: _Member, message: str) -> PodSetFit:
        level = m.topology.required or m.topology.preferred
        return PodSetFit(self.index, m.podset.name, m.podset.count, m.mode, level, False, message=message)

    def run(self) -> tuple[_Cycle, list[Attempt]]:
        """Cycles until one admits the Workload, or the searches come round again.

        When none admits it, the answer is the last cycle's: once every flavor has been tried Kueue parks the
        Workload, and its QuotaReserved message stays the one that cycle wrote.
        """
        starts, seen = self.first_starts(), set()
        attempts: list[Attempt] = []
        last: _Cycle | None = None
        while True:
            key = tuple(tuple(s) for s in starts)
            if key in seen:
                break
            seen.add(key)
            last = self.cycle(starts)
            attempts.append(Attempt(self.index, last.flavors, last.fits, last.message))
            if last.fits or last.hopeless:
                break
            starts = last.next_starts
        assert last is not None
        return last, attempts


def _merge(total: dict[str, Resources], more: Mapping[str, Resources]) -> None:
    for leaf, used in more.items():
        into = total.setdefault(leaf, {})
        for key, value in used.items():
            into[key] = into.get(key, 0) + value


def refuse_to_guess(workload: Workload, gates: Gates, uses_tas: bool) -> None:
    """Raise CannotJudge when Kueue would run code `fit` does not model for this job."""
    if not uses_tas:
        return
    annotations = (workload.obj.get("metadata") or {}).get("annotations") or {}
    if gates["ElasticJobsViaWorkloadSlices"] and str(annotations.get(ELASTIC_JOB)) == "true":
        raise CannotJudge(f"{workload.ref}: cannot judge: an elastic job ({ELASTIC_JOB}) is placed in workload "
                          "slices, which fit does not model (TAS for them is the ElasticJobsViaWorkloadSlicesWithTAS "
                          "gate, alpha, off by default)")
    for gate in gates.unmodelled():
        if gate == "TASBalancedPlacement" and not any(
                ps.annotations.get("kueue.x-k8s.io/podset-preferred-topology") for ps in workload.podsets):
            continue
        if gate == "TASRespectNodeAffinityPreferred" and not any(
                ((ps.spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("preferredDuringSchedulingIgnoredDuringExecution") for ps in workload.podsets):
            continue
        raise CannotJudge(f"{workload.ref}: cannot judge: Kueue runs with {gate} on, which fit does not model")


def fit(workload: Workload, nodes: Sequence[Node], free: Mapping[str, Resources], queue: Queue,
        gates: Gates = Gates()) -> FitReport:
    """Kueue's answer for every Workload the object makes, in order, each after the ones before it."""
    trees = _Trees(nodes, free, gates)
    podsets: list[PodSetFit] = []
    attempts: list[Attempt] = []
    message = ""
    fits = True
    for index in range(workload.workloads):
        wf = _WorkloadFit(workload, queue, trees, index)
        if index == 0:
            refuse_to_guess(workload, gates, any(m.tas for m in wf.members))
        outcome, tried = wf.run()
        attempts += tried
        podsets += outcome.podsets
        if not outcome.fits:
            fits, message = False, outcome.message
            break
        _merge(trees.admitted, outcome.usage)
    return _report(fits, podsets, attempts, message, queue, trees)


def _report(fits: bool, podsets: list[PodSetFit], attempts: list[Attempt], message: str, queue: Queue,
            trees: _Trees) -> FitReport:
    """The report, headed by the flavor of the PodSet that decides (the first that failed, else the largest)."""
    report = FitReport(fits, None, None, (), podsets, Exclusions(), 0, message, attempts=attempts)
    main = report.deciding
    by_name = {f.name: f for f in queue.flavors}
    flavor = by_name.get(main.flavor) if main and main.flavor else None
    if flavor is None and main is not None and not main.fits:
        flavor = next((f for f in queue.flavors if f.tas), None)
    if flavor is not None:
        report.flavor, report.flavor_labels = flavor.name, flavor.node_labels
    if flavor is not None and flavor.tas:
        tree = trees.tree(flavor)
        report.topology, report.levels = flavor.topology, tree.keys
        report.excluded, report.nodes_counted = tree.excluded, len(tree.leaves)
    if not podsets:
        report.problems.append("the job has no PodSets with pods; Kueue has nothing to place")
    if not queue.flavors:
        report.problems.append("the ClusterQueue has no flavors")
    return report
