"""`fit`'s whole admission against the real Kueue v0.19.2 manager: queues, quota in cohorts, preemption, TAS.

Scenarios of testkit/quota_scenarios.py, chosen so that every kind of answer is there (admitted; pending for
quota, for topology, for the queue; admitted only by preempting), are replayed on a test cluster with
the Kueue manager (testkit/admission_replay.py): the background jobs Kueue admits first, then `fit` reads
the cluster as `topolabel fit --kubeconfig` does and answers for the job, then the job is submitted. Kueue
must admit what `fit` says fits, on the same nodes; keep pending what `fit` says does not fit, with the
message `fit` gives on its Workload's QuotaReserved condition; and preempt exactly the workloads `fit`
names, saying so in the same words. For a job that does not fit, `fit`'s first advised change, applied to
the job (the original deleted), is admitted; for one, `topolabel why` on the pending Workload gives
Kueue's message. Then `capacity`: it says K, and K + 1 copies submitted make Kueue admit exactly K.
Scenarios run a few at a time, each on its own names.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from kubernetes import client

from kueue_config.tas.advice import advise
from kueue_config.tas.judge import judge
from kueue_config.tas.slots import Shape, how_many
from kueue_config.tas.workloads import workload_of
from testkit.admission_replay import Replay, isolate
from testkit.environment import ROOT
from testkit.kubecluster import KubeCluster, kueue_cluster  # noqa: F401 (a fixture)
from testkit.kueue_workloads import admission, workload_of as workload_of_job, workloads
from testkit.operatorrun import wait_until
from testkit.quota_scenarios import QuotaScenario, cluster_queue, local_queue, namespace, random_scenario
from testkit.tas_cluster import GPU, GPU_TAINT, GPU_TOLERATION
from testkit.tas_oracle import oracle_verdict
from testkit.tas_replay import _create_job
from testkit.tas_scenarios import BLOCK, HOST, RACK, REQ, flavor, job, main_cluster, topology
from tests.test_admission_oracle import SEEDS, _oracle

pytestmark = pytest.mark.slow
PARALLEL = 6
WANTED = {"fits": 8, "preempts": 8, "quota": 10, "topology": 10, "queue": 4}
WHY_SEED = 15  # pending for quota, fewer pods fit: `topolabel why` is asked about it
ADVISED = 15  # the chosen "no"s with advice (11 of 24: the others' queue has no quota for them, is stopped, or
#               only part of a slice would fit; docs/data-scientists.md counts them), and the 4 advice cases


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


def _why(replay: Replay, kubeconfig: str) -> dict[str, Any]:
    """`topolabel why` (a child process, as a person runs it) on the job's pending Workload."""
    ns = replay.sc.job["metadata"]["namespace"]
    (pending,) = [w for w in workloads(replay.api, ns) if not admission(w)]
    done = subprocess.run([sys.executable, "-m", "topolabel.cli", "why", f"{ns}/{pending['metadata']['name']}",
                           "--kubeconfig", kubeconfig, "-o", "json"], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 1, done.stderr
    return json.loads(done.stdout)


KINDS = {"Job": ("batch", "v1", "jobs"), "JobSet": ("jobset.x-k8s.io", "v1alpha2", "jobsets")}


def _delete(api: Any, ns: str, kind: str, name: str) -> None:
    group, version, plural = KINDS[kind]
    client.CustomObjectsApi(api).delete_namespaced_custom_object(group, version, ns, plural, name,
                                                                 propagation_policy="Background")


def _apply_advice(replay: Replay, advice: Any) -> dict[str, Any]:
    """The advice applied, Kueue's decision on the job: the workloads to wait for finish (their jobs deleted),
    and a changed job replaces the job (deleted first, the change submitted), or the job waiting is admitted."""
    ns = replay.sc.job["metadata"]["namespace"]
    (waiting,) = [w for w in workloads(replay.api, ns) if not admission(w)]
    if advice.manifest is not None:
        _delete(replay.api, ns, replay.sc.job["kind"], replay.sc.job["metadata"]["name"])
        wait_until(lambda: not [w for w in workloads(replay.api, ns) if not admission(w)], 60, "its Workload to go")
    for ref in advice.without:
        wl_ns, wl_name = ref.split("/")
        (owner,) = next(w for w in workloads(replay.api, wl_ns) if w["metadata"]["name"] == wl_name)[
            "metadata"]["ownerReferences"]
        _delete(replay.api, wl_ns, owner["kind"], owner["name"])
    if advice.manifest is not None:
        changed = copy.deepcopy(replay.sc)
        changed.job = copy.deepcopy(advice.manifest)
        changed.job["metadata"]["name"] = "advised"
        return Replay(replay.api, changed).submit(True)
    try:
        wait_until(lambda: admission(next(w for w in workloads(replay.api, ns)
                                          if w["metadata"]["uid"] == waiting["metadata"]["uid"])), 60, "admission")
    except AssertionError:
        return {"admitted": False, "messages": replay.messages(waiting, [])}
    return {"admitted": True}


def _replay(api: Any, kubeconfig: str, sc: QuotaScenario, admitted: list[str], tag: str,
            ask_why: bool = False, advice_kind: str | None = None) -> dict[str, Any]:
    """One scenario: whether Kueue decided as `fit` said, whether the advice applied was admitted, and what
    `why` said (when asked)."""
    sc = isolate(sc, tag)
    replay = Replay(api, sc)
    out: dict[str, Any] = {"name": sc.name, "diff": None, "advice": None, "why": None}
    try:
        missed = replay.setup(admitted)
        if missed:
            out["diff"] = f"Kueue did not admit background job(s) {missed} the oracle admitted"
            return out
        workload = workload_of(sc.job, sc.name)
        assert workload is not None
        inputs = replay.inputs()
        report = judge(workload, inputs)
        fit = _predicted(report)
        got = replay.submit(fit["outcome"] == "fits")
        if not _same(fit, got):
            out["diff"] = f"fit: {fit}\n  Kueue: {got}"
            return out
        if ask_why:
            out["why"] = (_why(replay, kubeconfig), got["messages"][-1])
        if fit["outcome"] in ("pending", "blocked"):
            alone = replay.inputs(alone=True)
            tips = [a for a in advise(workload, judge(workload, alone), alone) if advice_kind in (None, a.kind)]
            if tips:
                applied = _apply_advice(replay, tips[0])
                out["advice"] = (tips[0].kind, "admitted" if applied["admitted"]
                                 else f"{tips[0].text!r}: {applied['messages']}")
    finally:
        replay.cleanup()
    return out


def too_big(level: str, pods: int, **nodes: dict[str, Any]) -> QuotaScenario:
    """`pods` pods of 8 GPUs required in one `level` of testkit/tas_scenarios.py's main cluster (blocks of 4 nodes,
    racks of 2, 2 and 4), nodes changed as given, one queue with quota to spare: a job that needs a looser
    topology request."""
    queue = cluster_queue("cq-0", [("gpus", {GPU: {"nominalQuota": "1000"}})], [GPU])
    kueue = [topology("topo", [BLOCK, RACK, HOST]), flavor("gpus", "topo", tolerations=[GPU_TOLERATION]), queue,
             local_queue("gpu", "team-0", "cq-0")]
    manifest = job(pods, {REQ: level})
    manifest["metadata"]["namespace"] = "team-0"
    return QuotaScenario(f"{pods} pods in one {level.rsplit('/', 1)[-1]}", main_cluster(**nodes), kueue,
                         [namespace("team-0")], manifest)


# (scenario, the kind of advice applied): a LocalQueue of the namespace when the job's is stopped; preferred
# instead of required (5 pods, blocks of 4); a coarser level (4 pods; racks of 2, 2 and 3 with n5 tainted)
ADVICE_SEEDS = ((208, "other-queue"), (236, "other-queue"))
MAINTENANCE = {"taints": [GPU_TAINT, {"key": "maintenance", "value": "x", "effect": "NoSchedule"}]}


def admitted_first(seed: int) -> list[str]:
    """The scenario's background jobs the oracle admitted."""
    return [b["name"] for b in _oracle(seed)["background"] if b["admitted"]]


def cases() -> list[tuple[QuotaScenario, list[str], str, bool, str | None]]:
    """_replay's arguments: the chosen scenarios (`why` asked on one), then the advice cases."""
    return [*((random_scenario(seed), admitted_first(seed), f"q{seed}", seed == WHY_SEED, None) for seed, _ in chosen()),
            *((random_scenario(seed), admitted_first(seed), f"a{seed}", False, kind) for seed, kind in ADVICE_SEEDS),
            (too_big(BLOCK, 5), [], "ab", False, "preferred"),
            (too_big(RACK, 4, n5=MAINTENANCE), [], "ar", False, "coarser-level")]


def test_the_chosen_scenarios_cover_every_answer() -> None:
    kinds = [k for _, k in chosen()]
    assert len(kinds) >= 40 and {k: kinds.count(k) for k in WANTED} == WANTED
    assert (WHY_SEED, "quota") in chosen()


def test_fit_equals_the_real_kueue_on_admission(kueue_cluster: KubeCluster) -> None:  # noqa: F811
    api, kubeconfig = kueue_cluster.api(), str(kueue_cluster.kubeconfig)
    with ThreadPoolExecutor(PARALLEL) as pool:
        results = list(pool.map(lambda c: _replay(api, kubeconfig, *c), cases()))
    assert [f"{r['name']}: {r['diff']}" for r in results if r["diff"]] == []
    advised = {r["name"]: r["advice"] for r in results if r["advice"]}
    assert {name: a for name, a in advised.items() if a[1] != "admitted"} == {}
    assert {kind for kind, _ in advised.values()} == {"fewer-pods", "wait-for", "fewer-pods-after-waiting",
                                                      "other-namespace", "other-queue", "preferred", "coarser-level"}
    assert len(advised) == ADVISED, sorted(advised)
    (said, message), = [r["why"] for r in results if r["why"]]
    assert said["outcome"] == "pending" and said["kueueMessage"] == message == said["condition"]["message"]
    assert [a["kind"] for a in said["advice"]][:1] == ["fewer-pods"]


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


CAPACITY_SEEDS = (5, 18)  # K = 6 bound by quota, K = 6 bound by topology


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
        assert expected >= 2
        job = shape.job()
        job["metadata"]["name"] = "slot"
        job["spec"]["template"]["spec"]["tolerations"] = [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]
        assert _submit_copies(replay, job, expected + 1) == expected
    finally:
        replay.cleanup()
