"""hack/testcluster.py and the fixture's rules: clusters side by side, a taken port retried, stopping by PID
only what belongs to the cluster, the command line, Kueue's webhooks pointed at 127.0.0.1, and skip-or-fail
when the binaries are missing."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from hack import testcluster
from testkit import kubecluster
from testkit.environment import ROOT


@pytest.mark.slow
def test_two_clusters_side_by_side_and_a_taken_port_retried(tmp_path: Path, monkeypatch) -> None:
    binaries = kubecluster.binaries_or_skip()
    up = subprocess.run([str(ROOT / "hack" / "test-cluster"), "up", str(tmp_path / "a")], capture_output=True,
                        text=True, timeout=180)
    assert up.returncode == 0, up.stderr
    assert f"export KUBECONFIG={tmp_path / 'a' / 'kubeconfig'}" in up.stdout
    first = testcluster.read_state(tmp_path / "a")
    assert set(first.pids) == {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    real_free_ports = testcluster.free_ports
    picks = iter([[taken.getsockname()[1], *real_free_ports(4)]])
    monkeypatch.setattr(testcluster, "free_ports", lambda n: next(picks, None) or real_free_ports(n))
    try:
        second = testcluster.up(tmp_path / "b", binaries)
        assert "address already in use" in (tmp_path / "b" / "etcd.log").read_text()
        assert second.server != first.server
        for root, state in ((tmp_path / "a", first), (tmp_path / "b", second)):
            assert testcluster.request(state.server + "/readyz", root / "pki" / "ca.crt",
                                       state.tokens[testcluster.ADMIN]) == (200, "ok")
        assert testcluster.up(tmp_path / "a", binaries).pids == first.pids  # already up: nothing new
        with pytest.raises(testcluster.ClusterError, match="runs without KWOK"):  # KWOK is chosen at the start
            testcluster.up(tmp_path / "a", replace(binaries, kwok="kwok", kwok_module="kwok-module"), kwok=True)
        version = json.loads(testcluster.request(first.server + "/version", tmp_path / "a" / "pki" / "ca.crt",
                                                 first.tokens[testcluster.ADMIN])[1])
        assert version["gitVersion"].startswith("v1.36.")
    finally:
        taken.close()
        testcluster.down(tmp_path / "b")
        down = subprocess.run([str(ROOT / "hack" / "test-cluster"), "down", str(tmp_path / "a")], timeout=60)
    assert down.returncode == 0
    assert not any(testcluster.alive(pid, tmp_path / "a") for pid in first.pids.values())
    assert not any(testcluster.alive(pid, tmp_path / "b") for pid in second.pids.values())
    assert not (tmp_path / "a" / "cluster.json").exists()
    testcluster.down(tmp_path / "a")  # a second down is a no-op


def test_usage_errors_exit_2(capsys) -> None:
    assert testcluster.main(["up"]) == 2
    assert testcluster.main(["down", "/tmp/x", "--with-kueue"]) == 2
    assert testcluster.main(["down", "/tmp/x", "--with-kwok"]) == 2
    assert "hack/test-cluster up DIR [--with-kueue] [--with-kwok]" in capsys.readouterr().err


def test_alive_only_for_processes_of_that_directory(tmp_path: Path) -> None:
    assert not testcluster.alive(os.getpid(), tmp_path)  # pytest's command line does not name tmp_path/
    assert not testcluster.alive(2**22 + 1, tmp_path)  # above pid_max: no such process


def test_kueue_webhooks_and_conversion_are_pointed_at_127_0_0_1() -> None:
    """Kueue's manifests name its Service; the test cluster calls the manager on 127.0.0.1 instead, with
    the same paths and the cluster's CA."""
    service = {"service": {"name": "kueue-webhook-service", "namespace": "kueue-system", "path": "/validate-x"}}
    hooks = {"kind": "ValidatingWebhookConfiguration", "webhooks": [
        {"name": "vjob.kb.io", "clientConfig": json.loads(json.dumps(service)), "failurePolicy": "Fail"}]}
    crd = {"kind": "CustomResourceDefinition", "spec": {"conversion": {"strategy": "Webhook", "webhook": {
        "clientConfig": {"service": {"name": "s", "namespace": "n", "path": "/convert"}},
        "conversionReviewVersions": ["v1"]}}}}
    plain = {"kind": "CustomResourceDefinition", "spec": {"group": "kueue.x-k8s.io"}}
    assert testcluster.rewrite_for_local_webhooks(hooks, 9443, "Q0E=")["webhooks"] == [
        {"name": "vjob.kb.io", "clientConfig": {"url": "https://127.0.0.1:9443/validate-x", "caBundle": "Q0E="},
         "failurePolicy": "Fail"}]
    assert testcluster.rewrite_for_local_webhooks(crd, 9443, "Q0E=")["spec"]["conversion"]["webhook"]["clientConfig"] \
        == {"url": "https://127.0.0.1:9443/convert", "caBundle": "Q0E="}
    assert testcluster.rewrite_for_local_webhooks(plain, 9443, "Q0E=") == plain


def test_a_crd_whose_conditions_are_still_null_is_waited_for() -> None:
    """A CRD the moment it is created (`kubectl wait --for=condition=Established` failed on this null); the
    waiting itself runs wherever a test applies a CRD (test_chart.py: two at once, a List; kueue_jobs.py: one)."""
    fresh = {"metadata": {"name": "x.example.com"}, "status": {"conditions": None, "storedVersions": ["v1"]}}
    assert not testcluster.established(fresh)
    assert not testcluster.established({"metadata": {"name": "x.example.com"}})
    assert testcluster.established({**fresh, "status": {"conditions": [
        {"type": "NamesAccepted", "status": "True"}, {"type": "Established", "status": "True"}]}})


def test_missing_binaries_skip_outside_ci_and_fail_in_ci(monkeypatch) -> None:
    monkeypatch.setattr(testcluster, "find_binaries", lambda: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="hack/build-test-stack"):
        kubecluster.binaries_or_skip()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        kubecluster.binaries_or_skip()


def test_kwok_turns_on_node_lifecycle_and_without_it_the_control_plane_is_unchanged(tmp_path: Path) -> None:
    """Only a KWOK cluster runs the node lifecycle controller and the not-ready taint at registration, as a
    cluster with kubelets does; its Lease renewals stay out of the audit log."""
    plain = testcluster.apiserver_command("kube-apiserver", tmp_path, "http://127.0.0.1:1", 2)
    kwok = testcluster.apiserver_command("kube-apiserver", tmp_path, "http://127.0.0.1:1", 2, kwok=True)
    assert set(plain) - set(kwok) == {"--disable-admission-plugins=TaintNodesByCondition"} and set(kwok) < set(plain)
    plain = testcluster.controller_manager_command("kcm", tmp_path, 3)
    kwok = testcluster.controller_manager_command("kcm", tmp_path, 3, lease_seconds=20)
    assert "--controllers=*,-node-lifecycle-controller,-ttl-controller" in plain
    assert not any(a.startswith("--node-monitor") for a in plain)
    assert set(kwok) - set(plain) == {"--controllers=*,-ttl-controller", "--node-monitor-grace-period=20s",
                                      "--node-startup-grace-period=60s"}
    assert testcluster.audit_policy(kwok=False) == testcluster.AUDIT_POLICY
    rules = yaml.safe_load(testcluster.audit_policy(kwok=True))["rules"]
    assert rules[:-2] == yaml.safe_load(testcluster.AUDIT_POLICY)["rules"][:-1] and rules[-1] == {"level": "Metadata"}
    assert rules[-2] == {"level": "None", "users": ["system:serviceaccount:kube-system:kwok-controller"],
                         "verbs": ["update", "patch"], "resources": [{"group": "coordination.k8s.io",
                                                                      "resources": ["leases"]}]}
