"""`fit` equals Kueue: topolabel's prediction against Kueue v0.19.2's own scheduler code (hack/tas-oracle).

Each scenario of testkit/tas_scenarios.py - the fixed table and seeded random ones - is decided twice: by
`topolabel fit`, and by the oracle, which runs Kueue's flavor assigner and TAS placement on the same
nodes, pods, Kueue objects and PodSets. They must agree on whether each Workload is admitted, on the pods
per node (or domain) of every PodSet, and on the message Kueue gives when it is not. Where a scenario
records Kueue's answer (worked out by hand, or from Kueue's unit tests), both must give that too.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import pytest

from kueue_config.tas.capacity import free_capacity, parse_pods
from kueue_config.tas.fit import fit
from kueue_config.tas.lint import lint, rejections
from kueue_config.tas.setup import TASSetup
from kueue_config.tas.workloads import QUEUE_LABEL, workload_of
from labeler.io.nodes import parse_nodes
from testkit.tas_oracle import decided, kueue_decides, placement_payload, predicted, run_oracle
from testkit.tas_scenarios import Scenario, random_scenario, table

TABLE = table()
SEEDS = range(120)


def topolabel_predicts(sc: Scenario) -> list[dict[str, Any]]:
    nodes = parse_nodes(sc.nodes, sc.name)
    free = free_capacity(nodes, parse_pods(sc.pods, sc.name))
    workload = workload_of(sc.job, sc.name)
    assert workload is not None
    assert rejections(lint([workload])) == [], "the scenario's job must be one Kueue accepts"
    queue = TASSetup.from_objects(sc.kueue, sc.name).queue(sc.job["metadata"]["labels"][QUEUE_LABEL], "team")
    return predicted(fit(workload, nodes, free, queue), workload)


def _payload(sc: Scenario) -> dict[str, Any]:
    workload = workload_of(sc.job, sc.name)
    assert workload is not None
    return placement_payload(sc.nodes, sc.pods, sc.kueue, workload)


@lru_cache(maxsize=1)
def _everything() -> dict[str, Any]:
    """The oracle's answers for the table and every seed, in one run of it."""
    scenarios = [*TABLE, *(random_scenario(seed) for seed in SEEDS)]
    return {sc.name: r["workloads"] for sc, r in zip(scenarios, run_oracle([_payload(sc) for sc in scenarios]))}


def kueue_says(sc: Scenario) -> list[dict[str, Any]]:
    workload = workload_of(sc.job, sc.name)
    assert workload is not None
    found = _everything().get(sc.name)
    return decided(found if found is not None else kueue_decides(sc.nodes, sc.pods, sc.kueue, workload), workload)


def test_the_table_covers_every_class_of_issue_12() -> None:
    assert len(TABLE) >= 20
    names = " ".join(sc.name for sc in TABLE)
    for word in ("required", "preferred", "unconstrained", "slices", "multi-layer", "JobSet", "leader",
                 "running pods", "pod slots", "tainted", "NotReady", "cordoned", "flavors"):
        assert word in names, word


@pytest.mark.parametrize("sc", TABLE, ids=[sc.name for sc in TABLE])
def test_fit_equals_kueue_on_the_table(sc: Scenario) -> None:
    kueue = kueue_says(sc)
    assert topolabel_predicts(sc) == kueue
    if sc.expect is not None:
        assert kueue == sc.expect, f"Kueue's code no longer gives the answer recorded from {sc.origin}"


@pytest.mark.parametrize("seed", SEEDS)
def test_fit_equals_kueue_on_random_scenarios(seed: int) -> None:
    sc = random_scenario(seed)
    assert topolabel_predicts(sc) == kueue_says(sc), sc.to_dict()


def test_random_scenarios_reach_every_outcome() -> None:
    """The random set is not all one answer: some admitted, some pending, some placed over several domains."""
    outcomes = [kueue_says(random_scenario(seed))[-1] for seed in SEEDS[:60]]
    assert any(o["admitted"] for o in outcomes) and any(not o["admitted"] for o in outcomes)
    assert any(len(nodes) > 1 for o in outcomes for nodes in o["placed"].values())
