"""The Kubernetes edge: connect as kubectl does, list Nodes, patch one Node with retries.

Responses are read as raw JSON (`_preload_content=False`): listing 100,000 nodes through the typed models
costs minutes, and topolabel only needs a few fields.

Every call has a connect and a read timeout, and every response body a deadline: a silent server, a body
that drips a byte at a time and a PATCH nobody answers all end within the read timeout, as one
`KubeUnreachable` line. urllib3 retries nothing on its own; `call_with_retries` decides, and retries a
dropped connection, throttling, conflicts and server errors (timeouts and refusals only when patient: the
operator).
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from .errors import InputError, KubeUnreachable
from .nodes import Node, nodes_from_pages
from .timeouts import Timeouts

RETRYABLE = {409, 429, 500, 502, 503, 504}
MERGE_PATCH = "application/merge-patch+json"
MAX_RETRY_AFTER = 60.0  # a Retry-After longer than this (or negative, or not a number) is clamped


DEFAULT_KUBECONFIG = "~/.kube/config"


class TimedApiClient(client.ApiClient):
    """An ApiClient whose every call has `timeouts` (unless the caller gives its own), and whose transport
    failures are `KubeUnreachable` lines naming the server instead of urllib3 tracebacks."""

    timeouts = Timeouts()

    def call_api(self, method: str, url: str, header_params: Any = None, body: Any = None, post_params: Any = None,
                 _request_timeout: Any = None) -> Any:
        timeout = _request_timeout or (self.timeouts.connect, self.timeouts.read)
        try:
            return super().call_api(method, url, header_params, body, post_params, timeout)
        except urllib3.exceptions.HTTPError as exc:
            raise unreachable(exc, self.configuration.host, self.timeouts) from None


def unreachable(exc: Exception, host: str, timeouts: Timeouts) -> KubeUnreachable:
    """A urllib3 failure as one line: which server, and whether it timed out, refused or dropped."""
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        exc = exc.reason
    if isinstance(exc, urllib3.exceptions.NewConnectionError):  # before ConnectTimeoutError, its base class
        return KubeUnreachable(f"{host}: cannot connect: {str(exc).rsplit(': ', 1)[-1]}")
    if isinstance(exc, urllib3.exceptions.ConnectTimeoutError):
        return KubeUnreachable(f"{host}: no connection within {timeouts.connect:g}s")
    if isinstance(exc, urllib3.exceptions.ReadTimeoutError):
        return KubeUnreachable(f"{host}: no answer within {timeouts.read:g}s")
    if isinstance(exc, urllib3.exceptions.SSLError):
        return KubeUnreachable(f"{host}: TLS failed: {str(exc).splitlines()[0][:200]}")
    if isinstance(exc, urllib3.exceptions.ProtocolError):
        return KubeUnreachable(f"{host}: the connection was dropped", dropped=True)
    return KubeUnreachable(f"{host}: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")


def connect(kubeconfig: str | None = None, context: str | None = None, pool: int = 64,
            timeouts: Timeouts = Timeouts()) -> client.ApiClient:
    """An API client found in kubectl's order: `--kubeconfig`, then $KUBECONFIG, then ~/.kube/config; the
    in-cluster service account only when none of those exists (so a pod with a kubeconfig uses it).

    `pool` keep-alive connections: more than the patches in flight, so concurrent writes reuse connections
    instead of opening a TLS session each. Every call through it has `timeouts`.
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
    cfg.retries = False  # call_with_retries decides; urllib3 would retry a silent GET three more times
    api = TimedApiClient(cfg)
    api.timeouts = timeouts
    return api


def retry_delay(exc: ApiException | None, attempt: int) -> float:
    """Retry-After when the server gives a sane one (clamped to 0..60 s), else capped exponential backoff
    with jitter."""
    header = (exc.headers or {}).get("Retry-After") if exc is not None and exc.headers else None
    try:
        seconds = float(header) if header is not None else math.nan
    except ValueError:
        seconds = math.nan
    if math.isfinite(seconds):
        return min(max(seconds, 0.0), MAX_RETRY_AFTER)
    return min(0.2 * 2.0 ** attempt, 10.0) * (0.5 + random.random() / 2)


@dataclass
class CallStats:
    retries: int = 0


def call_with_retries(fn: Callable[[], Any], retries: int = 5, stats: CallStats | None = None,
                      sleep: Callable[[float], None] = time.sleep, patient: bool = False) -> Any:
    """Call `fn`, retrying on conflicts, throttling, server errors and dropped connections; `patient` (the
    operator) also retries timeouts and refused connections, which a CLI reports at once."""
    attempt = 0
    while True:
        try:
            return fn()
        except ApiException as exc:
            if exc.status not in RETRYABLE or attempt >= retries:
                raise
            delay = retry_delay(exc, attempt)
        except KubeUnreachable as exc:
            if not (exc.dropped or patient) or attempt >= retries:
                raise
            delay = retry_delay(None, attempt)
        if stats is not None:
            stats.retries += 1
        sleep(delay)
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
    text = read_body(api, resp.response, _read_seconds(timeout)).decode(errors="replace")
    if not 200 <= resp.status <= 299:
        raise ApiException.from_response(http_resp=resp, body=text, data=None)
    try:
        return json.loads(text) if text else None
    except ValueError:
        raise KubeUnreachable(f"{api.configuration.host}: answered {path} with something that is not JSON") from None


def _read_seconds(timeout: float | tuple[float, float] | None) -> float | None:
    """The read part of a request timeout (None: the client's own)."""
    return timeout[1] if isinstance(timeout, tuple) else timeout


def read_body(api: client.ApiClient, resp: Any, seconds: float | None = None) -> bytes:
    """A `_preload_content=False` response's whole body, within the read timeout (or `seconds`) however
    slowly it drips."""
    timeouts = getattr(api, "timeouts", Timeouts())
    if seconds is not None:
        timeouts = Timeouts(timeouts.connect, seconds)
    deadline = time.monotonic() + timeouts.read
    chunks = []
    try:
        while chunk := resp.read1(1 << 16):
            chunks.append(chunk)
            if time.monotonic() > deadline:
                resp.close()  # never back into the pool: the rest of the body is still coming
                raise KubeUnreachable(f"{api.configuration.host}: the answer took longer than {timeouts.read:g}s")
    except urllib3.exceptions.HTTPError as exc:
        resp.close()
        raise unreachable(exc, api.configuration.host, timeouts) from None
    resp.release_conn()
    return b"".join(chunks)


def raw_json(api: client.ApiClient, resp: Any) -> Any:
    """The decoded body of a `_preload_content=False` response; an answer that is not JSON is one line."""
    body = read_body(api, resp)
    try:
        return json.loads(body)
    except ValueError:
        kind = (resp.headers or {}).get("Content-Type", "no content type")
        raise KubeUnreachable(f"{api.configuration.host}: answered with something that is not JSON ({kind}); "
                              "is it a Kubernetes API server?") from None


def list_nodes(api: client.ApiClient, page: int = 500) -> list[Node]:
    """Every Node, read in pages so a large cluster does not load the API server with one huge list; each
    page becomes compact records before the next is read, so the raw objects of one page at most are held."""
    core = client.CoreV1Api(api)
    return nodes_from_pages(pages(lambda token: raw_json(api, core.list_node(limit=page, _continue=token,
                                                                             _preload_content=False))), "cluster")


def patch_node(api: client.ApiClient, name: str, body: dict[str, Any], dry_run: bool = False,
               field_manager: str | None = None) -> None:
    """One JSON merge patch on one Node (labels and annotations only, never the whole object).

    The response body is read (not parsed) so its connection goes back to the pool for the next patch."""
    resp = client.CoreV1Api(api).patch_node(name, body, dry_run="All" if dry_run else None, field_manager=field_manager,
                                            _content_type=MERGE_PATCH, _preload_content=False)
    read_body(api, resp)


def api_error(exc: ApiException) -> str:
    """A one-line reason from an API error, without echoing request bodies or credentials."""
    try:
        message = json.loads(exc.body or "{}").get("message")
    except (ValueError, AttributeError):
        message = None
    return f"{exc.status} {exc.reason or ''}".strip() + (f": {message}" if message else "")
