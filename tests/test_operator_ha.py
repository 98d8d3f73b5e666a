"""Two `topolabel run --leader-elect` replicas on a real kube-apiserver, bound only to the manifests' RBAC:
SIGKILL the leader mid-pass; the standby takes the Lease over within 30 s, every node is labelled exactly
once (counted from the server's audit log), nothing is lost."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from hack.synth import gke_cluster
from testkit.kubecluster import KubeCluster, kube, kube_cluster  # noqa: F401
from testkit.operatorrun import kill, spawn, stop, wait_until
from tests.test_operator_apiserver import cluster, operator_writes, prepared, quiet  # noqa: F401
from topolabel.operator.leader import LEASE_NAME

pytestmark = pytest.mark.slow
NAMESPACE = "topolabel-system"
TAKEOVER = 30.0


def lease_rbac(cluster: KubeCluster) -> None:  # noqa: F811
    """No Lease left by another test: the Lease Role is bound to the test's operator user by bind_operator."""
    cluster.kubectl("delete", "lease", LEASE_NAME, "-n", NAMESPACE, "--ignore-not-found")


def holder(cluster: KubeCluster) -> str:  # noqa: F811
    done = cluster.kubectl("get", "lease", LEASE_NAME, "-n", NAMESPACE, "-o", "json", check=False)
    return (json.loads(done.stdout).get("spec") or {}).get("holderIdentity") or "" if done.returncode == 0 else ""


def identity(log: Path) -> str:
    """The identity a replica logged when it began waiting for the Lease."""
    found = re.search(r"waiting for Lease \S+ as (\S+)", log.read_text(errors="replace"))
    return found.group(1) if found else ""


def test_the_standby_takes_over_within_30_s_and_every_node_is_labelled_once(
        cluster: KubeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    lease_rbac(cluster)
    items, truth = gke_cluster(2, 4, 100)  # 800 nodes written one at a time: seconds to kill the leader mid-way
    config = tmp_path / "topolabel.yaml"
    config.write_text(yaml.safe_dump({"source": {"type": "labels", "preset": "gke"}, "apply": {"concurrency": 1}}))
    cluster.create_nodes(items)
    start = cluster.audit_mark()
    monkeypatch.setenv("POD_NAMESPACE", NAMESPACE)
    args = ["--kubeconfig", str(cluster.operator_kubeconfig), "--config", str(config), "--http", "127.0.0.1:0",
            "--leader-elect"]
    logs = [tmp_path / "first.log", tmp_path / "second.log"]
    first = spawn(args, logs[0])
    second = None
    try:
        wait_until(lambda: identity(logs[0]) and holder(cluster) == identity(logs[0]), 60, "the first replica to lead")
        second = spawn(args, logs[1])
        wait_until(lambda: identity(logs[1]), 60, "the second replica to wait for the Lease")
        wait_until(lambda: len(operator_writes(cluster, start, "nodes")) >= 40, 120, "40 node patches", every=0.05)
        assert holder(cluster) == identity(logs[0])  # the standby waited
        kill(first)
        killed = time.monotonic()
        wait_until(lambda: holder(cluster) == identity(logs[1]), TAKEOVER + 10, "the standby to take the Lease",
                   every=0.2)
        takeover = time.monotonic() - killed
        mark = cluster.audit_mark()
        wait_until(lambda: operator_writes(cluster, mark, "nodes"), 60, "the new leader's first patch", every=0.2)
        first_patch = time.monotonic() - killed
        wait_until(lambda: all(labels.get("topolabel.dev/host") == truth[n][2]
                               for n, labels in cluster.node_labels().items()), 180, "all nodes labelled", every=0.5)
    finally:
        kill(first)
        if second is not None:
            stop(second)
    wait_until(lambda: quiet(cluster), 30, "the server to settle")
    print(f"failover: Lease taken {takeover:.1f}s after the SIGKILL, first patch after {first_patch:.1f}s")
    assert takeover < TAKEOVER
    patches = operator_writes(cluster, start, "nodes")
    in_flight = {e.name for e in patches if e.code >= 300}
    assert len(in_flight) <= 1  # at most the one patch in flight at the kill
    written = Counter(e.name for e in patches if e.code < 300)
    # That patch can land although its client died before the answer (the server then audits it as failed):
    # its node, labelled as every node is (waited for above), has no other write. Any other node: exactly one.
    assert written == {n: 1 for n in truth if n in written} and set(truth) - set(written) <= in_flight
