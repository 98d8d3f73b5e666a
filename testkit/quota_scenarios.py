"""Admission scenarios with quota: ClusterQueues in cohorts, limits, priorities, workloads already admitted.

Each scenario is what a test cluster would be given - Nodes and Pods as the API serves them, Namespaces,
Kueue v1beta2 objects (Topology, ResourceFlavors, Cohorts, ClusterQueues, LocalQueues,
WorkloadPriorityClasses), `background` jobs submitted first (Kueue admits what it can, in order), and the
`job` judged after them - so the same scenario is decided by hack/tas-oracle (Kueue's scheduler code) and
replayed on a real Kueue manager (tests/test_admission_stack.py).

`random_scenario(seed)` draws: 2-3 levels, one or two pools, running pods; one to three ClusterQueues,
alone or in a cohort (sometimes a cohort under another, sometimes with quota of its own), nominal quotas,
borrowing and lending limits, `pods` sometimes a covered resource; preemption within the queue and in the
cohort, borrowWithinCohort, flavorFungibility; a namespaceSelector, a stopped queue or a missing LocalQueue
now and then; background jobs at three priorities; a job of random size, mode and level.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from testkit.tas_cluster import GPU, GPU_TOLERATION
from testkit.tas_scenarios import (API, BLOCK, HOST, QUEUE, RACK, ZONE, _random_annotations, _random_nodes, _random_pods,
                                 flavor, job, jobset, topology)

PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
PRIORITIES = {"low": 10, "high": 100}
TEAMS = ("team-0", "team-1", "team-2")


@dataclass
class QuotaScenario:
    name: str
    nodes: list[dict[str, Any]]
    kueue: list[dict[str, Any]]
    namespaces: list[dict[str, Any]]
    job: dict[str, Any]
    background: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "nodes": self.nodes, "pods": self.pods, "kueue": self.kueue,
                "namespaces": self.namespaces, "background": self.background, "job": self.job}


def namespace(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {
        "kubernetes.io/metadata.name": name, **(labels or {})}}}


def priority_classes() -> list[dict[str, Any]]:
    return [{"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": n}, "value": v}
            for n, v in PRIORITIES.items()]


def _limits(rng: random.Random, nominal: int, capacity: int, in_cohort: bool) -> dict[str, str]:
    """A GPU quota; limits only in a cohort (Kueue's webhook refuses them on a queue without one)."""
    out = {"nominalQuota": str(nominal)}
    if not in_cohort:
        return out
    if rng.random() < 0.35:
        out["borrowingLimit"] = str(rng.choice([0, 8, 16, 32, capacity]))
    if rng.random() < 0.3:
        out["lendingLimit"] = str(rng.randint(0, nominal // 8) * 8 if nominal else 0)
    return out


def cluster_queue(name: str, flavors: list[tuple[str, dict[str, dict[str, str]]]], covered: list[str],
                  cohort: str | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": covered, "flavors": [
        {"name": f, "resources": [{"name": r, **quotas[r]} for r in covered]} for f, quotas in flavors]}]}
    if cohort:
        body["cohortName"] = cohort
    body.update(spec)
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": body}


def local_queue(name: str, namespace_name: str, cq: str) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace_name},
            "spec": {"clusterQueue": cq}}


def _job(rng: random.Random, levels: list[str], name: str, team: str, queue: str = "gpu",
         priorities: tuple[str | None, ...] = (None, "low", "high")) -> dict[str, Any]:
    count = rng.choice([1, 2, 2, 3, 4, 4, 6, 8])
    gpus = rng.choice([1, 2, 4, 8, 8])
    if rng.random() < 0.8:
        manifest = job(count, _random_annotations(rng, levels, count), gpus=gpus)
    else:
        manifest = jobset([("w", 1, count, _random_annotations(rng, levels, count))], gpus=gpus)
    meta = manifest["metadata"]
    meta["name"], meta["namespace"], meta["labels"] = name, team, {QUEUE: queue}
    priority = rng.choice(priorities)
    if priority:
        meta["labels"][PRIORITY_LABEL] = priority
    return manifest


def _policies(rng: random.Random, in_cohort: bool, hot: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    preemption: dict[str, Any] = {}
    if hot:
        preemption["withinClusterQueue"] = "LowerPriority"
        if in_cohort:
            preemption["reclaimWithinCohort"] = rng.choice(["LowerPriority", "Any"])
    else:
        if rng.random() < 0.75:
            preemption["withinClusterQueue"] = rng.choice(["Never", "LowerPriority", "LowerPriority",
                                                           "LowerOrNewerEqualPriority"])
        if in_cohort and rng.random() < 0.7:
            preemption["reclaimWithinCohort"] = rng.choice(["Never", "LowerPriority", "Any"])
    # the webhook refuses borrowWithinCohort beside reclaimWithinCohort Never
    if preemption.get("reclaimWithinCohort", "Never") != "Never" and rng.random() < 0.3:
        borrow: dict[str, Any] = {"policy": "LowerPriority"}
        if rng.random() < 0.5:
            borrow["maxPriorityThreshold"] = rng.choice([0, 10, 50])
        preemption["borrowWithinCohort"] = borrow
    if preemption:
        spec["preemption"] = preemption
    if rng.random() < 0.3:
        spec["flavorFungibility"] = {"whenCanBorrow": rng.choice(["MayStopSearch", "TryNextFlavor"]),
                                     "whenCanPreempt": rng.choice(["MayStopSearch", "TryNextFlavor"])}
    return spec


def random_scenario(seed: int) -> QuotaScenario:
    """A valid scenario of random shape (the same seed gives the same scenario)."""
    rng = random.Random(10_000 + seed)
    hot = seed % 3 == 2  # a third: low-priority jobs fill the queues, the job has high priority (preemption)
    levels = rng.choice([[BLOCK, RACK, HOST], [BLOCK, RACK, HOST], [ZONE, BLOCK, HOST], [BLOCK, RACK]])
    pools = ["a"] if rng.random() < 0.5 else ["a", "b"]
    nodes = _random_nodes(rng, levels, pools)
    pods = _random_pods(rng, nodes) if rng.random() < 0.5 else []
    capacity = {p: sum(int(n["status"]["allocatable"][GPU]) for n in nodes if n["metadata"]["labels"]["pool"] == p)
                for p in pools}
    kueue: list[dict[str, Any]] = [topology("topo", levels), *priority_classes()]
    kueue += [flavor(f"pool-{p}", "topo", {"pool": p}, [GPU_TOLERATION]) for p in pools]
    covered = rng.choice([[GPU], ["cpu", "memory", GPU], [GPU, "pods"]])
    n_queues = rng.choice([1, 2, 2, 3])
    cohorts: list[str | None] = [None] * n_queues
    if n_queues > 1 and rng.random() < 0.85:
        nested = rng.random() < 0.3
        cohorts = [("org" if not nested or i == 0 else "research") for i in range(n_queues)]
        if nested:
            kueue.append({"apiVersion": API, "kind": "Cohort", "metadata": {"name": "research"},
                          "spec": {"parentName": "org"}})
        if rng.random() < 0.3:  # a cohort with quota of its own
            kueue.append({"apiVersion": API, "kind": "Cohort", "metadata": {"name": "org"}, "spec": {"resourceGroups": [
                {"coveredResources": [GPU], "flavors": [
                    {"name": f"pool-{p}", "resources": [{"name": GPU, "nominalQuota": str(rng.choice([8, 16]))}]}
                    for p in pools]}]}})
    names = [f"cq-{i}" for i in range(n_queues)]
    for i, name in enumerate(names):
        order = rng.sample(pools, k=len(pools)) if rng.random() < 0.8 else [rng.choice(pools)]
        flavors = []
        for p in order:
            share = rng.choice([0.0, 0.25, 0.5, 0.5, 0.75, 1.0]) / (n_queues if cohorts[i] else 1)
            nominal = int(capacity[p] * share) // 8 * 8
            quotas = {GPU: _limits(rng, nominal, capacity[p], cohorts[i] is not None), "cpu": {"nominalQuota": "1000"},
                      "memory": {"nominalQuota": "100Ti"}, "pods": {"nominalQuota": str(rng.choice([4, 8, 50]))}}
            flavors.append((f"pool-{p}", quotas))
        spec = _policies(rng, cohorts[i] is not None, hot)
        if i == 0 and rng.random() < 0.05:
            spec["stopPolicy"] = "Hold"
        if i == 0 and rng.random() < 0.08:
            spec["namespaceSelector"] = {"matchLabels": {"gpu-access": "yes"}}
        kueue.append(cluster_queue(name, flavors, covered, cohorts[i], **spec))
    teams = TEAMS[:n_queues]
    namespaces = [namespace(t, {"gpu-access": "yes"} if rng.random() < 0.5 else None) for t in teams]
    kueue += [local_queue("gpu", t, cq) for t, cq in zip(teams, names)]
    background = [_job(rng, levels, f"bg-{k}", teams[0] if rng.random() < 0.5 else rng.choice(teams),
                       priorities=("low",) if hot else (None, "low", "high"))
                  for k in range(rng.choice([3, 4, 5, 6, 7] if hot else [0, 1, 2, 3, 4, 5]))]
    probe = _job(rng, levels, "train", teams[0], "missing" if rng.random() < 0.04 else "gpu",
                 priorities=("high",) if hot else (None, "low", "high"))
    return QuotaScenario(f"quota {seed}", nodes, kueue, namespaces, probe, background, pods)
