"""Pods that run: the end-to-end path on KWOK's nodes (`hack/test-cluster up DIR --with-kueue --with-kwok`), where
Nodes register and heartbeat, bound pods run, Jobs' pods finish and the node lifecycle controller marks a silent
Node NotReady, as in a cluster with kubelets.

- A created Node turns Ready within 5 s (KWOK posts its status; the not-ready taint the API server put on it
  is lifted by the node lifecycle controller); its Lease is renewed; a Job's pods run on it and the Job completes.
- The operator labels GKE-shaped nodes and sets Kueue up; a Job annotated by `topolabel job annotate --within
  block` is admitted where `topolabel fit` said, its pods run on those nodes, the Job completes and Kueue
  finishes its Workload.
- A node dies under a running block-required job (its kubelet stops: no Lease renewals): the node lifecycle
  controller taints it unreachable, the pod is evicted, Kueue records the node in `status.unhealthyNodes` and
  gives the Workload a new topology assignment with a free node of the same block (TASFailedNodeReplacement).
- A node is tainted NoExecute under a running job whose block has no free node: Kueue evicts the Workload
  (TASFailedNodeReplacementFailFast) and requeues it, and `topolabel fit` on the cluster as it now is says
  what Kueue then says: no block fits, with Kueue's message.
- A JobSet of a one-pod leader and three workers (LeaderWorkerSet's shape), annotated the same way: admitted
  where fit said, its Jobs made by JobSet's controller, its pods run in one block, and it completes.
- The chart: `helm install --wait` on tainted GKE-shaped nodes and an untainted one, each Pod placed by
  kube-scheduler, and `helm test`'s hook Pod scheduled, run to Succeeded and deleted by its policy.

Each test costs a few seconds of Kueue and KWOK work, plus the operator's start and the CLI's (most of a
test's time on a loaded machine); the heartbeat one also waits out the node lifecycle controller's grace
period (KWOK_LEASE_SECONDS, 20 s). The cluster itself starts once per worker that runs one of them.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import ProtocolError

from hack import testcluster
from hack.synth import H100, gke_cluster
from testkit.environment import ROOT
from testkit.helmrun import helm  # noqa: F401 (fixture)
from testkit.kubecluster import KubeCluster, kwok_kueue_cluster, kwok_kueue_kube  # noqa: F401
from testkit.kueue_jobs import (BLOCK, REQUIRED, TRAIN, annotate, annotated_job, fit, job_pods, operator_objects,
                              pod_template, remove_job, remove_operator_objects, start_operator, submit, wait_parked)
from testkit.kueue_workloads import GROUP, VERSION, admission, condition, is_admitted, workload_of
from testkit.operatorrun import stop, wait_until
from testkit.tas_cluster import pod
from testkit.tas_replay import create_pods

pytestmark = pytest.mark.slow
KWOK_USER = "system:serviceaccount:kube-system:kwok-controller"
CHART = ROOT / "charts" / "topolabel"
GROUP_NAME = "kueue.x-k8s.io/podset-group-name"
RUN_FOR = "test-cluster.topolabel.dev/run-for"  # how long KWOK keeps a pod of a Job running (hack/kwok/kwok.yaml)
BUSY = "e2e-busy"  # where pods that are not the test job's run
READY_WITHIN = 5.0  # seconds from a Node's creation to Ready, as docs/testing.md promises
UNREACHABLE = "node.kubernetes.io/unreachable"
# The pod leaves a node that stopped reporting at once rather than after the default 300 s.
LEAVE_UNREACHABLE_NODES = {"tolerations": [{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
                                            "tolerationSeconds": 0}]}


@pytest.fixture
def cluster(kwok_kueue_kube: KubeCluster) -> KubeCluster:  # noqa: F811
    """The worker's KWOK cluster (Kueue, JobSet, KWOK) with no Nodes in it."""
    return kwok_kueue_kube


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def node(api: client.ApiClient, name: str) -> dict[str, Any]:
    return json.loads(client.CoreV1Api(api).read_node(name, _preload_content=False).data)


def node_condition(obj: dict[str, Any], kind: str = "Ready") -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


def running_pods(api: client.ApiClient, namespace: str, selector: str) -> dict[str, int]:
    """node -> how many of the pods `selector` picks run there (phase Running, not being deleted)."""
    resp = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=selector, _preload_content=False)
    out: dict[str, int] = {}
    for p in json.loads(resp.data)["items"]:
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp"):
            out[p["spec"]["nodeName"]] = out.get(p["spec"]["nodeName"], 0) + 1
    return out


def running_on(api: client.ApiClient, namespace: str, name: str) -> dict[str, int]:
    """node -> how many of the Job's pods run there."""
    return running_pods(api, namespace, f"batch.kubernetes.io/job-name={name}")


def job_condition(api: client.ApiClient, namespace: str, name: str, kind: str) -> bool:
    job = json.loads(client.BatchV1Api(api).read_namespaced_job(name, namespace, _preload_content=False).data)
    return any(c["type"] == kind and c["status"] == "True" for c in (job.get("status") or {}).get("conditions") or [])


def placement(workload: dict[str, Any]) -> dict[str, int]:
    """node -> pods, of the Workload's one pod set (the Topology's lowest level is the hostname)."""
    (placed,) = admission(workload).values()
    return {domain[-1]: pods for domain, pods in placed.domains.items()}


class WorkloadHistory:
    """Every version of one Workload from now on, as a watch delivers them (a state Kueue holds only for a
    moment, such as `status.unhealthyNodes` before a replacement, is seen)."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str) -> None:
        self.versions: list[dict[str, Any]] = []
        self.error: Exception | None = None
        self._watch = watch.Watch()
        self._stopped = threading.Event()
        self._args = (client.CustomObjectsApi(api).list_namespaced_custom_object, GROUP, VERSION, namespace,
                      "workloads")
        self._selector = f"metadata.name={name}"
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        func, *args = self._args
        since = None  # the last resourceVersion seen: a dropped connection resumes from there, as informers do
        while not self._stopped.is_set():
            try:
                # the server ends the watch after 600 s; the client waits that long between events
                for event in self._watch.stream(func, *args, field_selector=self._selector, resource_version=since,
                                                timeout_seconds=600, _request_timeout=(10, 630)):
                    self.versions.append(event["object"])
                    since = event["object"]["metadata"]["resourceVersion"]
            except ProtocolError:
                continue  # "Response ended prematurely": the connection dropped (seen at load 6 to 9)
            except Exception as exc:  # noqa: BLE001 - the test reads it (after stop(), the closed stream may raise)
                self.error = exc
                return

    def __enter__(self) -> "WorkloadHistory":
        self._thread.start()
        wait_until(lambda: self.versions or self.error, 30, "the Workload watch's first event")  # watching from here
        assert self.error is None, f"the Workload watch failed: {self.error!r}"
        return self

    def __exit__(self, kind: Any, *exc: Any) -> None:
        self._stopped.set()
        self._watch.stop()
        assert kind is not None or self.error is None, f"the Workload watch failed: {self.error!r}"

    def unhealthy_nodes(self) -> list[list[str]]:
        """Each distinct non-empty `status.unhealthyNodes` seen, in order."""
        seen: list[list[str]] = []
        for w in self.versions:
            names = [n["name"] for n in (w.get("status") or {}).get("unhealthyNodes") or []]
            if names and (not seen or seen[-1] != names):
                seen.append(names)
        return seen


def admitted(api: client.ApiClient, uid: str, what: str = "Job") -> dict[str, Any]:
    return wait_until(lambda: (w := workload_of(api, TRAIN, uid)) and is_admitted(w) and w, 120,
                      f"Kueue to admit the {what}'s Workload")


def wait_finished(api: client.ApiClient, uid: str) -> None:
    """Until Kueue marks the Workload Finished (the Job or JobSet succeeded: quota released)."""
    def finished() -> bool:
        found = condition(workload_of(api, TRAIN, uid) or {}, "Finished")
        return bool(found and found["status"] == "True")

    wait_until(finished, 60, "Kueue to finish the Workload")


def run_where_fit_said(cluster: KubeCluster, path: Path, name: str, want: dict[str, int]) -> tuple[str, dict[str, Any]]:
    """Submit the Job file; Kueue must admit it with `want` (node -> pods: fit's prediction), and its pods run
    there, all at once. The Job's uid and the admitted Workload."""
    uid = submit(cluster, path)
    workload = admitted(cluster.api(), uid)
    assert placement(workload) == want
    wait_until(lambda: running_on(cluster.api(), TRAIN, name) == want, 60, f"the Job's pods Running on {want}")
    return uid, workload


@contextmanager
def operated(cluster: KubeCluster, directory: Path, items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """`items` created (KWOK makes them Ready) and the operator running until they are labelled and its Kueue
    objects exist with the ClusterQueue active; yields those objects, and removes them afterwards."""
    cluster.create_nodes(items)
    operator, log = start_operator(cluster, directory)
    made: dict[str, Any] = {}
    try:
        made = wait_until(lambda: operator.poll() is None and operator_objects(cluster.api()), 180,
                          f"the operator's Kueue objects and an active ClusterQueue (log: {log})")
        labels = cluster.node_labels()
        assert all(BLOCK in labels[n["metadata"]["name"]] for n in items)
        yield made
    finally:
        stop(operator)
        remove_operator_objects(cluster, made)


def test_a_created_node_turns_ready_within_5_seconds_and_runs_a_job_to_completion(cluster: KubeCluster) -> None:
    api = cluster.api()
    core = client.CoreV1Api(api)
    name, namespace = "kwok-probe-n0", "kwok-probe"
    mark = cluster.audit_mark()
    # as a kubelet registers: labels, no status
    created = json.loads(core.create_node({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}},
                                          _preload_content=False).data)
    # the API server's TaintNodesByCondition taints a new Node until it is Ready, as in any cluster
    assert {(t["key"], t["effect"]) for t in created["spec"].get("taints") or []} == {
        ("node.kubernetes.io/not-ready", "NoSchedule")}
    cluster.wait_nodes_ready({name}, timeout=60)
    ready = node(api, name)
    ready_at = parse_time(node_condition(ready)["lastTransitionTime"])
    became = ready_at - parse_time(created["metadata"]["creationTimestamp"])
    assert became.total_seconds() <= READY_WITHIN
    assert ready["status"]["nodeInfo"]["kubeletVersion"].startswith("kwok-v")  # KWOK's node-ready stage
    assert ready["status"]["capacity"]["pods"] == "110"
    assert not ready["spec"].get("taints")  # the node lifecycle controller lifted not-ready
    status_writers = {e.user for e in cluster.requests(mark, resource="nodes") if e.subresource == "status"
                      and e.verb in ("patch", "update")}
    assert KWOK_USER in status_writers
    # the heartbeat: KWOK holds the node's Lease and renews it every quarter of its duration
    lease = wait_until(lambda: (l := core_lease(api, name)) and l, 30, "the node's Lease")
    assert lease["spec"]["leaseDurationSeconds"] == testcluster.KWOK_LEASE_SECONDS
    wait_until(lambda: core_lease(api, name)["spec"]["renewTime"] != lease["spec"]["renewTime"],
               testcluster.KWOK_LEASE_SECONDS, "a Lease renewal")

    cluster.kubectl("create", "namespace", namespace, check=False)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "probe", "namespace": namespace},
           "spec": {"parallelism": 2, "completions": 2, "template": {
               "metadata": {"annotations": {RUN_FOR: "5s"}},
               "spec": {"restartPolicy": "Never", "nodeSelector": {"kubernetes.io/hostname": name},
                        "containers": [{"name": "c", "image": "registry.invalid/probe:1"}]}}}}
    try:
        client.BatchV1Api(api).create_namespaced_job(namespace, job)  # no queue: Kueue leaves it alone
        wait_until(lambda: running_on(api, namespace, "probe") == {name: 2}, 60, "both pods Running on the node")
        wait_until(lambda: job_condition(api, namespace, "probe", "Complete"), 60, "the Job to complete")
        pods = job_pods(api, namespace, "probe")
        assert [p["status"]["phase"] for p in pods] == ["Succeeded", "Succeeded"]
        assert all(p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0 for p in pods)
    finally:
        cluster.kubectl("delete", "namespace", namespace, "--wait=false")


def core_lease(api: client.ApiClient, name: str) -> dict[str, Any] | None:
    """The Node's Lease in kube-node-lease (its heartbeat), or None before it exists."""
    try:
        resp = client.CoordinationV1Api(api).read_namespaced_lease(name, "kube-node-lease", _preload_content=False)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return json.loads(resp.data)


def test_a_job_annotated_for_one_block_runs_to_completion_where_fit_said(
        cluster: KubeCluster, tmp_path: Path) -> None:
    api = cluster.api()
    items, truth = gke_cluster(blocks=2, subblocks=2, hosts=2)  # an H100 block b00, a B200 block b01
    with operated(cluster, tmp_path, items):
        labels = cluster.node_labels()
        assert {n: labels[n][BLOCK] for n in truth} == {n: t[0] for n, t in truth.items()}
        path = annotated_job(tmp_path, "train", pods=3, gpus=8, kubeconfig=cluster.kubeconfig,
                             template={"metadata": {"annotations": {RUN_FOR: "10s"}}})
        predicted = fit(path, cluster.kubeconfig, 0)
        (podset,) = predicted["podsets"]
        want = {n["node"]: n["pods"] for n in podset["nodes"]}
        try:
            uid, _ = run_where_fit_said(cluster, path, "train", want)
            (block,) = {labels[n][BLOCK] for n in want}
            wait_until(lambda: job_condition(api, TRAIN, "train", "Complete"), 90, "the Job to complete")
            assert {labels[p["spec"]["nodeName"]][BLOCK] for p in job_pods(api, TRAIN, "train")} == {block}
            wait_finished(api, uid)
        finally:
            remove_job(cluster, TRAIN, "train")


def test_a_node_that_stops_heartbeating_is_replaced_by_kueue_inside_the_same_block(
        cluster: KubeCluster, tmp_path: Path) -> None:
    api = cluster.api()
    items, _ = gke_cluster(blocks=2, subblocks=2, hosts=3, pools=(H100,))  # two blocks of 6 free nodes
    with operated(cluster, tmp_path, items):
        labels = cluster.node_labels()
        path = annotated_job(tmp_path, "steady", pods=4, gpus=8, kubeconfig=cluster.kubeconfig,
                             template={"metadata": {"annotations": {RUN_FOR: "30m"}}, **LEAVE_UNREACHABLE_NODES})
        want = {n["node"]: n["pods"] for n in fit(path, cluster.kubeconfig, 0)["podsets"][0]["nodes"]}
        try:
            uid, workload = run_where_fit_said(cluster, path, "steady", want)
            (block,) = {labels[n][BLOCK] for n in want}
            victim = sorted(want)[0]
            with WorkloadHistory(api, TRAIN, workload["metadata"]["name"]) as history:
                cluster.stop_kubelet(victim)
                # the node lifecycle controller: no Lease renewal for the grace period -> Unknown, unreachable
                # (NoSchedule at once, NoExecute on its next tainting pass)
                def marked() -> bool:
                    dead = node(api, victim)
                    taints = {(t["key"], t["effect"]) for t in dead["spec"].get("taints") or []}
                    return node_condition(dead)["status"] == "Unknown" and (UNREACHABLE, "NoExecute") in taints

                wait_until(marked, 90, "the node lifecycle controller to mark the silent node and taint it")

                def replaced() -> dict[str, int] | None:
                    w = workload_of(api, TRAIN, uid)
                    placed = placement(w) if w and is_admitted(w) else {}
                    return placed if placed and victim not in placed else None

                now = wait_until(replaced, 120, "Kueue to replace the node in the Workload's topology assignment")
                running = wait_until(lambda: (r := running_on(api, TRAIN, "steady")) == now and r, 60,
                                     f"the Job's pods Running on {now}")
            assert history.unhealthy_nodes() == [[victim]]
            (new,) = set(now) - set(want)
            assert sum(now.values()) == 4 and set(want) - set(now) == {victim}
            assert {labels[n][BLOCK] for n in running} == {block}  # the replacement is in the same block
            assert labels[new][BLOCK] == block
            final = workload_of(api, TRAIN, uid)
            assert not (w := condition(final, "Evicted")) or w["status"] == "False"  # replaced, never evicted
            assert not (final.get("status") or {}).get("unhealthyNodes")
        finally:
            remove_job(cluster, TRAIN, "steady")


def test_with_no_free_node_in_the_block_kueue_evicts_and_fit_agrees_with_what_follows(
        cluster: KubeCluster, tmp_path: Path) -> None:
    api = cluster.api()
    items, _ = gke_cluster(blocks=2, subblocks=2, hosts=2, pools=(H100,))  # blocks b00 and b01 of 4 nodes
    # pods of another team hold half of every b01 node: a job of four whole nodes fits only b00
    busy = [pod(f"busy-{i}", n["metadata"]["name"], 4) for i, n in enumerate(items) if "-b01-" in n["metadata"]["name"]]
    for p in busy:
        p["metadata"]["namespace"] = BUSY
    with operated(cluster, tmp_path, items):
        labels = cluster.node_labels()
        cluster.kubectl("create", "namespace", BUSY, check=False)
        create_pods(client.CoreV1Api(api), busy)
        path = annotated_job(tmp_path, "wide", pods=4, gpus=8, kubeconfig=cluster.kubeconfig,
                             template={"metadata": {"annotations": {RUN_FOR: "30m"}}})
        want = {n["node"]: n["pods"] for n in fit(path, cluster.kubeconfig, 0)["podsets"][0]["nodes"]}
        assert {labels[n][BLOCK] for n in want} == {labels["gke-a3-b00-s00-n000"][BLOCK]}
        try:
            uid, workload = run_where_fit_said(cluster, path, "wide", want)
            victim = sorted(want)[0]
            with WorkloadHistory(api, TRAIN, workload["metadata"]["name"]) as history:
                # a NoExecute taint the job does not tolerate: the taint eviction controller deletes its pod
                cluster.kubectl("taint", "node", victim, "maintenance.example.com/drain=now:NoExecute")

                def evicted() -> dict[str, Any] | None:
                    w = workload_of(api, TRAIN, uid)
                    found = condition(w, "Evicted") if w else None
                    return w if found and found["status"] == "True" else None

                workload = wait_until(evicted, 120, "Kueue to evict the Workload")
            assert history.unhealthy_nodes() == [[victim]]
            reason = condition(workload, "Evicted")
            assert (reason["reason"], reason["message"]) == (
                "NodeFailures", f"Workload was evicted as there was no replacement for unhealthy node(s): {victim}")
            # requeued: the Job is suspended again, its pods are gone, and the Workload waits for quota;
            # fit, on the cluster as it now is (b00 lost a node, b01 is half busy), says the same as Kueue
            wait_until(lambda: not job_pods(api, TRAIN, "wide"), 60, "the evicted Job's pods to go")
            predicted = fit(path, cluster.kubeconfig, 1)
            assert predicted["fits"] is False and predicted["kueue_message"]
            parked = wait_parked(cluster, uid, predicted["kueue_message"])
            assert not is_admitted(parked)
        finally:
            remove_job(cluster, TRAIN, "wide")
            cluster.kubectl("delete", "pods", "-n", BUSY, "--all", "--grace-period=0", "--force")


def leader_and_workers(name: str, workers: int, run_for: str) -> str:
    """A JobSet as a data scientist writes it: a leader of one pod and `workers` pods (LeaderWorkerSet's shape),
    8 GPUs each, no queue and no TAS annotation."""
    template = {"metadata": {"annotations": {RUN_FOR: run_for}}}
    return yaml.safe_dump({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                           "metadata": {"name": name, "namespace": TRAIN},
                           "spec": {"replicatedJobs": [
                               {"name": group, "replicas": 1, "template": {"spec": {
                                   "parallelism": pods, "completions": pods, "template": pod_template(8, template)}}}
                               for group, pods in (("leader", 1), ("workers", workers))]}}, sort_keys=False)


def jobset_pods(api: client.ApiClient, name: str, groups: list[str]) -> dict[str, dict[str, int]]:
    """replicatedJob -> node -> pods of the JobSet running there."""
    return {group: running_pods(api, TRAIN, f"jobset.sigs.k8s.io/jobset-name={name},"
                                            f"jobset.sigs.k8s.io/replicatedjob-name={group}") for group in groups}


def test_a_jobset_leader_and_workers_run_in_one_block_where_fit_said(cluster: KubeCluster, tmp_path: Path) -> None:
    api = cluster.api()
    items, _ = gke_cluster(blocks=2, subblocks=2, hosts=2, pools=(H100,))  # blocks b00 and b01 of 4 nodes
    with operated(cluster, tmp_path, items):
        labels = cluster.node_labels()
        path = tmp_path / "trainer.yaml"
        path.write_text(leader_and_workers("trainer", workers=3, run_for="10s"))
        doc = annotate(path, cluster.kubeconfig)
        # the one-pod leader and the workers share a podset group: Kueue places them in the same block
        groups = {r["name"]: r["template"]["spec"]["template"]["metadata"]["annotations"]
                  for r in doc["spec"]["replicatedJobs"]}
        assert {a[REQUIRED] for a in groups.values()} == {BLOCK} and len({a[GROUP_NAME] for a in groups.values()}) == 1
        predicted = fit(path, cluster.kubeconfig, 0)
        want = {p["podset"]: {n["node"]: n["pods"] for n in p["nodes"]} for p in predicted["podsets"]}
        try:
            created = json.loads(cluster.kubectl("create", "-f", str(path), "-o", "json").stdout)
            assert created["spec"]["suspend"] is True  # Kueue's webhook holds the JobSet until it is admitted
            uid = created["metadata"]["uid"]
            workload = admitted(api, uid, "JobSet")
            placed = {name: {d[-1]: n for d, n in a.domains.items()} for name, a in admission(workload).items()}
            assert placed == want
            # JobSet's controller makes a Job per replicatedJob; their pods run where Kueue put them
            wait_until(lambda: jobset_pods(api, "trainer", list(want)) == want, 90,
                       f"the JobSet's pods Running on {want}")
            assert len({labels[n][BLOCK] for nodes in want.values() for n in nodes}) == 1
            def completed() -> bool:
                jobset = json.loads(cluster.kubectl("get", "jobset", "trainer", "-n", TRAIN, "-o", "json").stdout)
                conditions = (jobset.get("status") or {}).get("conditions") or []
                return any(c["type"] == "Completed" and c["status"] == "True" for c in conditions)

            wait_until(completed, 90, "the JobSet to complete")
            wait_finished(api, uid)
        finally:
            cluster.kubectl("delete", "jobset", "trainer", "-n", TRAIN, "--ignore-not-found", "--wait=false")


def test_the_chart_installs_on_kwok_nodes_and_its_helm_test_runs_to_completion(
        cluster: KubeCluster, helm: Any, tmp_path: Path) -> None:  # noqa: F811
    """What a kubelet adds to the chart's own test (test_operator_shipped.py runs the operator and the test Pod
    in podman, unscheduled): kube-scheduler places each of the chart's Pods on GKE-shaped nodes whose GPUs are
    tainted, `helm install --wait` waits for them as a user's would, and `helm test` sees its hook Pod
    scheduled, Succeeded as KWOK reports it, and deleted by the hook's policy. (KWOK runs no container: the
    test Pod's HTTP checks themselves are test_operator_shipped.py's.)"""
    api = cluster.api()
    gpu_nodes, _ = gke_cluster(blocks=1, subblocks=2, hosts=2)  # 4 nodes, tainted nvidia.com/gpu
    system = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "system-n0", "labels": {
        "kubernetes.io/hostname": "system-n0", "cloud.google.com/gke-nodepool": "system"}},
              "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}
    cluster.create_nodes([*gpu_nodes, system])
    name, namespace = "tl-kwok", "tl-kwok-system"
    where = ["--kubeconfig", str(cluster.kubeconfig), "--namespace", namespace]
    mark = cluster.audit_mark()
    try:
        # names of its own: the other tests' operator has the manifests' ClusterRoles, which share the chart's
        helm("install", name, str(CHART), *where, "--create-namespace", "--wait", "--timeout", "180s",
             *(a for v in (f"fullnameOverride={name}", f"agent.namespace={name}-agent", "agent.enabled=true",
                           "image.repository=registry.invalid/topolabel", "image.tag=kwok",
                           "config.source.type=labels", "config.source.preset=gke") for a in ("--set", v)))
        rendered = [d for d in yaml.safe_load_all(helm("get", "manifest", name, *where).stdout) if d]
        workloads = {d["kind"]: d for d in rendered if d["kind"] in ("Deployment", "DaemonSet")}
        placed = {kind: running_pods(api, obj["metadata"]["namespace"], ",".join(
            f"{k}={v}" for k, v in obj["spec"]["selector"]["matchLabels"].items())) for kind, obj in workloads.items()}
        # no GPU toleration: the operator's replicas only on the untainted node; the agent on every node
        assert set(placed["Deployment"]) == {"system-n0"}
        assert sum(placed["Deployment"].values()) == workloads["Deployment"]["spec"]["replicas"]
        assert placed["DaemonSet"] == {n["metadata"]["name"]: 1 for n in [*gpu_nodes, system]}

        tested = helm("test", name, *where, "--timeout", "120s")
        assert "Phase:          Succeeded" in tested.stdout, tested.stdout
        (hook,) = [d["metadata"]["name"] for d in yaml.safe_load_all(helm("get", "hooks", name, *where).stdout)
                   if d and d["kind"] == "Pod" and d["metadata"]["annotations"]["helm.sh/hook"] == "test"]
        bound = [e for e in cluster.requests(mark, verb="create", resource="pods", user="system:kube-scheduler")
                 if e.subresource == "binding" and e.name == hook]
        ran = [e for e in cluster.requests(mark, resource="pods", user=KWOK_USER) if e.subresource == "status"
               and e.name == hook]
        assert bound and ran  # scheduled like any Pod, then run (and finished) by the nodes' "kubelet"
        assert cluster.kubectl("get", "pod", hook, "-n", namespace, check=False).returncode != 0  # hook-succeeded
    finally:
        helm("uninstall", name, *where, "--wait", check=False)
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
