"""A blob as ConfigMap shards (labeler.cluster.shards) on the real API server: each shard under the server's 1 MiB
limit, read back byte for byte, old shards deleted, readers never given a mix, stale writers refused."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from labeler.cluster.kube import request_json
from labeler.errors import SourceError
from labeler.cluster.shards import (MAX_SHARDS, SHARD_BYTES, SHARD_OF, ShardGone, publish, read_blob, read_manifest,
                            read_published, touch)
from testkit.ibcluster import name, scratch_api  # noqa: F401 (fixtures)
from testkit.kubecluster import kube_cluster  # noqa: F401

pytestmark = pytest.mark.slow
NS = "topolabel-shards-test"
LABELS = {"app.kubernetes.io/managed-by": "topolabel"}


@pytest.fixture
def api(scratch_api: Any) -> Any:
    return scratch_api


def shard_names(api: Any, name: str) -> set[str]:
    found = request_json(api, "GET", f"/api/v1/namespaces/{NS}/configmaps", query=[("labelSelector", f"{SHARD_OF}={name}")])
    return {item["metadata"]["name"] for item in found["items"]}


def test_a_large_blob_round_trips_in_shards_under_the_limit(api: Any, name: str) -> None:
    blob = os.urandom(2 * SHARD_BYTES + 12345)  # incompressible, so the shards are full
    manifest = publish(api, NS, name, blob, {"fabric": "compute", "sha256": "not mine"}, LABELS, None)
    assert len(manifest.shards) == 3 and shard_names(api, name) == set(manifest.shards)
    for shard in manifest.shards:  # the server took each shard as one ConfigMap of at most 1 MiB
        obj = request_json(api, "GET", f"/api/v1/namespaces/{NS}/configmaps/{shard}")
        assert len(json.dumps(obj["binaryData"])) < 1.4 * 2**20  # base64 on the wire, raw in etcd
    read = read_manifest(api, NS, name)
    assert read is not None and read.info == {"fabric": "compute"} and read.size == len(blob)  # reserved keys kept
    assert read.labels == LABELS and read_blob(api, NS, read) == blob


def test_republishing_replaces_the_shards_and_a_reader_never_gets_a_mix(api: Any, name: str) -> None:
    first = publish(api, NS, name, b"a" * 10, {}, LABELS, None)
    old = read_manifest(api, NS, name)
    assert old is not None
    second = publish(api, NS, name, b"b" * 10, {}, LABELS, old)
    assert shard_names(api, name) == set(second.shards) and not set(first.shards) & set(second.shards)
    with pytest.raises(ShardGone):  # a reader holding the old manifest finds its shards gone ...
        read_blob(api, NS, old)
    found = read_published(api, NS, name)  # ... and reading afresh gives the new blob
    assert found is not None and found[1] == b"b" * 10


def test_a_writer_with_a_stale_manifest_is_refused_and_leaves_nothing(api: Any, name: str) -> None:
    publish(api, NS, name, b"one", {}, LABELS, None)
    stale = read_manifest(api, NS, name)
    assert stale is not None
    current = publish(api, NS, name, b"two", {}, LABELS, stale)
    with pytest.raises(ApiException) as refused:
        publish(api, NS, name, b"three", {}, LABELS, stale)
    assert refused.value.status == 409
    assert shard_names(api, name) == set(current.shards)  # the refused writer's shards are gone again
    with pytest.raises(ApiException) as created:
        publish(api, NS, name, b"four", {}, LABELS, None)  # "create" over an existing manifest
    assert created.value.status == 409


def test_touch_updates_the_publishers_keys_only(api: Any, name: str) -> None:
    manifest = publish(api, NS, name, b"x", {"checkedAt": "2026-01-01T00:00:00Z"}, LABELS, None)
    touched = touch(api, NS, manifest, {"checkedAt": "2026-01-01T00:05:00Z", "sha256": "ignored"})
    assert touched.info == {"checkedAt": "2026-01-01T00:05:00Z"} and touched.sha256 == manifest.sha256
    with pytest.raises(ApiException) as stale:
        touch(api, NS, manifest, {"checkedAt": "2026-01-01T00:10:00Z"})  # resourceVersion of the first read
    assert stale.value.status == 409


def test_too_large_a_blob_is_refused_before_writing(api: Any, name: str) -> None:
    with pytest.raises(SourceError, match=f"more than {MAX_SHARDS}"):
        publish(api, NS, name, b"\0" * (MAX_SHARDS * SHARD_BYTES + 1), {}, LABELS, None)
    assert read_manifest(api, NS, name) is None and shard_names(api, name) == set()
