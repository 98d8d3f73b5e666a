"""A blob published through the API as ConfigMaps: binaryData shards under the 1 MiB object limit, and a
small manifest ConfigMap that names them with the blob's SHA-256.

For data larger than an annotation that one writer produces and others poll (the InfiniBand collector's
fabric). Shard names carry the hash, so a reader that finds every shard the manifest names has exactly
the blob the manifest describes. A publication writes the new shards first, then points the manifest at
them (an update carrying the resourceVersion it read, so two writers cannot silently overwrite each
other), then deletes the old shards; a reader that meets a shard deleted under it reads the manifest
again. A writer killed between those steps can leave unreferenced shards behind; they carry the label
`topolabel.dev/shard-of=<manifest>`.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from typing import Any, Mapping

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ..errors import SourceError
from .kube import MERGE_PATCH, request_json

SHARD_BYTES = 1_000_000  # raw bytes per shard; the API server refuses a ConfigMap over 1 MiB (1,048,576)
MAX_SHARDS = 16
KEY = "blob"  # the binaryData key of each shard
SHARD_OF = "topolabel.dev/shard-of"
RESERVED = ("sha256", "shards", "size")  # manifest data keys the store owns; the rest is the publisher's
TIMEOUT = 30.0


class ShardGone(SourceError):
    """A shard the manifest names is missing or does not match: a newer publication replaced it meanwhile."""


@dataclass(frozen=True)
class Manifest:
    name: str
    sha256: str
    shards: tuple[str, ...]
    size: int
    info: dict[str, str] = field(default_factory=dict)  # the publisher's own keys
    labels: dict[str, str] = field(default_factory=dict)
    resource_version: str = ""

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> "Manifest":
        meta = obj.get("metadata") or {}
        try:
            data = dict(obj.get("data") or {})
            return cls(meta["name"], data["sha256"], tuple(s for s in data["shards"].split(",") if s),
                       int(data["size"]), {k: v for k, v in data.items() if k not in RESERVED},
                       dict(meta.get("labels") or {}), meta.get("resourceVersion", ""))
        except (KeyError, ValueError, AttributeError, TypeError) as exc:
            raise SourceError(f"ConfigMap {str(meta.get('name'))[:253]}: not a shard manifest "
                              f"({type(exc).__name__}: {str(exc)[:100]})") from None


def _path(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps" + (f"/{name}" if name else "")


def read_manifest(api: client.ApiClient, namespace: str, name: str) -> Manifest | None:
    try:
        return Manifest.from_object(request_json(api, "GET", _path(namespace, name), timeout=TIMEOUT))
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def list_manifests(api: client.ApiClient, namespace: str, label_selector: str) -> list[Manifest]:
    """Manifests with these labels (shards carry their manifest's labels too, and are left out)."""
    selector = f"{label_selector},!{SHARD_OF}"
    found = request_json(api, "GET", _path(namespace), query=[("labelSelector", selector)], timeout=TIMEOUT)
    return [Manifest.from_object(obj) for obj in found.get("items") or []]


def read_blob(api: client.ApiClient, namespace: str, manifest: Manifest) -> bytes:
    """The blob the manifest names, checked against its hash; `ShardGone` when a shard was replaced."""
    parts = []
    for name in manifest.shards:
        try:
            obj = request_json(api, "GET", _path(namespace, name), timeout=TIMEOUT)
        except ApiException as exc:
            if exc.status == 404:
                raise ShardGone(f"ConfigMap {namespace}/{name}: gone (republished meanwhile)") from None
            raise
        try:
            parts.append(base64.b64decode((obj.get("binaryData") or {}).get(KEY, ""), validate=True))
        except (ValueError, TypeError, AttributeError):
            raise ShardGone(f"ConfigMap {namespace}/{name}: not a shard (no base64 {KEY})") from None
    blob = b"".join(parts)
    if hashlib.sha256(blob).hexdigest() != manifest.sha256:
        raise ShardGone(f"ConfigMap {namespace}/{manifest.name}: shards do not match its sha256 (republished meanwhile?)")
    return blob


def read_published(api: client.ApiClient, namespace: str, name: str, attempts: int = 3) -> tuple[Manifest, bytes] | None:
    """The manifest and its blob, read again when a publication replaced the shards under the reader."""
    for attempt in range(attempts):
        manifest = read_manifest(api, namespace, name)
        if manifest is None:
            return None
        try:
            return manifest, read_blob(api, namespace, manifest)
        except ShardGone:
            if attempt == attempts - 1:
                raise
    return None


def publish(api: client.ApiClient, namespace: str, name: str, blob: bytes, info: Mapping[str, str],
            labels: Mapping[str, str], previous: Manifest | None) -> Manifest:
    """Write `blob` as shards and point the manifest at them; `previous` is the manifest as read (None: none).

    A manifest changed or created by someone else since `previous` was read makes this an `ApiException`
    409; the new shards are then deleted again.
    """
    digest = hashlib.sha256(blob).hexdigest()
    pieces = [blob[i:i + SHARD_BYTES] for i in range(0, len(blob), SHARD_BYTES)] or [b""]
    if len(pieces) > MAX_SHARDS:
        raise SourceError(f"{name}: {len(blob):,} bytes need {len(pieces)} shards, more than {MAX_SHARDS}")
    names = [f"{name}-{digest[:12]}-{i}" for i in range(len(pieces))]
    for shard, piece in zip(names, pieces):
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": shard, "namespace": namespace, "labels": {**labels, SHARD_OF: name}},
                "binaryData": {KEY: base64.b64encode(piece).decode()}}
        try:
            request_json(api, "POST", _path(namespace), body=body, timeout=TIMEOUT)
        except ApiException as exc:
            if exc.status != 409:  # already there: the same content, from an interrupted publication
                raise
    data = {**{k: v for k, v in info.items() if k not in RESERVED},
            "sha256": digest, "shards": ",".join(names), "size": str(len(blob))}
    metadata = {"name": name, "namespace": namespace, "labels": dict(labels)}
    manifest: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}
    try:
        if previous is None:
            written = request_json(api, "POST", _path(namespace), body=manifest, timeout=TIMEOUT)
        else:
            manifest["metadata"]["resourceVersion"] = previous.resource_version
            written = request_json(api, "PUT", _path(namespace, name), body=manifest, timeout=TIMEOUT)
    except ApiException:
        _delete(api, namespace, [n for n in names if previous is None or n not in previous.shards])
        raise
    if previous is not None:
        _delete(api, namespace, [n for n in previous.shards if n not in names])
    return Manifest.from_object(written)


def touch(api: client.ApiClient, namespace: str, manifest: Manifest, info: Mapping[str, str]) -> Manifest:
    """Update the publisher's keys alone (a heartbeat), only if the manifest is still the one read."""
    body = {"metadata": {"resourceVersion": manifest.resource_version},
            "data": {k: v for k, v in info.items() if k not in RESERVED}}
    written = request_json(api, "PATCH", _path(namespace, manifest.name), body=body, content_type=MERGE_PATCH,
                           timeout=TIMEOUT)
    return Manifest.from_object(written)


def _delete(api: client.ApiClient, namespace: str, names: list[str]) -> None:
    for name in names:
        try:
            request_json(api, "DELETE", _path(namespace, name), timeout=TIMEOUT)
        except ApiException as exc:
            if exc.status != 404:
                raise
