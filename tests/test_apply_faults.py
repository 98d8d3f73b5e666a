"""`topolabel apply` under API faults a real server will not produce on demand: 429 with Retry-After,
409, 500 that does not go away, 403. Served by kmock (a stateful Kubernetes mock over real HTTP); the
CLI runs in a thread so kmock's event loop keeps answering.

kmock stores a PATCH even when a reaction answers it with an error, so these tests assert what the
client did (requests sent, retries, waits, exit code, report), not what the mock stored.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import kmock
import pytest

from topolabel.cli import main

NODES = ("n1", "n2", "n3")
SNAPSHOT = {"levels": [{"name": "block", "label": "topolabel.dev/block"}], "problems": [],
            "nodes": {name: {"block": "b1"} for name in NODES}}


@pytest.fixture
def cluster(kmock: kmock.KubernetesEmulator, tmp_path: Path) -> dict[str, str]:
    """Three bare Nodes in kmock, a kubeconfig for it, a snapshot placing all three, a config with
    2 retries (so a persistent failure gives up in about a second)."""
    for name in NODES:
        kmock.objects["v1/nodes", None, name] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
    kubeconfig = {"apiVersion": "v1", "kind": "Config", "current-context": "kmock",
                  "clusters": [{"name": "kmock", "cluster": {"server": str(kmock.url).rstrip("/")}}],
                  "users": [{"name": "anonymous", "user": {}}],
                  "contexts": [{"name": "kmock", "context": {"cluster": "kmock", "user": "anonymous"}}]}
    paths = {"kubeconfig": tmp_path / "kubeconfig", "snapshot": tmp_path / "snap.json",
             "config": tmp_path / "topolabel.yaml"}
    paths["kubeconfig"].write_text(json.dumps(kubeconfig))
    paths["snapshot"].write_text(json.dumps(SNAPSHOT))
    paths["config"].write_text("apply: {retries: 2, concurrency: 3}\n")
    return {k: str(v) for k, v in paths.items()}


async def apply(cluster: dict[str, str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict, float]:
    """Run `topolabel apply` in a thread; return exit code, JSON report and seconds taken."""
    start = time.monotonic()
    code = await asyncio.to_thread(main, ["apply", "--snapshot", cluster["snapshot"], "--kubeconfig",
                                          cluster["kubeconfig"], "--config", cluster["config"], "-o", "json"])
    return code, json.loads(capsys.readouterr().out), time.monotonic() - start


def patches(mock: kmock.KubernetesEmulator, name: str) -> list[kmock.Request]:
    return list(mock[f"patch /api/v1/nodes/{name}"])


@pytest.mark.asyncio
async def test_429_waits_retry_after_then_succeeds(kmock: kmock.KubernetesEmulator, cluster, capsys) -> None:
    kmock["patch /api/v1/nodes/n1"][:2] << 429 << kmock.headers({"Retry-After": "1"}) << {
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "TooManyRequests", "code": 429}
    code, report, seconds = await apply(cluster, capsys)
    assert code == 0
    assert report["result"] == {"written": 3, "failed": {}, "retries": 2}
    assert len(patches(kmock, "n1")) == 3 and len(patches(kmock, "n2")) == 1
    assert seconds >= 2.0  # two waits of Retry-After: 1


@pytest.mark.asyncio
async def test_409_is_retried(kmock: kmock.KubernetesEmulator, cluster, capsys) -> None:
    kmock["patch /api/v1/nodes/n2"][:1] << 409 << {"kind": "Status", "reason": "Conflict", "code": 409}
    code, report, _ = await apply(cluster, capsys)
    assert code == 0 and report["result"]["retries"] == 1 and report["result"]["written"] == 3
    assert len(patches(kmock, "n2")) == 2


@pytest.mark.asyncio
async def test_persistent_500_fails_that_node_only(kmock: kmock.KubernetesEmulator, cluster, capsys) -> None:
    kmock["patch /api/v1/nodes/n3"] << 500 << {"kind": "Status", "message": "etcd is on fire", "code": 500}
    code, report, _ = await apply(cluster, capsys)
    assert code == 1
    assert report["result"]["written"] == 2
    assert report["result"]["failed"] == {"n3": "500 Internal Server Error: etcd is on fire"}
    assert len(patches(kmock, "n3")) == 3  # the first try and 2 retries (apply.retries in the config)


@pytest.mark.asyncio
async def test_403_is_not_retried(kmock: kmock.KubernetesEmulator, cluster, capsys) -> None:
    kmock["patch /api/v1/nodes/n1"] << 403 << {"kind": "Status", "message": "nodes is forbidden", "code": 403}
    code, report, _ = await apply(cluster, capsys)
    assert code == 1 and report["result"]["retries"] == 0
    assert report["result"]["failed"] == {"n1": "403 Forbidden: nodes is forbidden"}
    assert len(patches(kmock, "n1")) == 1


@pytest.mark.asyncio
async def test_patches_are_json_merge_patches_of_labels_only(kmock: kmock.KubernetesEmulator, cluster,
                                                              capsys) -> None:
    code, _, _ = await apply(cluster, capsys)
    assert code == 0
    sent = [req for name in NODES for req in patches(kmock, name)]
    assert len(sent) == 3
    assert {req.headers["Content-Type"] for req in sent} == {"application/merge-patch+json"}
    assert {json.dumps(req.data["metadata"]["labels"]) for req in sent} == {'{"topolabel.dev/block": "b1"}'}
    assert {tuple(req.data) for req in sent} == {("metadata",)}
