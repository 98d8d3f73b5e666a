"""Kubeconfigs are read like every other document (issue 32, example 1): bounded, plain data, each field's type
checked, one line naming the file; exec credential plugins run under a timeout that ends their process group.

Before, the client's loader parsed them unbounded (a 380-byte alias bomb took 30 s, 3.6 GB and printed a 312 MB
traceback), a NUL, a latin-1 byte, two documents, a Python tag, `users: 5` or deep nesting were internal errors,
and a plugin that never answered hung every command. Each case runs the CLI in-process against a raw-socket
server (testkit/faultserver.py) or none at all.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import time
from pathlib import Path

import pytest

from testkit.fuzz import ALIAS_BOMB
from labeler.cluster import kubeconfig
from labeler.cluster.kubeconfig import read_kubeconfig
from labeler.errors import InputError
from testkit.faultserver import NODE_LIST, FaultServer, answer, read_request
from topolabel.cli import main

HOSTILE = {
    "an alias bomb": (ALIAS_BOMB, "aliases expand the document"),
    "a NUL": (b"apiVersion: v1\nclusters: \x00\n", "not valid YAML"),
    "a latin-1 byte": (b"apiVersion: v1\ncurrent-context: caf\xe9\n", "not UTF-8 text (byte 35 is 0xe9)"),
    "two documents": (b"apiVersion: v1\n---\napiVersion: v1\n", "2 YAML documents; expected one"),
    "a Python tag": (b'users: !!python/object/apply:os.system ["true"]\n', "could not determine a constructor"),
    "users: 5": (b"apiVersion: v1\nusers: 5\n", "users must be a list, not a number"),
    "50,000-deep nesting": (b"[" * 50_000 + b"]" * 50_000, "nested deeper than 100 levels"),
    "a cluster's server a list": (b"clusters: [{name: c, cluster: {server: [x]}}]\n", "clusters[c].cluster.server must be a string"),
    "an entry without a name": (b"contexts: [{context: {cluster: c}}]\n", "contexts[0]: needs a name"),
}


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, float]:
    start = time.monotonic()
    code = main(argv)
    return code, capsys.readouterr().err, time.monotonic() - start


@pytest.mark.parametrize("what", HOSTILE)
def test_a_hostile_kubeconfig_is_one_line(what: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    content, fragment = HOSTILE[what]
    path = tmp_path / "kubeconfig"
    path.write_bytes(content)
    code, err, seconds = run(["plan", "--source", "labels", "--preset", "gke", "--kubeconfig", str(path)], capsys)
    assert code == 2 and fragment in err and str(path) in err, err
    assert len(err.strip().splitlines()) == 1 and len(err) < 3000 and "internal error" not in err
    assert seconds < 5


def config(server: str, user: dict, **extra: object) -> dict:
    return {"apiVersion": "v1", "kind": "Config", "current-context": "c", **extra,
            "clusters": [{"name": "c", "cluster": {"server": server}}], "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}


def plugin(tmp_path: Path, script: str) -> dict:
    """A kubeconfig user whose credentials come from `script` (a shell script)."""
    path = tmp_path / "plugin.sh"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "./plugin.sh", "args": ["--x"],
                     "env": [{"name": "PLUGIN_SAYS", "value": "hello"}]}}


def test_a_plugin_that_never_answers_is_stopped_with_its_children(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(kubeconfig, "EXEC_SECONDS", 1.0)
    pidfile = tmp_path / "child.pid"
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(config("http://127.0.0.1:9", plugin(tmp_path, f"sleep 600 &\necho $! > {pidfile}\nsleep 600\n"))))
    code, err, seconds = run(["plan", "--source", "labels", "--preset", "gke", "--kubeconfig", str(path)], capsys)
    assert code == 2 and seconds < 5 and "exec plugin" in err and "no answer within 1 s" in err, err
    child = int(pidfile.read_text())
    time.sleep(0.2)
    assert not Path(f"/proc/{child}").exists() or "zombie" in Path(f"/proc/{child}/status").read_text().lower()


def test_a_plugin_that_floods_is_stopped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(config("http://127.0.0.1:9", plugin(tmp_path, "yes\n"))))
    code, err, _ = run(["plan", "--source", "labels", "--preset", "gke", "--kubeconfig", str(path)], capsys)
    assert code == 2 and "printed more than 1 MiB; stopped" in err, err


def test_a_plugins_token_reaches_the_server_and_is_asked_again_when_it_expires(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The plugin runs with the kubeconfig's args and env and KUBERNETES_EXEC_INFO, in the kubeconfig's
    directory; its token is the bearer token; an expired token is asked for again before the next call."""
    calls = tmp_path / "calls"
    script = (f'echo "$PLUGIN_SAYS $1 $(pwd)" >> {calls}\n'
              "printf '{\"apiVersion\": \"client.authentication.k8s.io/v1\", \"kind\": \"ExecCredential\", "
              "\"status\": {\"token\": \"tok-%s\", \"expirationTimestamp\": \"2000-01-01T00:00:00Z\"}}' "
              "\"$(wc -l < " + str(calls) + " | tr -d ' ')\"\n")
    seen: list[bytes] = []

    def recording(conn: socket.socket) -> None:
        while head := read_request(conn):
            seen.append(head)
            answer(conn, json.dumps(NODE_LIST).encode())

    with FaultServer(recording) as server:
        path = tmp_path / "kubeconfig"
        path.write_text(json.dumps(config(f"http://127.0.0.1:{server.port}", plugin(tmp_path, script))))
        code, err, _ = run(["plan", "--source", "labels", "--preset", "gke", "--kubeconfig", str(path), "-o", "json"],
                           capsys)
    assert code == 0, err
    assert calls.read_text().splitlines()[0] == f"hello --x {tmp_path}"
    tokens = [line for data in seen for line in data.decode(errors="replace").splitlines()
              if line.lower().startswith("authorization:")]
    assert tokens and tokens[0].endswith("Bearer tok-2")  # asked at connect (tok-1), expired, asked again
    assert len(calls.read_text().splitlines()) == 2


def test_kubeconfig_files_merge_in_kubectls_order_with_paths_relative_to_each(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = tmp_path / "a" / "config"
    second = tmp_path / "b" / "config"
    first.write_text(json.dumps({"current-context": "one", "clusters": [
        {"name": "c", "cluster": {"server": "https://first", "certificate-authority": "ca.crt"}}], "contexts": [
        {"name": "one", "context": {"cluster": "c", "user": "u"}}]}))
    second.write_text(json.dumps({"current-context": "two", "clusters": [
        {"name": "c", "cluster": {"server": "https://second"}}, {"name": "d", "cluster": {"server": "https://d"}}],
        "users": [{"name": "u", "user": {"tokenFile": "token"}}]}))
    merged = read_kubeconfig(f"{first}{os.pathsep}{tmp_path / 'missing'}{os.pathsep}{second}")
    assert merged["current-context"] == "one"
    assert merged["clusters"] == [
        {"name": "c", "cluster": {"server": "https://first", "certificate-authority": str(tmp_path / "a" / "ca.crt")}},
        {"name": "d", "cluster": {"server": "https://d"}}]
    assert merged["users"] == [{"name": "u", "user": {"tokenFile": str(tmp_path / "b" / "token")}}]
    with pytest.raises(InputError, match="no such kubeconfig file"):
        read_kubeconfig(str(tmp_path / "missing"))
