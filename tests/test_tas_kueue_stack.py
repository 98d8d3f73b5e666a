"""`fit` equals the real Kueue: the scenarios of testkit/tas_scenarios.py replayed on a test cluster with the
Kueue v0.19.2 manager (`hack/test-cluster up DIR --with-kueue`), compared with what `topolabel fit` predicts.

Every Job and JobSet scenario of the table, and seeded random ones, is created on the cluster under its own
names (testkit/tas_replay.py): nodes with their status, running pods bound to them, the Kueue objects, the job.
Kueue must admit exactly the Workloads `fit` says fit, with the same pods on the same nodes, and a pending
Workload must show the message `fit` gives. (LeaderWorkerSet, PyTorchJob and Ray need controllers the test
cluster does not run; hack/tas-oracle judges those.) Scenarios run a few at a time, on their own names.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any


from testkit.kubecluster import kueue_cluster  # noqa: F401 (a fixture)
from testkit.tas_replay import REPLAYABLE, cleanup, isolate, replay
from testkit.tas_scenarios import Scenario, random_scenario, table
from tests.test_tas_oracle import topolabel_predicts


RANDOM_SEEDS = range(24)
PARALLEL = 6


def _compare(api: Any, sc: Scenario, tag: str) -> str | None:
    """None when Kueue decides what `fit` predicts; else both answers."""
    iso = isolate(sc, tag)
    predicted = topolabel_predicts(iso)
    try:
        got = replay(api, iso, pending_for=3.0, admit_within=60.0 if predicted[-1]["admitted"] else 0.0)
    finally:
        cleanup(api, iso)
    want = predicted[-1]  # Job and JobSet make one Workload
    # Pending, Kueue tries the flavors in turn, again whenever the cluster changes: the Workload shows one
    # cycle's message after another, each one fit predicts
    same = (got["admitted"] == want["admitted"] and got["placed"] == want["placed"]
            and (want["admitted"] or (got["messages"] and set(got["messages"]) <= set(want["cycles"]))))
    return None if same else f"{sc.name}:\n  fit:   {want}\n  Kueue: {got}"


def _run_all(api: Any, scenarios: list[tuple[Scenario, str]]) -> list[str]:
    with ThreadPoolExecutor(PARALLEL) as pool:
        return [d for d in pool.map(lambda pair: _compare(api, *pair), scenarios) if d]


def test_fit_equals_the_real_kueue_on_the_table(kueue_cluster) -> None:
    scenarios = [(sc, f"t{i}") for i, sc in enumerate(table()) if sc.job["kind"] in REPLAYABLE]
    assert len(scenarios) >= 20
    assert _run_all(kueue_cluster.api(), scenarios) == []


def test_fit_equals_the_real_kueue_on_random_scenarios(kueue_cluster) -> None:
    scenarios = [(sc, f"r{seed}") for seed in RANDOM_SEEDS
                 for sc in [random_scenario(seed)] if sc.job["kind"] in REPLAYABLE]
    assert _run_all(kueue_cluster.api(), scenarios) == []
