"""Raw JSON calls to the API server for any resource path, with retries and one metric per call.

The typed clients need a method per kind and scope; the operator touches Kueue kinds, its own resource,
Events and Nodes, so one path-based call keeps that uniform. Nodes go through `labeler.cluster.kube` like the CLI.

Calls are counted by Kubernetes verb, the words RBAC and the audit log use, not by HTTP method: `get`,
`list`, `create`, `patch` (a merge patch), `apply` (a server-side apply, an HTTP PATCH too) and `delete`.
(`watch` is kopf's, and not counted here.)
"""

from __future__ import annotations

import builtins
import time
from typing import Any, Callable, Iterable, Iterator

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from labeler.cluster.kube import MERGE_PATCH, call_with_retries, page_of, pages, patch_node, request_json
from labeler.errors import KubeUnreachable
from labeler.io.nodes import Node, nodes_from_pages

from .metrics import Metrics

APPLY_PATCH = "application/apply-patch+yaml"
HTTP_METHOD = {"get": "GET", "list": "GET", "create": "POST", "patch": "PATCH", "apply": "PATCH", "delete": "DELETE"}
FIELD_MANAGER = "topolabel"


class Kube:
    """The operator's API calls: counted, retried patiently (timeouts and refusals too), and watched for
    health: `failing_since` is when calls began to fail with no success since (None while they succeed)."""

    def __init__(self, api: client.ApiClient, metrics: Metrics, retries: int = 5,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.api = api
        self.metrics = metrics
        self.retries = retries
        self.clock = clock
        self.failing_since: float | None = None

    def _count(self, verb: str, resource: str, code: int | str) -> None:
        self.metrics.api_calls.labels(verb=verb, resource=resource, code=str(code)).inc()
        if code == 200:
            self.failing_since = None
        elif (code == "error" or int(code) >= 500) and self.failing_since is None:
            self.failing_since = self.clock()

    def counted(self, verb: str, resource: str, fn: Any, retries: int | None = None) -> Any:
        """Run one call (retried, `retries` times when given), counting every attempt with its outcome."""

        def attempt() -> Any:
            try:
                out = fn()
            except ApiException as exc:
                self._count(verb, resource, exc.status or "error")
                raise
            except KubeUnreachable:
                self._count(verb, resource, "error")
                raise
            self._count(verb, resource, 200)
            return out

        return call_with_retries(attempt, self.retries if retries is None else retries, patient=True)

    def request(self, verb: str, path: str, *, body: Any = None, query: Iterable[tuple[str, str]] = (),
                content_type: str = "application/json", retries: int | None = None) -> Any:
        """One call (`verb` is the Kubernetes verb, counted in the metric); the decoded JSON answer, or
        ApiException for a non-2xx status."""
        return self.counted(verb, _resource_of(path),
                            lambda: request_json(self.api, HTTP_METHOD[verb], path, body=body, query=query,
                                                 content_type=content_type), retries)

    def get(self, path: str) -> dict[str, Any] | None:
        try:
            return self.request("get", path)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def pages(self, path: str, label_selector: str | None = None, page: int = 500,
              field_selector: str | None = None) -> Iterator[list[dict[str, Any]]]:
        """The items, page by page; each page is one counted, retried request."""
        query = [("limit", str(page))] + ([("labelSelector", label_selector)] if label_selector else [])
        query += [("fieldSelector", field_selector)] if field_selector else []
        return pages(lambda token: page_of(self.request("list", path, query=query + ([("continue", token)] if token else [])),
                                           path),
                     call=lambda fetch: fetch(), origin=self.api.configuration.host)  # request() retries each page

    def list(self, path: str, label_selector: str | None = None, field_selector: str | None = None
             ) -> list[dict[str, Any]]:
        """Every item of every page."""
        return [item for items in self.pages(path, label_selector, field_selector=field_selector) for item in items]

    def create(self, path: str, obj: dict[str, Any]) -> Any:
        return self.request("create", path, body=obj, query=[("fieldManager", FIELD_MANAGER)])

    def apply(self, path: str, obj: dict[str, Any]) -> Any:
        """Server-side apply as `topolabel`; where the server answers 404 for a missing object, create it."""
        try:
            return self.request("apply", path, body=obj, content_type=APPLY_PATCH,
                                query=[("fieldManager", FIELD_MANAGER), ("force", "true")])
        except ApiException as exc:
            if exc.status != 404:
                raise
        return self.create(path.rsplit("/", 1)[0], obj)

    def merge_patch(self, path: str, body: dict[str, Any]) -> Any:
        return self.request("patch", path, body=body, content_type=MERGE_PATCH)

    def delete(self, path: str) -> Any:
        """Delete; an object that is already gone counts as deleted."""
        try:
            return self.request("delete", path)
        except ApiException as exc:
            if exc.status != 404:
                raise
        return None

    def list_nodes(self) -> builtins.list[Node]:  # `list` here is the method above
        return nodes_from_pages(self.pages("/api/v1/nodes"), "cluster")

    def patch_node(self, name: str, body: dict[str, Any]) -> None:
        """One label patch; `labeler.cluster.apply` retries it, so this counts the attempt and re-raises."""
        try:
            patch_node(self.api, name, body)
        except ApiException as exc:
            self._count("patch", "nodes", exc.status or "error")
            raise
        except KubeUnreachable:
            self._count("patch", "nodes", "error")
            raise
        self._count("patch", "nodes", 200)
        self.metrics.node_writes.inc()


def _resource_of(path: str) -> str:
    """`/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/localqueues/q` -> `localqueues` (for the metric label)."""
    parts = [p for p in path.split("/") if p]
    parts = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if parts[:1] == ["namespaces"] and len(parts) > 2:
        parts = parts[2:]
    return parts[0] if parts else "discovery"
