"""A data scientist's and an operator's steps on a test cluster with the Kueue manager, shared by the end-to-end
tests (test_kueue_e2e.py: pods bound, no kubelet; test_kwok_e2e.py: pods run on KWOK's nodes).

The operator (`topolabel run`, a child process as user `topolabel-operator` with only the manifests' ClusterRole)
labels GKE-shaped nodes and applies Topology, one ResourceFlavor per GPU pool, ClusterQueue `e2e` and LocalQueue
`gpu` in namespace TRAIN. A Job is written as plain YAML, annotated by `topolabel job annotate --within block`,
predicted by `topolabel fit -o json`, then submitted with kubectl; the CLI runs in its own process, as a user
runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from testkit.environment import ROOT
from testkit.kubecluster import KubeCluster
from testkit.kueue_workloads import GROUP, QUEUE_LABEL, VERSION, is_admitted, pending_message, workload_of
from testkit.operatorrun import spawn, wait_until
from testkit.tas_replay import cq_active

BLOCK, HOSTNAME = "topolabel.dev/block", "kubernetes.io/hostname"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
MANIFESTS = ROOT / "manifests"
POOL = "cloud.google.com/gke-accelerator"
TRAIN = "e2e-train"  # the data scientists' namespace
OPERATOR_CONFIG = {"source": {"type": "labels", "preset": "gke"},
                   "pools": {"label": POOL, "resources": ["nvidia.com/gpu"]},
                   "kueue": {"topologyName": "e2e", "clusterQueue": "e2e",
                             "localQueues": [{"name": "gpu", "namespaces": [TRAIN]}]}}


def pod_template(gpus: int, template: dict[str, Any] | None = None) -> dict[str, Any]:
    """A pod template as a data scientist writes it, one container asking for `gpus`; `template` is merged
    into it (its metadata, tolerations)."""
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [
        {"name": "train", "image": "registry.invalid/train:1", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}
    pod: dict[str, Any] = {"spec": spec}
    for key, value in (template or {}).items():
        (spec if key != "metadata" else pod)[key] = value
    return pod


def plain_job(name: str, pods: int, gpus: int, template: dict[str, Any] | None = None) -> str:
    """A Job as a data scientist writes it: no queue, no TAS annotation (`topolabel job annotate` adds both)."""
    return yaml.safe_dump({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": TRAIN},
                           "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed",
                                    "template": pod_template(gpus, template)}}, sort_keys=False)


def topolabel(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it, in its own process: exit code, stdout and stderr as they are."""
    return subprocess.run([sys.executable, "-m", "topolabel.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=180, env={**os.environ, "PYTHONPATH": str(ROOT)})


def annotate(path: Path, kubeconfig: Path) -> dict[str, Any]:
    """`topolabel job annotate FILE --queue gpu --within block -i` (required: one block); the annotated object."""
    done = topolabel("job", "annotate", str(path), "--queue", "gpu", "--within", "block", "--kubeconfig",
                     str(kubeconfig), "-i")
    assert done.returncode == 0, done.stderr
    doc = yaml.safe_load(path.read_text())
    assert doc["metadata"]["labels"] == {QUEUE_LABEL: "gpu"}
    return doc


def annotated_job(directory: Path, name: str, pods: int, gpus: int, kubeconfig: Path,
                  template: dict[str, Any] | None = None) -> Path:
    """A plain Job file, annotated in place by `topolabel job annotate --within block` (required: one block)."""
    path = directory / f"{name}.yaml"
    path.write_text(plain_job(name, pods, gpus, template))
    doc = annotate(path, kubeconfig)
    given = ((template or {}).get("metadata") or {}).get("annotations") or {}
    assert doc["spec"]["template"]["metadata"]["annotations"] == {**given, REQUIRED: BLOCK}
    return path


def fit(path: Path, kubeconfig: Path, code: int) -> dict[str, Any]:
    """`topolabel fit -o json` against the cluster; it must exit with `code` (0 fits, 1 does not)."""
    done = topolabel("fit", str(path), "--kubeconfig", str(kubeconfig), "-o", "json")
    assert done.returncode == code, done.stdout + done.stderr
    return json.loads(done.stdout)


def submit(cluster: KubeCluster, path: Path) -> str:
    """kubectl create, as a user submits the file; the Job's uid."""
    created = json.loads(cluster.kubectl("create", "-f", str(path), "-o", "json").stdout)
    assert created["spec"]["suspend"] is True  # Kueue's webhook holds the Job until it is admitted
    return created["metadata"]["uid"]


def job_pods(api: client.ApiClient, namespace: str, name: str) -> list[dict[str, Any]]:
    resp = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=f"batch.kubernetes.io/job-name={name}",
                                                     _preload_content=False)
    return json.loads(resp.data)["items"]


def remove_job(cluster: KubeCluster, namespace: str, name: str) -> None:
    """The Job, then its pods at once: with no kubelet (or a stopped one) a bound pod deleted gracefully stays
    Terminating and keeps its GPUs, on a node of the same name in the next test."""
    cluster.kubectl("delete", "job", name, "-n", namespace, "--ignore-not-found", "--wait=false")
    cluster.kubectl("delete", "pods", "-n", namespace, "-l", f"batch.kubernetes.io/job-name={name}",
                    "--grace-period=0", "--force", "--ignore-not-found")


def kueue_object(api: client.ApiClient, plural: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
    custom = client.CustomObjectsApi(api)
    try:
        if namespace:
            return custom.get_namespaced_custom_object(GROUP, VERSION, namespace, plural, name)
        return custom.get_cluster_custom_object(GROUP, VERSION, plural, name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def operator_objects(api: client.ApiClient) -> dict[str, list[dict[str, Any]]] | None:
    """The ClusterQueue, its LocalQueue, ResourceFlavors and Topology once all exist and Kueue says the
    ClusterQueue can admit workloads; None until then."""
    cq = kueue_object(api, "clusterqueues", "e2e")
    lq = kueue_object(api, "localqueues", "gpu", TRAIN)
    if cq is None or lq is None or not cq_active(client.CustomObjectsApi(api), "e2e"):
        return None
    flavors = [kueue_object(api, "resourceflavors", f["name"]) for g in cq["spec"]["resourceGroups"]
               for f in g["flavors"]]
    topologies = [kueue_object(api, "topologies", name) for name in {f["spec"]["topologyName"] for f in flavors if f}]
    if None in flavors or None in topologies:
        return None
    return {"clusterqueues": [cq], "localqueues": [lq], "resourceflavors": flavors, "topologies": topologies}


def operator_args(cluster: KubeCluster, directory: Path) -> list[str]:
    """The set-up `topolabel run` runs in as shipped: the manifests' CRD, their ClusterRole bound to user
    topolabel-operator (no other rights), OPERATOR_CONFIG as its config file; its arguments after `run`."""
    cluster.kubectl("create", "namespace", TRAIN, check=False)
    cluster.kubectl("apply", "-f", str(MANIFESTS / "crd.yaml"))
    cluster.wait_established("topologylabelers.topolabel.dev")
    cluster.bind_operator(MANIFESTS)
    config = directory / "topolabel.yaml"
    config.write_text(yaml.safe_dump(OPERATOR_CONFIG))
    return ["--kubeconfig", str(cluster.operator_kubeconfig), "--config", str(config), "--name", "e2e",
            "--http", "127.0.0.1:0"]


def start_operator(cluster: KubeCluster, directory: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """`topolabel run` as the shipped set-up runs it (`operator_args`), as a child process; it and its log."""
    log = directory / "operator.log"
    return spawn(operator_args(cluster, directory), log), log


def wait_parked(cluster: KubeCluster, uid: str, message: str, timeout: float = 120) -> dict[str, Any]:
    """The Workload of the Job `uid` once Kueue has tried every flavor and set it aside as inadmissible (until
    the cluster changes) with `message`; the metric is read first, so the message is at least as new."""
    api, seen = cluster.api(), {}

    def parked() -> dict[str, Any] | None:
        seen["inadmissible"] = cluster.kueue_metric("kueue_pending_workloads", cluster_queue="e2e",
                                                    status="inadmissible")
        seen["active"] = cluster.kueue_metric("kueue_pending_workloads", cluster_queue="e2e", status="active")
        w = workload_of(api, TRAIN, uid)
        seen["message"] = pending_message(w) if w else None
        seen["admitted"] = bool(w and is_admitted(w))
        done = seen["inadmissible"] == 1 and seen["active"] == 0 and seen["message"] == message
        return w if done else None

    return wait_until(parked, timeout, lambda: f"Kueue to set the Workload aside with the message {message!r}; "
                                               f"Kueue: {seen}", every=0.5)


def remove_operator_objects(cluster: KubeCluster, made: dict[str, list[dict[str, Any]]]) -> None:
    """What the operator applied (ClusterQueue, LocalQueue, flavors, Topology), not waiting for finalizers."""
    cluster.kubectl("delete", "localqueues.kueue.x-k8s.io", "gpu", "-n", TRAIN, "--ignore-not-found", "--wait=false")
    cluster.kubectl("delete", "clusterqueues.kueue.x-k8s.io", "e2e", "--ignore-not-found", "--wait=false")
    for plural in ("resourceflavors", "topologies"):
        for obj in made.get(plural, []):
            cluster.kubectl("delete", f"{plural}.kueue.x-k8s.io", obj["metadata"]["name"], "--wait=false", check=False)
