"""`fit` equals Kueue on the whole admission: queues, quota in cohorts, preemption, then TAS.

Each scenario of testkit/quota_scenarios.py is decided by hack/tas-oracle - Kueue v0.19.2's scheduler cache,
flavor assigner and classical preemptor - which first admits the scenario's background jobs as Kueue
would, then judges the job. `fit` is given what a cluster would show at that moment: the nodes and pods,
the Kueue objects, the namespaces, and the Workload objects the oracle admitted (read as `fit` reads them
from a cluster). Both must agree on the outcome (admitted, admitted only by preempting, pending), where
every pod goes, the workloads to preempt, and Kueue's message of every scheduling cycle.
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache
from typing import Any

import pytest

from kueue_config.tas.capacity import parse_pods
from kueue_config.tas.judge import Inputs, judge
from kueue_config.tas.setup import TASSetup
from kueue_config.tas.slots import Shape, how_many
from kueue_config.tas.workloads import workload_of
from labeler.io.nodes import parse_nodes
from testkit.quota_scenarios import QuotaScenario, random_scenario
from testkit.tas_cluster import GPU
from testkit.tas_oracle import admission_payload, oracle_verdict, report_verdict, run_oracle

SEEDS = range(240)


@lru_cache(maxsize=1)
def _everything() -> dict[int, dict[str, Any]]:
    """The oracle's answers for every seed, in one run of it."""
    return dict(zip(SEEDS, run_oracle([admission_payload(random_scenario(seed)) for seed in SEEDS])))


def _oracle(seed: int) -> dict[str, Any]:
    return _everything()[seed] if seed in SEEDS else run_oracle(admission_payload(random_scenario(seed)))


def inputs_of(sc: QuotaScenario, admitted: list[dict[str, Any]]) -> Inputs:
    """What `fit` reads from a cluster showing the scenario with these Workloads admitted."""
    namespaces = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in sc.namespaces}
    return Inputs(TASSetup.from_objects(sc.kueue, sc.name), parse_nodes(sc.nodes, sc.name),
                  parse_pods(sc.pods, sc.name), admitted, namespaces, origin=sc.name)


def both(seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    sc = random_scenario(seed)
    result = _oracle(seed)
    workload = workload_of(sc.job, sc.name)
    assert workload is not None
    admitted = [b["object"] for b in result["background"] if b["admitted"]]
    report = judge(workload, inputs_of(sc, admitted))
    return report_verdict(report, workload), oracle_verdict(result, workload)


@pytest.mark.parametrize("seed", SEEDS)
def test_fit_equals_kueue_on_admission_scenarios(seed: int) -> None:
    fit, kueue = both(seed)
    assert fit == kueue, random_scenario(seed).to_dict()


def test_the_scenarios_reach_every_outcome() -> None:
    """Not all one answer: admitted, admitted by preempting, pending for quota, for topology, for the queue."""
    kinds: Counter[str] = Counter()
    for seed in SEEDS:
        verdict = oracle_verdict(_oracle(seed), workload_of(random_scenario(seed).job, "x"))  # type: ignore[arg-type]
        message = verdict["message"]
        kinds[verdict["outcome"]] += 1
        kinds["quota"] += "insufficient" in message
        kinds["topology"] += "topology" in message
        kinds["queue"] += "LocalQueue" in message or "ClusterQueue" in message or "namespace" in message
        kinds["borrowing background"] += any(b["admitted"] for b in _oracle(seed)["background"])
    assert all(kinds[k] >= 5 for k in ("fits", "preempts", "pending", "quota", "topology", "borrowing background")), kinds
    assert kinds["queue"] >= 2, kinds


CAPACITY_SEEDS = range(0, 240, 6)
SHAPE = {GPU: "4"}


def _shape(sc: QuotaScenario) -> Shape:
    """2 pods of 4 GPUs, required in the Topology's second level, in the job's queue."""
    levels = [lv["nodeLabel"] for lv in sc.kueue[0]["spec"]["levels"]]
    return Shape(2, SHAPE, levels[min(1, len(levels) - 1)], queue="gpu", namespace=sc.job["metadata"]["namespace"])


@lru_cache(maxsize=1)
def _copies() -> dict[int, tuple[int, list[dict[str, Any]]]]:
    """Per seed: the jobs `capacity` says fit, and the oracle's background answers for the scenario's background
    jobs followed by that many copies plus one (all seeds in one run of the oracle)."""
    counted, payloads = {}, []
    for seed in CAPACITY_SEEDS:
        sc = random_scenario(seed)
        admitted = [b["object"] for b in _oracle(seed)["background"] if b["admitted"]]
        shape = _shape(sc)
        counted[seed] = how_many(shape, inputs_of(sc, admitted)).jobs
        copies = [{**shape.job(), "metadata": {**shape.job()["metadata"], "name": f"copy-{i}"}}
                  for i in range(counted[seed] + 1)]
        payload = admission_payload(QuotaScenario(sc.name, sc.nodes, sc.kueue, sc.namespaces, sc.job,
                                                  [*sc.background, *copies], sc.pods))
        payloads.append({**payload, "workloads": []})
    return {seed: (counted[seed], r["background"]) for seed, r in zip(CAPACITY_SEEDS, run_oracle(payloads))}


@pytest.mark.parametrize("seed", CAPACITY_SEEDS)
def test_capacity_is_what_kueue_admits_of_that_many_copies(seed: int) -> None:
    """`capacity` says K jobs of a shape fit: the oracle, given K + 1 copies after the scenario's background
    jobs, admits exactly K."""
    jobs, background = _copies()[seed]
    before = len(random_scenario(seed).background)
    assert [b["admitted"] for b in background[:before]] == [b["admitted"] for b in _oracle(seed)["background"]]
    assert sum(b["admitted"] for b in background[before:]) == jobs, (seed, jobs)
