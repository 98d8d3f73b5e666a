"""With the real Kueue v0.19.2 manager: a node that fabric health isolates with a NoSchedule taint stops
counting for TAS. The operator (as `topolabel-operator`, the manifests' ClusterRole) labels four H100 nodes of one
block, sets Kueue up and, once another tool reports a link flapping on one node, taints it; a Job needing the
whole block, which `fit` placed before, now gets from `fit` the smaller capacity and exactly the message Kueue
puts on its pending Workload, and a Job of three nodes is admitted where `fit` says, off the isolated node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from hack.synth import gke_cluster
from testkit.environment import ROOT
from testkit.kubecluster import KubeCluster, kueue_cluster, kueue_kube  # noqa: F401
from testkit.kueue_workloads import admission, is_admitted, pending_message, workload_of
from testkit.operatorrun import InThread, wait_until
from testkit.tas_replay import cq_active
from tests.test_health_apiserver import health, nodes, report, taints
from tests.test_kueue_e2e import TRAIN, annotated_job, fit, pods_bound_to, remove_job, submit
from topolabel.operator.settings import RunOptions

pytestmark = pytest.mark.slow
QUEUE = "health"
TAINT = {"key": "topolabel.dev/fabric-degraded", "effect": "NoSchedule"}
CONFIG = {"source": {"type": "labels", "preset": "gke"},
          "pools": {"label": "cloud.google.com/gke-accelerator", "resources": ["nvidia.com/gpu"]},
          "kueue": {"topologyName": QUEUE, "clusterQueue": QUEUE, "localQueues": [{"name": "gpu", "namespaces": [TRAIN]}]},
          "health": {"enabled": True, "degradeAfter": 1, "maxIsolatedFraction": 0.25, "taint": {"effect": "NoSchedule"},
                     "conditions": [{"type": "NVSentinelIBLinkFlap", "status": "True"}]}}


def kueue_ready(api: client.ApiClient) -> bool:
    custom = client.CustomObjectsApi(api)
    try:
        custom.get_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", TRAIN, "localqueues", "gpu")
    except client.exceptions.ApiException:
        return False
    return cq_active(custom, QUEUE)


def parked(cluster: KubeCluster, uid: str, message: str, seen: dict[str, Any]) -> dict[str, Any] | None:  # noqa: F811
    """The Workload once Kueue has set it aside as inadmissible with `message`."""
    seen["inadmissible"] = cluster.kueue_metric("kueue_pending_workloads", cluster_queue=QUEUE, status="inadmissible")
    w = workload_of(cluster.api(), TRAIN, uid)
    seen["message"] = pending_message(w) if w else None
    return w if seen["inadmissible"] == 1 and seen["message"] == message and not is_admitted(w) else None


def test_an_isolated_node_holds_no_tas_capacity_for_kueue_and_fit_agrees(kueue_kube: KubeCluster,  # noqa: F811
                                                                         tmp_path: Path) -> None:
    cluster, api = kueue_kube, kueue_kube.api()
    items, truth = gke_cluster(blocks=1, subblocks=2, hosts=2, zone="us-central1-h")  # 4 H100 nodes, 8 GPUs each
    names = sorted(truth)
    wait_until(lambda: not pods_bound_to(api, set(names)), 120, "no pod bound to these node names")
    cluster.create_nodes(items)
    cluster.kubectl("create", "namespace", TRAIN, check=False)
    cluster.kubectl("apply", "-f", str(ROOT / "manifests" / "crd.yaml"))
    cluster.bind_operator(ROOT / "manifests")
    config = tmp_path / "topolabel.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    jobs: list[str] = []
    opts = RunOptions(kubeconfig=str(cluster.operator_kubeconfig), config_path=str(config), name="health",
                      http_host="127.0.0.1", http_port=0, debounce=0.2, resync=1.0)
    try:
        with InThread(opts) as op:
            wait_until(lambda: kueue_ready(api), 180, "the operator's Kueue objects and an active ClusterQueue")
            whole = annotated_job(tmp_path, "whole-block", pods=4, gpus=8, kubeconfig=cluster.kubeconfig)
            three = annotated_job(tmp_path, "three-nodes", pods=3, gpus=8, kubeconfig=cluster.kubeconfig)
            assert fit(whole, cluster.kubeconfig, 0)["fits"] is True  # all 32 GPUs of the block are free

            victim = names[1]
            report(cluster, victim, "True", "LinkFlapping", "mlx5_4 went down 6 times")
            wait_until(lambda: TAINT in taints(nodes(cluster)[victim]), 30, "the victim's taint")
            assert health(nodes(cluster)[victim])[:2] == ("False", "FabricDegraded")
            assert [n for n in names if TAINT in taints(nodes(cluster)[n])] == [victim]
            op.wait_passes(op.passes() + 1)

            # fit now sees 24 GPUs in the block, and says what Kueue will say
            predicted = fit(whole, cluster.kubeconfig, 1)
            assert "allows to fit only 3 out of 4 pod(s)" in predicted["kueue_message"]
            jobs.append("whole-block")
            uid = submit(cluster, whole)
            seen: dict[str, Any] = {}
            wait_until(lambda: parked(cluster, uid, predicted["kueue_message"], seen), 120,
                       lambda: f"Kueue to set the Workload aside with fit's message {predicted['kueue_message']!r}; "
                               f"Kueue: {seen}", every=0.5)
            remove_job(cluster, TRAIN, "whole-block")
            jobs.remove("whole-block")
            cluster.kubectl("delete", "workloads.kueue.x-k8s.io", "-n", TRAIN, "--all", "--wait=true")

            # three nodes still fit: admitted where fit says, and not on the isolated node
            smaller = fit(three, cluster.kubeconfig, 0)
            (podset,) = smaller["podsets"]
            want = {n["node"]: n["pods"] for n in podset["nodes"]}
            assert victim not in want and sum(want.values()) == 3
            jobs.append("three-nodes")
            uid = submit(cluster, three)
            workload = wait_until(lambda: (w := workload_of(api, TRAIN, uid)) and is_admitted(w) and w, 120,
                                  "Kueue to admit the three-node Job")
            placed = admission(workload)["main"]
            assert {domain[-1]: pods for domain, pods in placed.domains.items()} == want
    finally:
        for name in jobs:
            remove_job(cluster, TRAIN, name)
        cluster.kubectl("delete", "localqueues.kueue.x-k8s.io", "gpu", "-n", TRAIN, "--ignore-not-found",
                        "--wait=false")
        cluster.kubectl("delete", "clusterqueues.kueue.x-k8s.io", QUEUE, "--ignore-not-found", "--wait=false")
        cluster.kubectl("delete", "resourceflavors.kueue.x-k8s.io,topologies.kueue.x-k8s.io", "-l",
                        "app.kubernetes.io/managed-by=topolabel", "--wait=false", check=False)
