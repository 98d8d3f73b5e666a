"""The Kubernetes edge: connect as kubectl does, list Nodes, patch one Node with retries.

Responses are read as raw JSON (`_preload_content=False`): listing 100,000 nodes through the typed models
costs minutes, and topolabel only needs a few fields.
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from .errors import InputError
from .nodes import Node, nodes_from_pages

RETRYABLE = {409, 429, 500, 502, 503, 504}
MERGE_PATCH = "application/merge-patch+json"
DEFAULT_KUBECONFIG = "~/.kube/config"


def connect(kubeconfig: str | None = None, context: str | None = None, pool: int = 64) -> client.ApiClient:
    """An API client found in kubectl's order: `--kubeconfig`, then $KUBECONFIG, then ~/.kube/config; the
    in-cluster service account only when none of those exists (so a pod with a kubeconfig uses it).

    `pool` keep-alive connections: more than the patches in flight, so concurrent writes reuse connections
    instead of opening a TLS session each.
    """
    cfg = client.Configuration()
    files = kubeconfig or os.environ.get("KUBECONFIG")  # $KUBECONFIG may list several, as for kubectl
    where = files or DEFAULT_KUBECONFIG
    try:
        if files or context or Path(DEFAULT_KUBECONFIG).expanduser().exists():
            config.load_kube_config(config_file=files or DEFAULT_KUBECONFIG, context=context,
                                    client_configuration=cfg)
        else:
            where = "the in-cluster service account"
            config.load_incluster_config(client_configuration=cfg)
    except (ConfigException, OSError) as exc:
        raise InputError(f"{where}: cannot connect to a cluster: {exc}") from None
    cfg.connection_pool_maxsize = max(pool, cfg.connection_pool_maxsize or 0)
    return client.ApiClient(cfg)


def retry_delay(exc: ApiException, attempt: int) -> float:
    """Retry-After when the server gives it, else capped exponential backoff with jitter."""
    header = (exc.headers or {}).get("Retry-After") if exc.headers else None
    try:
        if header is not None:
            return min(float(header), 60.0)
    except ValueError:
        pass
    return min(0.2 * 2 ** attempt, 10.0) * (0.5 + random.random() / 2)


@dataclass
class CallStats:
    retries: int = 0


def call_with_retries(fn: Callable[[], Any], retries: int = 5, stats: CallStats | None = None,
                      sleep: Callable[[float], None] = time.sleep) -> Any:
    """Call `fn`, retrying on conflicts, throttling and server errors."""
    attempt = 0
    while True:
        try:
            return fn()
        except ApiException as exc:
            if exc.status not in RETRYABLE or attempt >= retries:
                raise
            if stats is not None:
                stats.retries += 1
            sleep(retry_delay(exc, attempt))
            attempt += 1


def pages(fetch: Callable[[str | None], Any],
          call: Callable[[Callable[[], Any]], Any] = call_with_retries) -> Iterator[list[Any]]:
    """The items of a paged list, page by page. `fetch(token)` reads one page (decoded JSON); `call` retries
    each page on its own, so one failed page is asked again instead of restarting the list from page 1."""
    token = None
    while True:
        data = call(lambda: fetch(token))
        yield data.get("items") or []
        token = (data.get("metadata") or {}).get("continue")
        if not token:
            return


def list_pages(fetch: Callable[[str | None], Any],
               call: Callable[[Callable[[], Any]], Any] = call_with_retries) -> list[Any]:
    """Every item of a paged list (see `pages`)."""
    return [item for page in pages(fetch, call) for item in page]


def request_json(api: client.ApiClient, method: str, path: str, *, body: Any = None,
                 query: Iterable[tuple[str, str]] = (), content_type: str = "application/json",
                 timeout: float | tuple[float, float] | None = None) -> Any:
    """One call to any API path; the decoded JSON answer, or `ApiException` for a non-2xx status.

    The typed clients need a method per kind and validate bodies against their models; a path and a dict
    reach every kind (Leases, ConfigMaps, custom resources) the same way."""
    req = api.param_serialize(method, path, query_params=list(query),
                              header_params={"Content-Type": content_type, "Accept": "application/json"},
                              body=body, auth_settings=["BearerToken"])
    resp = api.call_api(*req, _request_timeout=timeout)
    resp.read()
    text = resp.data.decode() if resp.data else ""
    if not 200 <= resp.status <= 299:
        raise ApiException.from_response(http_resp=resp, body=text, data=None)
    return json.loads(text) if text else None


def raw_json(resp: Any) -> Any:
    """The decoded body of a `_preload_content=False` response."""
    return json.loads(resp.data)


def list_nodes(api: client.ApiClient, page: int = 500) -> list[Node]:
    """Every Node, read in pages so a large cluster does not load the API server with one huge list; each
    page becomes compact records before the next is read, so the raw objects of one page at most are held."""
    core = client.CoreV1Api(api)
    return nodes_from_pages(pages(lambda token: raw_json(core.list_node(limit=page, _continue=token,
                                                                        _preload_content=False))), "cluster")


def patch_node(api: client.ApiClient, name: str, body: dict[str, Any], dry_run: bool = False) -> None:
    """One JSON merge patch on one Node (labels and annotations only, never the whole object).

    The response body is drained (not parsed) so its connection goes back to the pool for the next patch."""
    resp = client.CoreV1Api(api).patch_node(name, body, dry_run="All" if dry_run else None,
                                            _content_type=MERGE_PATCH, _preload_content=False)
    resp.drain_conn()
    resp.release_conn()


def api_error(exc: ApiException) -> str:
    """A one-line reason from an API error, without echoing request bodies or credentials."""
    try:
        message = json.loads(exc.body or "{}").get("message")
    except (ValueError, AttributeError):
        message = None
    return f"{exc.status} {exc.reason or ''}".strip() + (f": {message}" if message else "")
