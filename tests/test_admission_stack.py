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
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from kueue_config.tas.advice import advise
from kueue_config.tas.judge import judge
from kueue_config.tas.slots import Shape, how_many
from kueue_config.tas.workloads import workload_of
from tests.admission_replay import Replay, isolate
from tests.kubecluster import KubeCluster, kueue_cluster  # noqa: F401 (a fixture)
from tests.kueue_workloads import admission, workload_of as workload_of_job, workloads
from tests.operatorrun import wait_until
from tests.quota_scenarios import QuotaScenario, cluster_queue, local_queue, namespace, random_scenario
from tests.tas_cluster import GPU, GPU_TOLERATION
from tests.tas_scenarios import BLOCK, HOST, RACK, REQ, flavor, job, main_cluster, topology
from tests.tas_replay import _create_job
from topolabel.cli import main
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


CAPACITY_SEEDS = (5, 13, 18)  # K = 6 (quota-bound), 4 (quota), 6 (topology)


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


def _advice_case(api: Any, sc: QuotaScenario, admitted: list[str], kind: str, tag: str) -> str:
    """"admitted" when the change of this kind that `fit` advises, applied to the job, is admitted by Kueue;
    else what happened instead."""
    sc = isolate(sc, tag)
    replay = Replay(api, sc)
    try:
        replay.setup(admitted)
        workload = workload_of(sc.job, sc.name)
        assert workload is not None
        inputs = replay.inputs()
        report = judge(workload, inputs)
        # the cluster is shared: advice pointing at another scenario's namespace is right, but not this test's
        tips = [a for a in advise(workload, report, inputs) if a.kind == kind
                and a.manifest["metadata"]["namespace"].startswith(f"{tag}-")]
        if not tips:
            return f"{sc.name}: no {kind} advice for {report.kueue_message!r}"
        changed = copy.deepcopy(replay.sc)
        changed.job = copy.deepcopy(tips[0].manifest)
        changed.job["metadata"]["name"] = "advised"
        got = Replay(api, changed).submit(True)
        return "admitted" if got["admitted"] else f"{sc.name}: {tips[0].text!r} applied, Kueue: {got['messages']}"
    finally:
        replay.cleanup()


# (seed, the advice applied): fewer pods against quota and topology, another namespace for a missing queue
ADVICE_SEEDS = ((15, "fewer-pods"), (22, "fewer-pods"), (58, "fewer-pods"), (46, "other-namespace"),
                (91, "fewer-pods"), (109, "fewer-pods"), (229, "fewer-pods"))


def too_big_for_a_block() -> QuotaScenario:
    """5 pods of 8 GPUs, each block holding 4 (tests/tas_scenarios.py's main cluster), one queue."""
    queue = cluster_queue("cq-0", [("gpus", {GPU: {"nominalQuota": "1000"}})], [GPU])
    kueue = [topology("topo", [BLOCK, RACK, HOST]), flavor("gpus", "topo", tolerations=[GPU_TOLERATION]), queue,
             local_queue("gpu", "team-0", "cq-0")]
    manifest = job(5, {REQ: BLOCK})
    manifest["metadata"]["namespace"] = "team-0"
    return QuotaScenario("too big for a block", main_cluster(), kueue, [namespace("team-0")], manifest)


def test_advice_applied_is_admitted_by_kueue(kueue_cluster: KubeCluster) -> None:  # noqa: F811
    """For jobs that do not fit, a change `fit` advises, applied to the job, is admitted by Kueue: fewer pods,
    preferred instead of required, the namespace where the queue exists."""
    cases = [(random_scenario(seed), [b["name"] for b in _oracle(seed)["background"] if b["admitted"]], kind,
              f"a{seed}") for seed, kind in ADVICE_SEEDS]
    cases += [(too_big_for_a_block(), [], kind, f"ab{i}") for i, kind in enumerate(("fewer-pods", "preferred"))]
    with ThreadPoolExecutor(PARALLEL) as pool:
        results = list(pool.map(lambda c: _advice_case(kueue_cluster.api(), *c), cases))
    assert results == ["admitted"] * len(cases), results


def test_why_answers_for_a_pending_workload(kueue_cluster: KubeCluster, capsys) -> None:  # noqa: F811
    """`topolabel why NAMESPACE/WORKLOAD` on a Workload Kueue keeps pending for quota: Kueue's own message, and
    fewer pods as advice; on an admitted one: admitted."""
    seed = 15  # pending for quota; fewer pods fit
    sc = isolate(random_scenario(seed), f"w{seed}")
    replay = Replay(kueue_cluster.api(), sc)
    try:
        replay.setup([b["name"] for b in _oracle(seed)["background"] if b["admitted"]])
        got = replay.submit(False)
        assert not got["admitted"]
        ns = sc.job["metadata"]["namespace"]
        (pending,) = [w for w in workloads(replay.api, ns) if not admission(w)]
        ref = f"{ns}/{pending['metadata']['name']}"
        kubeconfig = ["--kubeconfig", str(kueue_cluster.kubeconfig)]
        assert main(["why", ref, *kubeconfig, "-o", "json"]) == 1
        said = json.loads(capsys.readouterr().out)
        assert said["outcome"] == "pending" and said["kueueMessage"] == got["messages"][-1]
        assert said["kueueMessage"] == said["condition"]["message"]
        assert [a["kind"] for a in said["advice"]][:1] == ["fewer-pods"]
        admitted = next(w for ns_ in sc.namespaces for w in workloads(replay.api, ns_["metadata"]["name"])
                        if admission(w))
        assert main(["why", f"{admitted['metadata']['namespace']}/{admitted['metadata']['name']}", *kubeconfig]) == 0
        assert "is admitted" in capsys.readouterr().out
    finally:
        replay.cleanup()
