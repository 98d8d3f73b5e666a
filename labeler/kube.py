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
import random
import time
from dataclasses import dataclass
from typing import Any, Callable

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from .errors import InputError, KubeUnreachable
from .nodes import Node, parse_nodes

RETRYABLE = {409, 429, 500, 502, 503, 504}
MERGE_PATCH = "application/merge-patch+json"
MAX_RETRY_AFTER = 60.0  # a Retry-After longer than this (or negative, or not a number) is clamped


@dataclass(frozen=True)
class Timeouts:
    """Seconds to wait for a connection, and for each answer: `read` bounds every wait for the server and
    reading a whole response body."""

    connect: float = 10.0
    read: float = 20.0


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
    """An API client from a kubeconfig (flag, $KUBECONFIG, ~/.kube/config) or the in-cluster account.

    `pool` keep-alive connections: more than the patches in flight, so concurrent writes reuse connections
    instead of opening a TLS session each. Every call through it has `timeouts`.
    """
    cfg = client.Configuration()
    try:
        if kubeconfig or context:
            config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
        else:
            try:
                config.load_incluster_config(client_configuration=cfg)
            except ConfigException:
                config.load_kube_config(client_configuration=cfg)
    except (ConfigException, OSError) as exc:
        where = kubeconfig or "the default kubeconfig"
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
    return min(0.2 * 2 ** attempt, 10.0) * (0.5 + random.random() / 2)


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


def list_pages(fetch: Callable[[str | None], Any],
               call: Callable[[Callable[[], Any]], Any] = call_with_retries) -> list[Any]:
    """Every item of a paged list. `fetch(token)` reads one page (decoded JSON); `call` retries each page on
    its own, so one failed page is asked again instead of restarting the list from the first page."""
    items: list[Any] = []
    token = None
    while True:
        data = call(lambda: fetch(token))
        items.extend(data.get("items") or [])
        token = (data.get("metadata") or {}).get("continue")
        if not token:
            return items


def read_body(api: client.ApiClient, resp: Any) -> bytes:
    """A `_preload_content=False` response's whole body, within the read timeout however slowly it drips."""
    timeouts = getattr(api, "timeouts", Timeouts())
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
    """Every Node, read in pages so a large cluster does not load the API server with one huge list."""
    core = client.CoreV1Api(api)
    items = list_pages(lambda token: raw_json(api, core.list_node(limit=page, _continue=token, _preload_content=False)))
    return parse_nodes(items, "cluster")


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
