"""The Kubernetes edge: connect as kubectl does, list Nodes, patch one Node with retries.

Responses are read as raw JSON (`_preload_content=False`): listing 100,000 nodes through the typed models
costs minutes, and topolabel only needs a few fields.

The API server is untrusted input like any file. Every exchange has deadlines: connecting within the connect
timeout, the whole answer, headers and body, within the read timeout (`labeler.cluster.deadline`): a silent server,
headers or a body dripped a byte at a time and a PATCH nobody answers all end in time, as one `KubeUnreachable`
line. An answer is at most MAX_ANSWER bytes, decoded strictly (UTF-8, no lone surrogates, no NaN, no
number past 64 bits, nested at most MAX_DEPTH deep) and must have the API's shape (an object; a list's
`items` a list, its `continue` a string); a list ends within MAX_PAGES pages and never sends the same
continue token twice. urllib3 retries nothing on its own; `call_with_retries` decides, and retries a
dropped connection, throttling, conflicts and server errors (timeouts and refusals only when patient: the
operator), within a budget: the CLI's retries end within its request timeout, whatever Retry-After says.
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

import msgspec
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from ..errors import InputError, KubeUnreachable
from ..io.documents import MAX_DEPTH, kind_of
from ..io.nodes import ALL, Keep, Node, NodeReader, nodes_from_pages
from . import deadline
from .kubeconfig import read_kubeconfig, resolve_exec
from .timeouts import Timeouts

RETRYABLE = {409, 429, 500, 502, 503, 504}
MERGE_PATCH = "application/merge-patch+json"
MAX_RETRY_AFTER = 60.0  # a Retry-After longer than this (or negative, or not a number) is clamped
MAX_ANSWER = 128 << 20  # bytes of one answer; a page of 500 nodes with full status is about 2 MB
MAX_PAGES = 5_000  # pages of one list: 2.5 million nodes at 500 a page


DEFAULT_KUBECONFIG = "~/.kube/config"


class TimedApiClient(client.ApiClient):
    """An ApiClient whose every call has `timeouts` (unless the caller gives its own), and whose transport
    failures are `KubeUnreachable` lines naming the server instead of urllib3 tracebacks."""

    timeouts = Timeouts()

    def __init__(self, configuration: client.Configuration) -> None:
        super().__init__(configuration)
        deadline.install(self.rest_client.pool_manager)

    def call_api(self, method: str, url: str, header_params: Any = None, body: Any = None, post_params: Any = None,
                 _request_timeout: Any = None) -> Any:
        """The call, connected within its connect timeout and answered whole (headers and body, however it is
        read) within its read timeout; a single number bounds both."""
        timeout = _request_timeout or (self.timeouts.connect, self.timeouts.read)
        try:
            with deadline.exchange(*(timeout if isinstance(timeout, tuple) else (timeout, timeout))):
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
    in-cluster service account only when none of those exists (so a pod with a kubeconfig uses it). The
    kubeconfig is read like any document (`labeler.cluster.kubeconfig`: bounded, checked, its exec plugin under a
    timeout) and handed to the client as data.

    `pool` keep-alive connections: more than the patches in flight, so concurrent writes reuse connections
    instead of opening a TLS session each. Every call through it has `timeouts`.
    """
    cfg = client.Configuration()
    files = kubeconfig or os.environ.get("KUBECONFIG")  # $KUBECONFIG may list several, as for kubectl
    where = files or DEFAULT_KUBECONFIG
    try:
        if files or context or Path(DEFAULT_KUBECONFIG).expanduser().exists():
            data = read_kubeconfig(where)
            credentials = resolve_exec(data, context, where)
            config.load_kube_config_from_dict(data, context=context, client_configuration=cfg, persist_config=False)
            if credentials is not None:
                credentials.keep_fresh(cfg)
        else:
            where = "the in-cluster service account"
            config.load_incluster_config(client_configuration=cfg)
    except InputError as exc:
        raise InputError(f"cannot connect to a cluster: {exc}") from None
    except (ConfigException, OSError, ValueError) as exc:  # a missing context, bad base64 in *-data
        raise InputError(f"{where}: cannot connect to a cluster: {str(exc)[:500]}") from None
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
                      sleep: Callable[[float], None] = time.sleep, patient: bool = False,
                      budget: float | None = None, clock: Callable[[], float] = time.monotonic) -> Any:
    """Call `fn`, retrying on conflicts, throttling, server errors and dropped connections; `patient` (the
    operator) also retries timeouts and refused connections, which a CLI reports at once. With `budget`, no
    retry starts after that many seconds: a wait that would end later (Retry-After: 60 under a 3 s request
    timeout) gives the last answer back at once instead."""
    started = clock()
    attempt = 0
    while True:
        try:
            return fn()
        except ApiException as exc:
            if exc.status not in RETRYABLE or attempt >= retries:
                raise
            delay = retry_delay(exc, attempt)
            if budget is not None and clock() - started + delay > budget:
                raise
        except KubeUnreachable as exc:
            if not (exc.dropped or patient) or attempt >= retries:
                raise
            delay = retry_delay(None, attempt)
            if budget is not None and clock() - started + delay > budget:
                raise
        if stats is not None:
            stats.retries += 1
        sleep(delay)
        attempt += 1


def retrying(api: client.ApiClient) -> Callable[[Callable[[], Any]], Any]:
    """`call_with_retries` within the client's request timeout."""
    budget = getattr(api, "timeouts", Timeouts()).read
    return lambda fn: call_with_retries(fn, budget=budget)


@dataclass
class Page:
    """One page of a list: its items and the token of the next page (None: the last)."""

    items: list[Any]
    token: str | None


def pages(fetch: Callable[[str | None], Page], call: Callable[[Callable[[], Any]], Any] = call_with_retries,
          origin: str = "the API server") -> Iterator[list[Any]]:
    """The items of a paged list, page by page. `fetch(token)` reads one page; `call` retries each page on its
    own, so one failed page is asked again instead of restarting the list from page 1. A server that pages in
    a circle (a token it sent before) or for ever (more than MAX_PAGES) is an error."""
    token, seen = None, set()
    for number in range(1, MAX_PAGES + 1):
        page = call(lambda: fetch(token))
        yield page.items
        if not page.token:
            return
        if page.token in seen:
            raise KubeUnreachable(f"{origin}: sent a list's continue token a second time; it pages in a circle")
        seen.add(page.token)
        token = page.token
    raise KubeUnreachable(f"{origin}: a list of more than {MAX_PAGES} pages; it pages for ever")


def page_of(data: Any, origin: str) -> Page:
    """A decoded list answer as a page: an object whose `items` is a list and `metadata.continue` a string."""
    if not isinstance(data, dict):
        raise KubeUnreachable(f"{origin}: answered a list with {kind_of(data)}, not an object")
    items, meta = data.get("items"), data.get("metadata")
    token = meta.get("continue") if isinstance(meta, dict) else None
    if not isinstance(items, list) and items is not None or meta is not None and not isinstance(meta, dict) \
            or not isinstance(token, (str, type(None))):
        raise KubeUnreachable(f"{origin}: answered a list whose items or metadata.continue have the wrong type")
    return Page(items or [], token or None)


def request_json(api: client.ApiClient, method: str, path: str, *, body: Any = None,
                 query: Iterable[tuple[str, str]] = (), content_type: str = "application/json",
                 timeout: float | tuple[float, float] | None = None) -> Any:
    """One call to any API path; the decoded JSON answer (an object, or None when empty), or `ApiException`
    for a non-2xx status.

    The typed clients need a method per kind and validate bodies against their models; a path and a dict
    reach every kind (Leases, ConfigMaps, custom resources) the same way."""
    req = api.param_serialize(method, path, query_params=list(query),
                              header_params={"Content-Type": content_type, "Accept": "application/json"},
                              body=body, auth_settings=["BearerToken"])
    resp = api.call_api(*req, _request_timeout=timeout)
    raw = read_body(api, resp.response)
    if not 200 <= resp.status <= 299:
        raise ApiException.from_response(http_resp=resp, body=raw[:65536].decode(errors="replace"), data=None)
    if not raw:
        return None
    data = decode_answer(raw, f"{api.configuration.host}: {path}", resp.response)
    if not isinstance(data, dict):
        raise KubeUnreachable(f"{api.configuration.host}: answered {path} with {kind_of(data)}, not an object")
    return data


def read_body(api: client.ApiClient, resp: Any) -> bytes:
    """A `_preload_content=False` response's whole body, at most MAX_ANSWER bytes, by the exchange's deadline
    however slowly it drips (its socket's reads end there)."""
    host = api.configuration.host
    timeouts = getattr(api, "timeouts", Timeouts())
    chunks, size = [], 0
    try:
        while chunk := resp.read1(1 << 16):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_ANSWER:
                resp.close()  # never back into the pool: the rest of the body is still coming
                raise KubeUnreachable(f"{host}: an answer larger than {MAX_ANSWER >> 20} MiB; refused")
    except urllib3.exceptions.ReadTimeoutError:
        resp.close()
        raise KubeUnreachable(f"{host}: the answer took longer than {timeouts.read:g}s") from None
    except urllib3.exceptions.HTTPError as exc:
        resp.close()
        raise unreachable(exc, host, timeouts) from None
    resp.release_conn()
    return b"".join(chunks)


_DECODE = msgspec.json.Decoder()


def decode_answer(body: bytes, origin: str, resp: Any = None, walk: bool = True) -> Any:
    """An answer's JSON, decoded strictly and (`walk`) nested at most MAX_DEPTH deep; anything else is one line.
    Readers that take only known fields (nodes, pods) skip the walk: its cost is that of the decoding."""
    try:
        data = _DECODE.decode(body)
    except msgspec.DecodeError:
        kind = ((resp.headers or {}).get("Content-Type") if resp is not None else None) or "no content type"
        raise KubeUnreachable(f"{origin}: answered with something that is not JSON ({kind}); is it a Kubernetes "
                              "API server?") from None
    except (msgspec.MsgspecError, RecursionError) as exc:  # a number past 64 bits, nesting past the stack
        why = "nested too deep" if isinstance(exc, RecursionError) else str(exc)[:200]
        raise KubeUnreachable(f"{origin}: answered with JSON no API server sends ({why})") from None
    if walk and _deeper_than(data, MAX_DEPTH):
        raise KubeUnreachable(f"{origin}: answered with JSON nested deeper than {MAX_DEPTH} levels")
    return data


def _deeper_than(data: Any, limit: int) -> bool:
    """Whether containers nest more than `limit` deep (walking containers only)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        children = value.values() if isinstance(value, dict) else value
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


class _ListMeta(msgspec.Struct):
    continue_: str = msgspec.field(default="", name="continue")


class _Page(msgspec.Struct):
    """A list answer with its items left as raw JSON, for readers that decode each into the fields they keep."""

    items: list[msgspec.Raw] = []
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)


_PAGE = msgspec.json.Decoder(_Page)


def raw_page(api: client.ApiClient, resp: Any, what: str) -> Page:
    """One page of a `_preload_content=False` list: its items as raw JSON (each decoded by its reader, so
    nothing else of a page is built) and the next page's token."""
    origin = f"{api.configuration.host}: {what}"
    body = read_body(api, resp)
    try:
        found = _PAGE.decode(body)
    except msgspec.ValidationError as exc:
        raise KubeUnreachable(f"{origin}: answered a list of the wrong shape ({str(exc)[:200]})") from None
    except (msgspec.DecodeError, RecursionError):
        decode_answer(body, origin, resp)  # says what is wrong with it
        raise KubeUnreachable(f"{origin}: answered a list of the wrong shape") from None
    return Page(found.items, found.metadata.continue_ or None)


def list_objects(api: client.ApiClient, send: Callable[[str | None], Any], what: str, walk: bool = True) -> list[Any]:
    """Every object of a paged list, `send(token)` asking for a page (`_preload_content=False`); each item
    decoded strictly (`walk`: its nesting bounded, see `decode_answer`) and an object, else one line."""
    host = api.configuration.host
    origin = f"{host}: {what}"
    out = []
    for items in pages(lambda token: raw_page(api, send(token), what), retrying(api), host):
        for raw in items:
            item = decode_answer(raw, origin, walk=walk)
            if not isinstance(item, dict):
                raise KubeUnreachable(f"{origin}: an item that is {kind_of(item)}, not an object")
            out.append(item)
    return out


def list_nodes(api: client.ApiClient, page: int = 500, keep: Keep = ALL) -> list[Node]:
    """Every Node, read in pages so a large cluster does not load the API server with one huge list; each
    page becomes compact records before the next is read, so the raw objects of one page at most are held.
    The records keep what `keep` says."""
    core = client.CoreV1Api(api)
    fetch = lambda token: raw_page(api, core.list_node(limit=page, _continue=token, _preload_content=False),  # noqa: E731
                                   "the node list")
    return nodes_from_pages(pages(fetch, retrying(api), api.configuration.host), "cluster",
                            NodeReader("cluster", keep))


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
