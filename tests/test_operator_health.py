"""The operator's probes and leader election, on kmock: /healthz fails when API calls keep failing, /readyz
waits for a config and a full pass, and of two replicas only the Lease holder works (the Lease itself,
`labeler.cluster.lease`, is tested on the real API server in tests/test_lease.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException

from hack.synth import gke_cluster
from labeler.cluster.kube import connect
from testkit.kmockcluster import MockCluster
from testkit.operatorrun import InThread, wait_until
from tests.test_operator_kmock import GKE_FLAGS, http_get, node_patches, options
from topolabel.operator.kubeapi import Kube
from topolabel.operator.metrics import Health, Metrics


def test_healthz_fails_once_calls_have_failed_for_twice_the_timeout() -> None:
    failing: list[float | None] = [None]
    health = Health(stale_after=600, api_grace=40.0, failing_since=lambda: failing[0])
    health.beat()
    assert health.alive() == (True, "ok")
    failing[0] = time.monotonic() - 30
    assert health.alive()[0] is True
    failing[0] = time.monotonic() - 41
    ok, why = health.alive()
    assert not ok and "calls to the API server have failed for 41s" in why
    assert health.readiness()[0] is False


def test_readyz_waits_for_the_first_full_pass_and_a_config() -> None:
    configured = [False]
    health = Health(stale_after=600, configured=lambda: configured[0])
    assert health.readiness() == (False, "no full pass yet")
    health.ready = True
    assert health.readiness()[0] is False and "no valid config" in health.readiness()[1]
    configured[0] = True
    assert health.readiness() == (True, "ready")
    health.standby = True
    assert health.readiness() == (True, "standby: another replica holds the leader Lease")


def test_the_kube_layer_records_since_when_calls_fail(tmp_path: Path) -> None:
    clock = [100.0]
    with MockCluster() as cluster:
        kube = Kube(connect(str(cluster.kubeconfig(tmp_path))), Metrics(), retries=0, clock=lambda: clock[0])
        assert kube.get("/api/v1/nodes/none") is None and kube.failing_since is None  # a 404 is an answer
        cluster.in_loop(lambda h: h["get /api/v1/namespaces"] << 503)
        with pytest.raises(ApiException):
            kube.request("get", "/api/v1/namespaces")
        assert kube.failing_since == 100.0
        clock[0] = 130.0
        with pytest.raises(ApiException):
            kube.request("get", "/api/v1/namespaces")
        assert kube.failing_since == 100.0  # since the first failure
        kube.request("get", "/api/v1/nodes")
        assert kube.failing_since is None


def test_an_operator_without_a_config_is_alive_but_not_ready(tmp_path: Path) -> None:
    with MockCluster() as cluster, InThread(options(cluster, tmp_path)) as op:
        op.wait_passes(1)
        assert http_get(op.operator.port, "/healthz")[0] == 200
        code, text = http_get(op.operator.port, "/readyz")
        assert code == 503 and "no valid config" in text


def test_of_two_replicas_only_the_leader_labels_and_the_standby_takes_over(tmp_path: Path) -> None:
    items, truth = gke_cluster(1, 2, 4)
    with MockCluster() as cluster:
        cluster.create_nodes(items)
        opts = options(cluster, tmp_path, flags=GKE_FLAGS, leader_election=True, namespace="topolabel-system")
        leader = InThread(opts).__enter__()
        try:
            leader.wait_passes(1)
            assert sorted(node_patches(cluster)) == sorted(truth)
            with InThread(opts) as standby:
                wait_until(lambda: standby.operator.port, 10, "the standby's probes")
                assert http_get(standby.operator.port, "/readyz") == (200, "standby: another replica holds the "
                                                                          "leader Lease\n")
                time.sleep(3)  # a few of the standby's attempts
                assert standby.operator.controller is None  # it never started kopf or the reconcile loop
                leader.__exit__(None, None, None)  # a clean stop releases the Lease: the standby takes it at once
                standby.wait_passes(1, timeout=30)
                mark = len(cluster.seen())
                cluster.create_nodes(gke_cluster(1, 2, 5)[0][-1:])  # a node joins: the new leader labels it
                wait_until(lambda: node_patches(cluster, mark), 15, "the new leader's label patch")
        finally:
            leader.__exit__(None, None, None)
        assert sorted(node_patches(cluster)) == sorted([*truth, "gke-a3-b00-s01-n004"])  # each node once
        holders = {s.data["spec"]["holderIdentity"] for s in cluster.writes() if "leases" in s.path and s.data}
        assert len(holders - {"", None}) == 2
