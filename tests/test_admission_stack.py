"""`fit`'s whole admission against the real Kueue v0.19.2 manager: queues, quota in cohorts, preemption, TAS.

Scenarios of tests/quota_scenarios.py, chosen so that every kind of answer is there (admitted; pending for
quota, for topology, for the queue; admitted only by preempting), are replayed on a test cluster with
the Kueue manager (tests/admission_replay.py): the background jobs Kueue admits first, then `fit` reads
the cluster as `topolabel fit --kubeconfig` does and answers for the job, then the job is submitted. Kueue
must admit what `fit` says fits, on the same nodes; keep pending what `fit` says does not fit, with the
message `fit` gives on its Workload's QuotaReserved condition; and preempt exactly the workloads `fit`
names, saying so in the same words. Then `capacity`: it says K, and K + 1 copies submitted make Kueue
admit exactly K. Then the advice: for jobs that do not fit, one suggested change, applied, is admitted.
"""

from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from kueue_config.tas.advice import advise
from kueue_config.tas.judge import judge
from kueue_config.tas.slots import Shape, how_many
from kueue_config.tas.workloads import workload_of
from tests.admission_replay import Replay, isolate
from tests.kubecluster import KubeCluster, kueue_cluster  # noqa: F401 (a fixture)
from tests.kueue_workloads import admission, workload_of as workload_of_job
from tests.operatorrun import wait_until
from tests.quota_scenarios import QuotaScenario, random_scenario
from tests.tas_cluster import GPU
from tests.tas_replay import _create_job
from tests.test_admission_oracle import SEEDS, _oracle
from tests.tas_oracle import oracle_verdict

pytestmark = pytest.mark.slow
PARALLEL = 6
WANTED = {"fits": 9, "preempts": 8, "quota": 10, "topology": 10, "queue": 4}


def _kind(verdict: dict[str, Any]) -> str:
    if verdict["outcome"] != "pending":
        return verdict["outcome"]
    message = verdict["message"]
    if "LocalQueue" in message or "ClusterQueue" in message or "namespace" in message:
        return "queue"
    return "quota" if "insufficient" in message else "topology"


def chosen() -> list[tuple[int, str]]:
    """Seeds whose oracle verdicts cover every kind of answer, WANTED of each, in seed order."""
    taken: dict[str, int] = {k: 0 for k in WANTED}
    out = []
    for seed in SEEDS:
        sc = random_scenario(seed)
        kind = _kind(oracle_verdict(_oracle(seed), workload_of(sc.job, sc.name)))  # type: ignore[arg-type]
        if kind in taken and taken[kind] < WANTED[kind]:
            taken[kind] += 1
            out.append((seed, kind))
    return out


def _predicted(report: Any) -> dict[str, Any]:
    return {"outcome": report.outcome, "message": report.kueue_message,
            "cycles": [a.message for a in report.attempts if not a.fits] or [report.kueue_message],
            "placed": {p.podset: {n.get("node") or n["domain"]: n["pods"] for n in p.nodes} for p in report.podsets},
            "targets": sorted(t.workload.ref for t in report.preempting)}


def _same(fit: dict[str, Any], got: dict[str, Any]) -> bool:
    if fit["outcome"] == "fits":
        return got["admitted"] and got["placed"] == fit["placed"]
    if fit["outcome"] == "preempts":
        return fit["message"] in got["messages"] and got["preempted"] == fit["targets"]
    return not got["admitted"] and bool(got["messages"]) and set(got["messages"]) <= set(fit["cycles"])


def _replay(api: Any, seed: int, tag: str) -> str | None:
    sc = isolate(random_scenario(seed), tag)
    admitted = [b["name"] for b in _oracle(seed)["background"] if b["admitted"]]
    replay = Replay(api, sc)
    try:
        missed = replay.setup(admitted)
        if missed:
            return f"{sc.name}: Kueue did not admit background job(s) {missed} the oracle admitted"
        workload = workload_of(sc.job, sc.name)
        assert workload is not None
        fit = _predicted(judge(workload, replay.inputs()))
        got = replay.submit(fit["outcome"] == "fits")
    finally:
        replay.cleanup()
    return None if _same(fit, got) else f"{sc.name}:\n  fit:   {fit}\n  Kueue: {got}"


def test_the_chosen_scenarios_cover_every_answer() -> None:
    kinds = [k for _, k in chosen()]
    assert len(kinds) >= 40 and {k: kinds.count(k) for k in WANTED} == WANTED


def test_fit_equals_the_real_kueue_on_admission(kueue_cluster: KubeCluster) -> None:  # noqa: F811
    api = kueue_cluster.api()
    with ThreadPoolExecutor(PARALLEL) as pool:
        diffs = [d for d in pool.map(lambda pair: _replay(api, pair[0], f"q{pair[0]}"), chosen()) if d]
    assert diffs == []


def _submit_copies(replay: Replay, job: dict[str, Any], copies: int) -> int:
    """Submit `copies` of the job one after another, each waited for; how many Kueue admitted."""
    admitted = 0
    for i in range(copies):
        one = copy.deepcopy(job)
        one["metadata"]["name"] = f"{job['metadata']['name']}-{i}"
        ns = one["metadata"]["namespace"]
        uid = _create_job(replay.api, one)

        def decided() -> Any:
            wl = workload_of_job(replay.api, ns, uid)
            return wl and (admission(wl) is not None or (wl.get("status") or {}).get("conditions"))
        wait_until(decided, 120, f"copy {i} decided")
        wl = wait_until(lambda: workload_of_job(replay.api, ns, uid), 5, "its Workload")
        if admission(wl) is None:  # a scheduling cycle may still be on the way: give it a moment
            try:
                wait_until(lambda: admission(workload_of_job(replay.api, ns, uid) or {}), 5, "admission")
            except AssertionError:
                continue
        admitted += 1
    return admitted


CAPACITY_SEEDS = (3, 11, 19)


@pytest.mark.parametrize("seed", CAPACITY_SEEDS)
def test_capacity_k_then_k_plus_one_admits_exactly_k(kueue_cluster: KubeCluster, seed: int) -> None:  # noqa: F811
    """`capacity` says K jobs of a shape fit; K + 1 copies submitted, Kueue admits exactly K."""
    base = random_scenario(seed)
    sc = isolate(QuotaScenario(base.name, base.nodes, base.kueue, base.namespaces, base.job, [], base.pods), f"c{seed}")
    replay = Replay(kueue_cluster.api(), sc)
    try:
        replay.setup([])
        team = sc.job["metadata"]["namespace"]
        shape = Shape(2, {GPU: "4"}, base.kueue[0]["spec"]["levels"][-2]["nodeLabel"], queue="gpu", namespace=team)
        expected = how_many(shape, replay.inputs()).jobs
        job = shape.job()
        job["metadata"]["name"] = "slot"
        job["spec"]["template"]["spec"]["tolerations"] = [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]
        assert _submit_copies(replay, job, expected + 1) == expected
    finally:
        replay.cleanup()


def _advice_case(api: Any, seed: int, tag: str) -> str | None:
    sc = isolate(random_scenario(seed), tag)
    replay = Replay(api, sc)
    try:
        replay.setup([b["name"] for b in _oracle(seed)["background"] if b["admitted"]])
        workload = workload_of(sc.job, sc.name)
        assert workload is not None
        inputs = replay.inputs()
        report = judge(workload, inputs)
        tips = [a for a in advise(workload, report, inputs) if a.manifest is not None]
        if not tips:
            return None
        changed = copy.deepcopy(replay.sc)
        changed.job = tips[0].manifest
        got = Replay(api, changed).submit(True)
        return None if got["admitted"] else f"{sc.name}: advice {tips[0].text!r} applied, Kueue: {got['messages']}"
    finally:
        replay.cleanup()


def test_advice_applied_is_admitted_by_kueue(kueue_cluster: KubeCluster) -> None:  # noqa: F811
    """For jobs that do not fit, the first suggested change to the job, applied, is admitted by Kueue."""
    cases = [seed for seed, kind in chosen() if kind in ("quota", "topology", "queue")][:12]
    with ThreadPoolExecutor(PARALLEL) as pool:
        diffs = [d for d in pool.map(lambda s: _advice_case(kueue_cluster.api(), s, f"a{s}"), cases) if d]
    assert diffs == []
