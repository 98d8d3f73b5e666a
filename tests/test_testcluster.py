"""hack/testcluster.py and the fixture's rules: clusters side by side, a taken port retried, stopping by PID
only what belongs to the cluster, and skip-or-fail when the server binary is missing."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from hack import testcluster
from tests import kubecluster


@pytest.mark.slow
def test_two_clusters_side_by_side_and_a_taken_port_retried(tmp_path: Path, monkeypatch) -> None:
    binaries = kubecluster.binaries_or_skip()
    first = testcluster.up(tmp_path / "a", binaries)
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    picks = iter([[taken.getsockname()[1], *testcluster.free_ports(2)]])
    real_free_ports = testcluster.free_ports
    monkeypatch.setattr(testcluster, "free_ports", lambda n: next(picks, None) or real_free_ports(n))
    try:
        second = testcluster.up(tmp_path / "b", binaries)
        assert "address already in use" in (tmp_path / "b" / "etcd.log").read_text()
        assert second.server != first.server
        for root, state in ((tmp_path / "a", first), (tmp_path / "b", second)):
            assert testcluster.request(state.server, "/readyz", root / "pki" / "ca.crt",
                                       state.tokens[testcluster.ADMIN]) == (200, "ok")
        assert testcluster.up(tmp_path / "a", binaries).pids == first.pids  # already up: nothing new
    finally:
        taken.close()
        testcluster.down(tmp_path / "b")
        testcluster.down(tmp_path / "a")
    assert not any(testcluster.alive(pid, tmp_path / "a") for pid in first.pids.values())
    assert not any(testcluster.alive(pid, tmp_path / "b") for pid in second.pids.values())
    assert not (tmp_path / "a" / "cluster.json").exists()
    testcluster.down(tmp_path / "a")  # a second down is a no-op


def test_alive_only_for_processes_of_that_directory(tmp_path: Path) -> None:
    assert not testcluster.alive(os.getpid(), tmp_path)  # pytest's command line does not name tmp_path/
    assert not testcluster.alive(2**22 + 1, tmp_path)  # above pid_max: no such process


def test_missing_server_skips_outside_ci_and_fails_in_ci(monkeypatch) -> None:
    monkeypatch.setattr(testcluster, "find_binaries", lambda: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="hack/build-kube-apiserver"):
        kubecluster.binaries_or_skip()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        kubecluster.binaries_or_skip()
