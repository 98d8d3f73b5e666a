"""kmock's Kubernetes emulator in a background thread, for fast operator tests with fault injection.

kmock (by kopf's author) keeps objects in memory and serves discovery, list, watch, create, merge patch
and delete over real HTTP on 127.0.0.1 (a free port). It differs from a real API server in ways the tests
allow for: no label selectors or paging, no resourceVersion, server-side apply is a plain merge (a patch
to a missing object is a 404), a PUT (which kmock does not serve; `Emulator` adds it) is a merge of the body
too, and a fault injected into a write still changes the stored object.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import aiohttp.web
import kmock
import yaml

# plural -> (kind, namespaced) of the kinds the operator uses beyond kmock's bundled built-ins
KUEUE = {"topologies": ("Topology", False), "resourceflavors": ("ResourceFlavor", False),
         "clusterqueues": ("ClusterQueue", False), "localqueues": ("LocalQueue", True),
         "workloads": ("Workload", True), "cohorts": ("Cohort", False)}
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


class Emulator(kmock.KubernetesEmulator):
    """kmock's emulator with PUT on a named object (labeler.cluster.lease writes Leases with it), merged like a patch."""

    async def _handle(self, request: Any) -> Any:
        if str(getattr(request.method, "value", request.method)).upper() != "PUT" or request.name is None:
            return await super()._handle(request)
        key = (request.resource, request.namespace, request.name)
        async with self._lock:
            if key not in self._objects or self._objects[key].deleted:
                return aiohttp.web.json_response({"kind": "Status", "code": 404, "reason": "NotFound"}, status=404)
            self._objects[key].patch(request.data)
            raw = self._objects[key].raw
            await self._buses[request.resource].put({"type": "MODIFIED", "object": raw})
        return aiohttp.web.json_response(raw)


@dataclass(frozen=True)
class Seen:
    """One request kmock received."""

    method: str
    path: str
    data: Any
    agent: str

    @property
    def by_test(self) -> bool:
        return self.agent.startswith("Python-urllib")


class MockCluster:
    """Start with `with MockCluster() as cluster:`; `cluster.kubeconfig(dir)` points a client at it."""

    def __init__(self, kueue: bool = True, labeler_crd: bool = True, cohorts: bool = True) -> None:
        self.kueue = kueue
        self.cohorts = cohorts
        self.labeler_crd = labeler_crd
        self.url = ""
        self.handler: Any = None
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Future[None] | None = None
        self._thread = threading.Thread(target=self._serve, name="kmock", daemon=True)
        self._error: BaseException | None = None

    def __enter__(self) -> "MockCluster":
        self._thread.start()
        self._ready.wait(30)
        if self._error or not self.url:
            raise RuntimeError(f"kmock did not start: {self._error}")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set_result, None)
        self._thread.join(30)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._main())
        except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
        self.handler = Emulator()
        self.handler.resources.load_bundled()
        if self.kueue:
            for plural, (kind, namespaced) in KUEUE.items():
                if plural == "cohorts" and not self.cohorts:
                    continue  # as Kueue before v1beta2's Cohort
                self.handler.resources[f"kueue.x-k8s.io/v1beta2/{plural}"] = {
                    "kind": kind, "namespaced": namespaced, "verbs": VERBS}
        if self.labeler_crd:
            self.handler.resources["topolabel.dev/v1alpha1/topologylabelers"] = {
                "kind": "TopologyLabeler", "namespaced": False, "verbs": VERBS, "subresources": ["status"]}
        self._stop = self._loop.create_future()
        async with self.handler, kmock.Server(self.handler) as server:
            self.url = str(server.url).rstrip("/")
            self._ready.set()
            await self._stop

    def in_loop(self, fn: Callable[[Any], Any]) -> Any:
        """Run `fn(handler)` on kmock's loop (its state is not thread-safe) and return the result."""

        async def call() -> Any:
            return fn(self.handler)

        return asyncio.run_coroutine_threadsafe(call(), self._loop).result(30)

    def kubeconfig(self, directory: Path) -> Path:
        path = directory / "kmock.kubeconfig"
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "kmock",
            "clusters": [{"name": "kmock", "cluster": {"server": self.url}}],
            "users": [{"name": "kmock", "user": {}}],
            "contexts": [{"name": "kmock", "context": {"cluster": "kmock", "user": "kmock"}}]}))
        return path

    # --- driving it over HTTP, as any client would (so watchers see the changes) ---

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/merge-patch+json"
                                              if method == "PATCH" else "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            text = resp.read()
        return json.loads(text) if text else None

    def create_nodes(self, nodes: Iterable[dict[str, Any]]) -> None:
        for node in nodes:
            self.call("POST", "/api/v1/nodes", node)

    def delete_node(self, name: str) -> None:
        self.call("DELETE", f"/api/v1/nodes/{name}")

    def patch_node(self, name: str, body: dict[str, Any]) -> None:
        self.call("PATCH", f"/api/v1/nodes/{name}", body)

    def get(self, path: str) -> Any:
        try:
            return self.call("GET", path)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def items(self, path: str) -> list[dict[str, Any]]:
        return (self.call("GET", path) or {}).get("items") or []

    def node_labels(self) -> dict[str, dict[str, str]]:
        return {n["metadata"]["name"]: dict(n["metadata"].get("labels") or {}) for n in self.items("/api/v1/nodes")}

    # --- what the operator sent ---

    def seen(self) -> list[Seen]:
        return self.in_loop(lambda h: [Seen(str(getattr(r.method, "value", r.method)).upper(), r.url.path, r.data, r.headers.get("User-Agent", ""))
                                       for r in list(h)])

    def writes(self, since: int = 0) -> list[Seen]:
        """Every request the operator made after the first `since` that changes something (Events too)."""
        return [s for s in self.seen()[since:] if s.method in ("POST", "PATCH", "PUT", "DELETE") and not s.by_test]
