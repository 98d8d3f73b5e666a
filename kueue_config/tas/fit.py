"""Would Kueue's Topology-Aware Scheduling admit this job now, and where? A model of Kueue v0.19.

A workload's PodSets are grouped as Kueue groups them (a leader PodSet with its workers), each group is
placed by `placer.Placer` in the flavor's `tree.TASTree`, and the answer says where, or Kueue's message
when it does not fit.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

from labeler.nodes import Node

from .capacity import PODS, Resources
from .placer import NoFit, Placer, PodSetRequest, podset_request
from .setup import Flavor
from .tree import Exclusions, TASTree, build_tree
from .workloads import Workload


@dataclass
class PodSetFit:
    """The answer for one PodSet: whether and where it fits, and Kueue's message when it does not."""

    workload: int
    podset: str
    pods: int
    mode: str
    level: str | None
    fits: bool
    placed_level: str | None = None
    domains: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    max_pods_in_one_domain: int = 0
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def groups_of(requests: Sequence[PodSetRequest]) -> list[tuple[PodSetRequest, PodSetRequest | None]]:
    """(workers, leader) pairs in Kueue's order: PodSets sharing a group name go together, the 1-pod one leads."""
    order: list[str] = []
    members: dict[str, list[PodSetRequest]] = {}
    for i, req in enumerate(requests):
        key = req.group if req.group else f"#{i}"
        if key not in members:
            order.append(key)
            members[key] = []
        members[key].append(req)
    out: list[tuple[PodSetRequest, PodSetRequest | None]] = []
    for key in order:
        trs = members[key]
        workers, leader = trs[0], (trs[1] if len(trs) > 1 else None)
        if leader is not None and leader.count > workers.count:
            workers, leader = leader, workers
        out.append((workers, leader))
    return out


def fit_workload(tree: TASTree, tolerations: Sequence[Mapping[str, Any]], workload: Workload, topology: str,
                 tas_only: bool = True) -> list[PodSetFit]:
    """Place every Workload the object makes (one per LeaderWorkerSet replica), each after the ones before."""
    assumed: dict[str, Resources] = {}
    placer = Placer(tree, topology, tolerations, assumed)
    results: list[PodSetFit] = []
    for index in range(workload.workloads):
        requests = [r for ps in workload.podsets if ps.count > 0
                    for r in [podset_request(ps, tree.keys, tas_only)] if r is not None]
        for workers, leader in groups_of(requests):
            members = sorted([workers] + ([leader] if leader else []), key=requests.index)
            try:
                placement, most, _ = placer.place(workers, leader)
            except NoFit as exc:
                results += [PodSetFit(index, r.name, r.count, r.mode, r.level, False, message=str(exc),
                                      max_pods_in_one_domain=exc.most) for r in members]
                return results
            for req in members:
                chosen = placement.leaves.get(req.name, [])
                for leaf, n in chosen:
                    used = assumed.setdefault(leaf.id, {})
                    for key, value in {**req.requests, PODS: req.requests.get(PODS, 0) + 1}.items():
                        used[key] = used.get(key, 0) + value * n
                results.append(PodSetFit(
                    index, req.name, req.count, req.mode, req.level, True, tree.keys[placement.level_idx],
                    [{"values": list(v), "pods": n} for v, n in placement.domains(req.name)],
                    [{"node" if tree.hostname_lowest else "domain": leaf.id, "pods": n} for leaf, n in chosen],
                    most))
    return results


@dataclass
class FitReport:
    """Everything `topolabel fit` prints; `to_dict` is the `-o json` form."""

    fits: bool
    topology: str
    flavor: str | None
    levels: tuple[str, ...]
    podsets: list[PodSetFit]
    excluded: Exclusions
    nodes_counted: int
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
            "message": main.message if main else "",
            "topology": self.topology,
            "flavor": self.flavor,
            "levels": list(self.levels),
            "nodes_counted": self.nodes_counted,
            "nodes_excluded": asdict(self.excluded),
            "podsets": [p.to_dict() for p in self.podsets],
            "problems": list(self.problems),
        }


def flavor_conflicts(flavor: Flavor, workload: Workload) -> bool:
    """A flavor whose nodeLabels contradict a pod template's nodeSelector is never chosen by Kueue."""
    for ps in workload.podsets:
        selector = ps.spec.get("nodeSelector") or {}
        if any(k in selector and str(selector[k]) != v for k, v in flavor.node_labels.items()):
            return True
    return False


Trees = dict[tuple[tuple[str, ...], tuple[tuple[str, str], ...]], TASTree]


def fit(workload: Workload, nodes: Sequence[Node], free: Mapping[str, Resources], topology: str,
        keys: Sequence[str], flavors: Sequence[Flavor], tas_only: bool = True, trees: Trees | None = None
        ) -> FitReport:
    """Try the flavors in the ClusterQueue's order, as Kueue does, and answer for the first that fits.

    With no flavor known, every labelled node counts and no flavor toleration applies. `trees` keeps each
    flavor's tree between queries on the same nodes and free capacity (the placer resets its counts).
    """
    trees = {} if trees is None else trees
    candidates = [f for f in flavors if not flavor_conflicts(f, workload)] or [None]
    first: FitReport | None = None
    for flavor in candidates:
        labels = flavor.node_labels if flavor else {}
        tree_key = (tuple(keys), tuple(sorted(labels.items())))
        tree = trees.get(tree_key)
        if tree is None:
            tree = trees[tree_key] = build_tree(keys, nodes, free, labels or None)
        podsets = fit_workload(tree, flavor.tolerations if flavor else (), workload, topology, tas_only)
        report = FitReport(all(p.fits for p in podsets) and bool(podsets), topology,
                           flavor.name if flavor else None, tuple(keys), podsets, tree.excluded, len(tree.leaves))
        if not podsets:
            report.problems.append("no PodSet uses TAS in this ClusterQueue; kube-scheduler alone places the pods")
        if report.fits:
            return report
        first = first or report
    assert first is not None
    return first
