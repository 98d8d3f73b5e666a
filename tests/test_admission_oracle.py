"""`fit` equals Kueue on the whole admission: queues, quota in cohorts, preemption, then TAS.

Each scenario of tests/quota_scenarios.py is decided by hack/tas-oracle - Kueue v0.19.2's scheduler cache,
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
from kueue_config.tas.workloads import workload_of
from labeler.nodes import parse_nodes
from tests.quota_scenarios import QuotaScenario, random_scenario
from tests.tas_oracle import admission_payload, oracle_verdict, report_verdict, run_oracle

SEEDS = range(240)


@lru_cache(maxsize=None)
def _oracle(seed: int) -> dict[str, Any]:
    return run_oracle(admission_payload(random_scenario(seed)))


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
