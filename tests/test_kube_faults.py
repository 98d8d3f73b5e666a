"""Every Kubernetes call ends within its timeout with one line and exit 2 (CLI), or is retried (operator).

Raw-socket servers (testkit/faultserver.py) stand in for a silent server, headers, a body or a TLS handshake that
drip a byte at a time, a PATCH nobody answers, a connection dropped mid-PATCH, a proxy answering HTML, a body
that never ends, throttling with a long Retry-After, lists that page for ever and JSON of the wrong shape
(issue 32's hostile API server); the CLI runs in-process.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
from kubernetes.client import CoreV1Api  # noqa: F401 - loaded once here (seconds), not inside a timed command
from kubernetes.client.exceptions import ApiException

from labeler.cluster import kube
from labeler.cluster.kube import MAX_RETRY_AFTER, call_with_retries, retry_delay
from labeler.errors import KubeUnreachable
from testkit.environment import EXAMPLES
from testkit.faultserver import (DropsFirstPatch, EndlessPages, FaultServer, answering, closed_port, flood, header_drip,
                               html, no_patch_answer, silent, slow_drip, tls_drip)
from topolabel.cli import main

TIMEOUT = 2.0
LIMIT = TIMEOUT + 4.0  # the timeout, plus start-up and one connection


def plan(kubeconfig: str) -> list[str]:
    return ["plan", "--source", "labels", "--preset", "gke", "--kubeconfig", kubeconfig, "-o", "json",
            "--request-timeout", str(TIMEOUT), "--connect-timeout", str(TIMEOUT)]


def timed(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str, float]:
    start = time.monotonic()
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err, time.monotonic() - start


@pytest.mark.parametrize("behave, fragment", [
    (silent, f"no answer within {TIMEOUT:g}s"),
    (slow_drip, f"the answer took longer than {TIMEOUT:g}s"),
    (header_drip, f"no answer within {TIMEOUT:g}s"),  # the deadline once started after the headers
    (html, "answered with something that is not JSON (text/html)"),
])
def test_a_server_that_does_not_answer_properly_ends_within_the_timeout(behave, fragment: str, tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    with FaultServer(behave) as server:
        code, _, err, seconds = timed(plan(server.kubeconfig(tmp_path)), capsys)
    assert code == 2 and seconds < LIMIT, (code, seconds, err)
    assert fragment in err and len(err.strip().splitlines()) == 1, err


def test_a_refused_connection_is_one_line_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server = FaultServer(silent)
    server.port = closed_port()
    code, _, err, seconds = timed(plan(server.kubeconfig(tmp_path)), capsys)
    assert code == 2 and seconds < LIMIT and "cannot connect: " in err and "Connection refused" in err, err
    assert len(err.strip().splitlines()) == 1


def write_snapshot(tmp_path: Path) -> str:
    path = tmp_path / "snap.json"
    path.write_text(json.dumps({"levels": [{"name": "block", "label": "topolabel.dev/block"}],
                                "nodes": {"n1": {"block": "b1"}}, "problems": []}))
    return str(path)


def test_an_unanswered_patch_ends_within_the_timeout_and_apply_prints_its_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with FaultServer(no_patch_answer) as server:
        code, out, err, seconds = timed(["apply", "--snapshot", write_snapshot(tmp_path), "--kubeconfig",
                                         server.kubeconfig(tmp_path), "--request-timeout", str(TIMEOUT), "-o", "json"],
                                        capsys)
    assert code == 2 and seconds < LIMIT, (code, seconds, err)
    report = json.loads(out)
    assert report["result"]["written"] == 0 and f"no answer within {TIMEOUT:g}s" in report["result"]["failed"]["n1"]
    assert len(err.strip().splitlines()) == 1 and "1 node(s) got no answer" in err


def test_a_connection_dropped_during_apply_is_retried(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    drops = DropsFirstPatch()
    with FaultServer(drops) as server:
        code, out, err, _ = timed(["apply", "--snapshot", write_snapshot(tmp_path), "--kubeconfig",
                                   server.kubeconfig(tmp_path), "-o", "json"], capsys)
    assert code == 0, err
    assert json.loads(out)["result"] == {"written": 1, "failed": {}, "retries": 1}
    assert drops.patches == 2


@pytest.mark.parametrize("header, expected", [("-5", 0.0), ("nan", None), ("inf", None), ("1e9", MAX_RETRY_AFTER),
                                              ("2", 2.0), ("Wed, 21 Oct 2015 07:28:00 GMT", None)])
def test_retry_after_is_clamped(header: str, expected: float | None) -> None:
    exc = ApiException(status=429)
    exc.headers = {"Retry-After": header}
    delay = retry_delay(exc, 0)
    assert math.isfinite(delay) and 0 <= delay <= MAX_RETRY_AFTER
    if expected is not None:
        assert delay == expected
    else:
        assert delay <= 0.2  # not a usable number: the first backoff step


def test_only_the_patient_operator_retries_a_timeout() -> None:
    calls = []

    def times_out() -> None:
        calls.append(1)
        raise KubeUnreachable("https://api: no answer within 20s")

    with pytest.raises(KubeUnreachable):
        call_with_retries(times_out, retries=3, sleep=lambda _: None)
    assert len(calls) == 1
    with pytest.raises(KubeUnreachable):
        call_with_retries(times_out, retries=3, sleep=lambda _: None, patient=True)
    assert len(calls) == 1 + 4


def one_line(code: int, err: str, fragment: str) -> None:
    assert code == 2 and fragment in err and len(err.strip().splitlines()) == 1, (code, err)
    assert "internal error" not in err


def test_a_tls_handshake_that_drips_ends_within_the_connect_timeout(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    with FaultServer(tls_drip) as server:
        code, _, err, seconds = timed(plan(server.kubeconfig(tmp_path, tls=True)), capsys)
    assert seconds < LIMIT, (seconds, err)
    one_line(code, err, "127.0.0.1")


def test_a_long_retry_after_ends_within_the_request_timeout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Retry-After: 60 once made one request wait 5 x 60 s under --request-timeout 3."""
    throttled = answering(b'{"kind": "Status", "message": "slow down"}', "429 Too Many Requests", "Retry-After: 60\r\n")
    with FaultServer(throttled) as server:
        code, _, err, seconds = timed(plan(server.kubeconfig(tmp_path)), capsys)
        assert seconds < LIMIT, (seconds, err)
        one_line(code, err, "429 Too Many Requests: slow down")
        code, out, err, seconds = timed(["apply", "--snapshot", write_snapshot(tmp_path), "--kubeconfig",
                                         server.kubeconfig(tmp_path), "--request-timeout", str(TIMEOUT), "-o", "json"],
                                        capsys)
    assert seconds < LIMIT and code == 2, (seconds, err)  # the node list is throttled before any patch


def test_a_patch_throttled_past_the_budget_is_reported_at_once() -> None:
    sleeps: list[float] = []
    exc = ApiException(status=429)
    exc.headers = {"Retry-After": "2"}

    def throttled() -> None:
        raise exc

    with pytest.raises(ApiException):
        call_with_retries(throttled, retries=5, sleep=sleeps.append, budget=5.0, clock=lambda: sum(sleeps))
    assert sleeps == [2.0, 2.0]  # a third wait would end past the 5 s budget


@pytest.mark.parametrize("same, fragment", [(True, "pages in a circle"), (False, "it pages for ever")])
def test_a_list_that_pages_for_ever_ends(same: bool, fragment: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(kube, "MAX_PAGES", 20)
    pager = EndlessPages(same)
    with FaultServer(pager) as server:
        code, _, err, _ = timed(plan(server.kubeconfig(tmp_path)), capsys)
    one_line(code, err, fragment)
    assert pager.pages == (2 if same else 20)


def test_a_body_that_never_ends_is_cut_at_the_answer_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A fast endless body once reached 2 GB in 3 s: read_body kept every chunk."""
    monkeypatch.setattr(kube, "MAX_ANSWER", 4 << 20)
    with FaultServer(flood) as server:
        code, _, err, seconds = timed(plan(server.kubeconfig(tmp_path)), capsys)
    assert seconds < LIMIT
    one_line(code, err, "an answer larger than 4 MiB; refused")


WRONG_SHAPES = {"a list": b"[]", "items a number": b'{"items": 5}', "50,000 deep": b"[" * 50_000 + b"]" * 50_000,
                "a lone surrogate in a name": b'{"items": [{"metadata": {"name": "n\\ud800"}}]}',
                "continue a number": b'{"metadata": {"continue": 5}, "items": []}'}


@pytest.mark.parametrize("shape", WRONG_SHAPES)
@pytest.mark.parametrize("where", ["/api/v1/nodes", "/api/v1/pods", "/apis/kueue.x-k8s.io/"])
def test_json_of_the_wrong_shape_is_one_line_for_every_reader(shape: str, where: str, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """fit reads all three lists (nodes, pods, Kueue objects); each once gave internal errors."""
    with FaultServer(answering(WRONG_SHAPES[shape], where=where)) as server:
        code, _, err, _ = timed(["fit", str(EXAMPLES / "jobs" / "pytorchjob.yaml"), "--kubeconfig",
                                 server.kubeconfig(tmp_path)], capsys)
    one_line(code, err, "127.0.0.1")


def commands(kubeconfig: str, snapshot: str) -> dict[str, list[str]]:
    job = str(EXAMPLES / "jobs" / "pytorchjob.yaml")
    source = ["--source", "labels", "--preset", "gke", "--kubeconfig", kubeconfig]
    return {"discover": ["discover", *source], "plan": ["plan", *source], "kueue": ["kueue", *source, "-o", "yaml"],
            "verify": ["verify", *source], "export": ["export", "slurm", *source],
            "apply": ["apply", "--snapshot", snapshot, "--kubeconfig", kubeconfig],
            "show": ["show", "--kubeconfig", kubeconfig], "fit": ["fit", job, "--kubeconfig", kubeconfig],
            "job check": ["job", "check", job, "--kubeconfig", kubeconfig],
            "job annotate": ["job", "annotate", job, "--queue", "gpu", "--within", "block", "--kubeconfig", kubeconfig],
            "why": ["why", "default/job-a", "--kubeconfig", kubeconfig],
            "capacity": ["capacity", "--size", "2", "--gpus", "8", "--within", "block", "--kubeconfig", kubeconfig]}


@pytest.mark.parametrize("command", ["discover", "plan", "kueue", "verify", "export", "apply", "show", "fit",
                                     "job check", "job annotate", "why", "capacity"])
def test_every_command_that_reads_the_cluster_answers_a_wrong_shape_in_one_line(
        command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with FaultServer(answering(b'{"items": 5}', where="/api")) as server:
        code, _, err, _ = timed(commands(server.kubeconfig(tmp_path), write_snapshot(tmp_path))[command], capsys)
    one_line(code, err, "the wrong shape")



NAMESPACES, PRIORITY_CLASSES = "/api/v1/namespaces", "/apis/scheduling.k8s.io/v1/priorityclasses"
HOSTILE_ITEMS = [(NAMESPACES, {"kind": "Namespace"}, "metadata.name must be a string"),
                 (NAMESPACES, {"metadata": {"name": ["a"]}}, "metadata.name must be a string"),
                 (NAMESPACES, {"metadata": {"name": "team-a", "labels": []}}, "namespace team-a: labels must be a mapping"),
                 (PRIORITY_CLASSES, {"metadata": {"name": "high"}, "value": "1e9"},
                  "PriorityClass high: value must be an integer")]


@pytest.mark.parametrize("where, item, fragment", HOSTILE_ITEMS)
def test_items_of_the_wrong_shape_in_the_lists_fit_reads_are_one_line(where: str, item: dict, fragment: str,
                                                                      tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Namespaces (for ClusterQueues' namespaceSelector) and PriorityClasses (for preemption) once indexed
    `metadata.name` and cast `value` unchecked: an item without them was an internal error."""
    body = json.dumps({"kind": "List", "apiVersion": "v1", "metadata": {}, "items": [item]}).encode()
    with FaultServer(answering(body, where=where)) as server:
        code, _, err, _ = timed(["fit", str(EXAMPLES / "jobs" / "pytorchjob.yaml"), "--kubeconfig",
                                 server.kubeconfig(tmp_path)], capsys)
    one_line(code, err, fragment)
