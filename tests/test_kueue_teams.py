"""Two teams in a cohort, judged by the real Kueue v0.19.2 manager on a Kubernetes 1.36 control plane.

16 H100 and 16 B200 nodes (8 GPUs each, 128 GPUs a pool) are labelled by `topolabel apply`; `topolabel kueue`
generates the queues from CONFIG below, which uses each way of writing a quota: team-a gets half of each
pool rounded down to a step of 32 (64), team-b 64 H100 GPUs as a fixed number and half of the B200 GPUs as
a fraction (64). team-a may borrow at most 32 GPUs a pool and lends at most a quarter of each (32); both
take back what they lent (`reclaimWithinCohort: Any`). What Kueue decides is read from its Workloads and
ClusterQueues, never from topolabel's own model:

- each limit caps what a team can take although the cohort holds more: Kueue reports 96 GPUs as the most
  team-a can have of B200 (its borrowingLimit) and team-b of H100 (team-a's lendingLimit), where 128 idle
  GPUs are in the pool, and leaves a 104-GPU job pending;
- team-a borrows team-b's idle B200 GPUs for a 96-GPU job (32 more than its quota);
- team-b then asks for its own quota: Kueue preempts team-a's job (InCohortReclamation) and admits team-b's.

The nodes have no kubelet (docs/testing.md); Kueue's decisions do not need one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from kubernetes import client

from hack.synth import B200, H100, gke_cluster
from testkit.kubecluster import KubeCluster, kueue_cluster  # noqa: F401
from testkit.kueue_workloads import (GROUP, QUEUE_LABEL, VERSION, admission, condition, is_admitted, pending_message,
                                   workload_of, workloads)
from testkit.operatorrun import wait_until
from topolabel.cli import main
from topolabel.operator.kueue import covers

pytestmark = pytest.mark.slow
TEAMS = ("team-a", "team-b")
GPU = "nvidia.com/gpu"
POOL_LABEL = "cloud.google.com/gke-accelerator"
WAIT = 180  # seconds for one decision of Kueue's, on a loaded 2-core machine
CONFIG = {
    "keyPrefix": "topolabel.dev/",
    "source": {"type": "labels", "preset": "gke"},
    "pools": {"label": POOL_LABEL, "resources": [GPU]},
    "kueue": {
        "topologyName": "gke",
        "quota": {GPU: {"fraction": 0.5, "step": 32}},  # 64 of 128
        "cohorts": [{"name": "research"}],
        "clusterQueues": [
            {"name": "team-a", "cohort": "research",
             "borrowingLimit": {GPU: 32}, "lendingLimit": {GPU: {"fraction": 0.25}},
             "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}},
            {"name": "team-b", "cohort": "research",
             "flavors": [{"pool": H100.accelerator, "quota": {GPU: 64}},
                         {"pool": B200.accelerator, "quota": {GPU: {"fraction": 0.5}}}],
             "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}},
        ],
        "localQueues": [{"name": "gpu", "namespaces": ["team-a"], "clusterQueue": "team-a"},
                        {"name": "gpu", "namespaces": ["team-b"], "clusterQueue": "team-b"}],
    },
}


class Teams:
    """The cluster with the generated queues applied, and what the tests ask it."""

    def __init__(self, cluster: KubeCluster, generated: list[dict[str, Any]]) -> None:
        self.cluster = cluster
        self.generated = generated
        self.api = cluster.api()
        self.batch = client.BatchV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)

    def flavor(self, pool: str) -> str:
        """The ResourceFlavor topolabel generated for a pool."""
        (name,) = [o["metadata"]["name"] for o in self.generated
                   if o["kind"] == "ResourceFlavor" and o["spec"]["nodeLabels"] == {POOL_LABEL: pool}]
        return name

    def nominal(self, queue: str, pool: str) -> int:
        """The GPU nominalQuota topolabel wrote for a ClusterQueue and pool."""
        (cq,) = [o for o in self.generated if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == queue]
        (flavor,) = [f for g in cq["spec"]["resourceGroups"] for f in g["flavors"] if f["name"] == self.flavor(pool)]
        return int(next(r["nominalQuota"] for r in flavor["resources"] if r["name"] == GPU))

    def cluster_queue(self, name: str) -> dict[str, Any]:
        return self.custom.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", name)

    def reserved(self, queue: str, pool: str) -> tuple[int, int]:
        """(GPUs reserved, GPUs of them borrowed) in a pool, as the ClusterQueue's status reports them."""
        for flavor in (self.cluster_queue(queue).get("status") or {}).get("flavorsReservation") or []:
            if flavor["name"] == self.flavor(pool):
                gpu = next((r for r in flavor["resources"] if r["name"] == GPU), {})
                return int(gpu.get("total", 0)), int(gpu.get("borrowed", 0))
        return 0, 0

    def submit(self, team: str, name: str, pods: int, pool: str) -> str:
        """A Job of `pods` pods of 8 GPUs in one pool, on the team's LocalQueue; its uid."""
        job = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": name, "namespace": team, "labels": {QUEUE_LABEL: "gpu"}},
               "spec": {"parallelism": pods, "completions": pods, "template": {"spec": {
                   "restartPolicy": "Never", "nodeSelector": {POOL_LABEL: pool},
                   "containers": [{"name": "train", "image": "registry.invalid/train:1",
                                   "resources": {"requests": {GPU: "8"}, "limits": {GPU: "8"}}}]}}}}
        created = self.batch.create_namespaced_job(team, job)
        assert created.spec.suspend is True  # Kueue's webhook holds it until its Workload is admitted
        return created.metadata.uid

    def workload(self, team: str, uid: str) -> dict[str, Any]:
        return workload_of(self.api, team, uid) or {}

    def admitted(self, team: str, uid: str) -> dict[str, Any] | None:
        found = self.workload(team, uid)
        return found if is_admitted(found) else None

    def pending(self, team: str, uid: str) -> str | None:
        """Kueue's message for a Workload it has not reserved quota for."""
        return pending_message(self.workload(team, uid))

    def delete_jobs(self) -> None:
        """Every Job of both teams, their pods and Workloads. Pods bound to a Node wait for a kubelet to confirm
        their deletion and no kubelet runs, so they are deleted with grace period 0, as a kubelet would
        confirm; else they would hold their nodes' GPUs for the next test that makes nodes of the same names."""
        core = client.CoreV1Api(self.api)
        for team in TEAMS:
            self.batch.delete_collection_namespaced_job(team, propagation_policy="Background")
        wait_until(lambda: not any(self.batch.list_namespaced_job(team).items for team in TEAMS), WAIT,
                   "the teams' Jobs to go")
        for team in TEAMS:
            core.delete_collection_namespaced_pod(team, grace_period_seconds=0)
        wait_until(lambda: not any(core.list_namespaced_pod(team).items or workloads(self.api, team) for team in TEAMS),
                   WAIT, "the teams' pods and Workloads to go")


def terminating(cluster: KubeCluster, directory: Path) -> list[str]:
    """Objects of a generated directory that the cluster is still deleting (an earlier test's, same names)."""
    found = json.loads(cluster.kubectl("get", "-k", str(directory), "-o", "json", "--ignore-not-found").stdout or "{}")
    return [f"{o['kind']}/{o['metadata']['name']}" for o in found.get("items", [])
            if o["metadata"].get("deletionTimestamp")]


@pytest.fixture(scope="module")
def teams(kueue_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Teams]:  # noqa: F811
    """Nodes labelled by `topolabel apply`, the queues of CONFIG generated and applied, both ClusterQueues
    active; afterwards the Jobs and the generated objects are deleted (the namespaces stay)."""
    cluster = kueue_cluster
    cluster.delete_nodes()
    cluster.create_nodes(gke_cluster(blocks=2, subblocks=2, hosts=8)[0])  # block 0: 16 H100 nodes, block 1: 16 B200
    root = tmp_path_factory.mktemp("teams")
    config, out = root / "teams.yaml", root / "kueue"
    config.write_text(yaml.safe_dump(CONFIG))
    kubeconfig = ["--kubeconfig", str(cluster.kubeconfig)]
    assert main(["apply", "--config", str(config), *kubeconfig]) == 0
    assert main(["kueue", "--config", str(config), *kubeconfig, "--output-dir", str(out)]) == 0
    wait_until(lambda: not terminating(cluster, out), WAIT, "objects of the same names to finish deleting")
    generated, _ = cluster.apply_kueue_dir(out)
    found = Teams(cluster, generated)

    def active(name: str) -> bool:
        return any(c["type"] == "Active" and c["status"] == "True"
                   for c in (found.cluster_queue(name).get("status") or {}).get("conditions") or [])

    wait_until(lambda: all(active(t) for t in TEAMS), WAIT, "both ClusterQueues to be active")
    try:
        yield found
    finally:
        found.delete_jobs()
        cluster.kubectl("delete", "-k", str(out), "--wait=true", "--timeout=180s")


def test_the_server_stores_the_two_teams_queues_as_generated(teams: Teams) -> None:
    """Every generated field (cohort, quotas, limits, preemption) is stored as written, none pruned; each
    quota form (a fraction with a step, a fixed number, a fraction) gives a team half of 128 GPUs."""
    kinds = sorted(o["kind"] for o in teams.generated)
    assert kinds == ["ClusterQueue", "ClusterQueue", "Cohort", "LocalQueue", "LocalQueue", "ResourceFlavor",
                     "ResourceFlavor", "Topology"]
    for obj in teams.generated:
        where = ["-n", obj["metadata"]["namespace"]] if "namespace" in obj["metadata"] else []
        stored = json.loads(teams.cluster.kubectl("get", f"{obj['kind'].lower()}.{GROUP}", obj["metadata"]["name"],
                                                  *where, "-o", "json").stdout)
        assert covers(stored["spec"], obj["spec"]), (obj, stored)  # nothing pruned or changed
    for team in TEAMS:
        assert teams.nominal(team, H100.accelerator) == teams.nominal(team, B200.accelerator) == 64


def test_each_limit_caps_a_team_though_the_cohort_has_idle_gpus(teams: Teams) -> None:
    """With every GPU idle, Kueue will not give team-a more than 64 + 32 (its borrowingLimit) B200 GPUs, nor
    team-b more than 64 + 32 (team-a's lendingLimit) H100 GPUs; without the limits it would give 128."""
    try:
        for team, pool in (("team-a", B200.accelerator), ("team-b", H100.accelerator)):
            uid = teams.submit(team, f"{team}-too-big", 13, pool)  # 104 GPUs
            message = wait_until(lambda: teams.pending(team, uid), WAIT, f"Kueue's verdict on {team}'s 104 GPUs")
            assert (f"insufficient quota for {GPU} in flavor {teams.flavor(pool)}, previously considered podsets "
                    "requests (0) + current podset request (104) > maximum capacity (96)") in message, message
            assert not teams.admitted(team, uid)
    finally:
        teams.delete_jobs()


def test_a_team_borrows_idle_gpus_and_the_lender_reclaims_them(teams: Teams) -> None:
    pool, flavor = B200.accelerator, teams.flavor(B200.accelerator)
    nominal = teams.nominal("team-a", pool)
    try:
        # team-b is idle: team-a's 96 B200 GPUs are admitted, 32 of them borrowed from team-b
        big = teams.submit("team-a", "a-big", 12, pool)
        workload = wait_until(lambda: teams.admitted("team-a", big), WAIT, "team-a's 96 GPUs to be admitted")
        (placed,) = admission(workload).values()
        assert (placed.count, placed.flavors) == (12, {GPU: flavor})
        total, borrowed = wait_until(lambda: (r := teams.reserved("team-a", pool))[0] and r, WAIT,
                                     "team-a's ClusterQueue to report its usage")
        assert (total, borrowed) == (96, 96 - nominal) and total > nominal

        # team-b asks for its own 64: 32 are idle, so Kueue takes the rest back from team-a's borrowing job
        reclaim = teams.submit("team-b", "b-reclaim", 8, pool)
        workload = wait_until(lambda: teams.admitted("team-b", reclaim), WAIT, "team-b's quota to be reclaimed")
        assert admission(workload)["main"].flavors == {GPU: flavor}
        evicted = teams.workload("team-a", big)
        preempted = condition(evicted, "Preempted")
        assert preempted and (preempted["status"], preempted["reason"]) == ("True", "InCohortReclamation"), preempted
        assert (condition(evicted, "Evicted") or {}).get("reason") == "Preempted", evicted["status"]
        # requeued: 96 no longer fit next to team-b's 64, so it waits, and team-a holds nothing of B200
        short = f"insufficient unused quota for {GPU} in flavor {flavor}, 32 more needed"
        wait_until(lambda: short in (teams.pending("team-a", big) or ""), WAIT,
                   f"Kueue to say that team-a's job waits for quota ({short})")
        assert not teams.admitted("team-a", big)
        wait_until(lambda: (teams.reserved("team-b", pool), teams.reserved("team-a", pool)) == ((64, 0), (0, 0)),
                   WAIT, "the ClusterQueues to report team-b's 64 GPUs and none of team-a's")
    finally:
        teams.delete_jobs()
