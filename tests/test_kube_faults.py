"""Every Kubernetes call ends within its timeout with one line and exit 2 (CLI), or is retried (operator).

Raw-socket servers (tests/faultserver.py) stand in for a silent server, a body that drips a byte at a time,
a PATCH nobody answers, a connection dropped mid-PATCH and a proxy answering HTML; the CLI runs in-process.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
from kubernetes.client import CoreV1Api  # noqa: F401 - loaded once here (seconds), not inside a timed command
from kubernetes.client.exceptions import ApiException

from labeler.errors import KubeUnreachable
from labeler.kube import MAX_RETRY_AFTER, call_with_retries, retry_delay
from tests.faultserver import DropsFirstPatch, FaultServer, closed_port, html, no_patch_answer, silent, slow_drip
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
