"""A small stand-in for the Compute Engine API's instance listing, for tests and benchmarks.

It serves the JSON the real API serves at `/compute/v1/projects/{p}/zones/{z}/instances` and
`/compute/v1/projects/{p}/aggregated/instances`: `filter` (the regular-expression form `name eq "RE"`
that topolabel sends, evaluated with RE2 as the API does; anything else is a 400), `maxResults` (0-500,
default 500), `pageToken`/`nextPageToken`, Google's error bodies, and
aggregated scopes with a `NO_RESULTS_ON_PAGE` warning. Every request is recorded, so tests can count
the calls a client made. It listens on 127.0.0.1, port 0.
"""

from __future__ import annotations

import json
import re
import threading
import zlib
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any, Iterable
from urllib.parse import parse_qs, urlsplit

import re2  # google-re2, installed with cel-python

from testkit.httpstub import Listener, Served

BASE = "https://www.googleapis.com/compute/v1"
ZONAL = re.compile(r"^/compute/v1/projects/([^/]+)/zones/([^/]+)/instances$")
AGGREGATED = re.compile(r"^/compute/v1/projects/([^/]+)/aggregated/instances$")
NAME_FILTER = re.compile(r"""^\s*name\s+eq\s+(?:"([^"]*)"|'([^']*)'|(\S+))\s*$""")
FIELD_PATH = re.compile(r"[A-Za-z_*][A-Za-z0-9_]*(?:/[A-Za-z_*][A-Za-z0-9_]*)*")
MAX_RESULTS = 500


@dataclass(frozen=True)
class Call:
    """One request as the server saw it: `zone` is None for an aggregated list."""

    project: str
    zone: str | None
    filter: str | None
    max_results: int | None
    page_token: str | None
    fields: str | None = None


def instance(project: str, zone: str, name: str, topology: dict[str, str] | None = None,
             machine_type: str = "a3-megagpu-8g", status: str = "RUNNING", bulk: bool = False) -> dict[str, Any]:
    """An instance as the API serves it; `topology` is `physicalHostTopology` (keys as in the API JSON).

    `bulk` adds what a GKE node's instance also carries (kube-env metadata, disks, interfaces: ~10 KB),
    which a client that asks for only the fields it needs never receives.
    """
    body: dict[str, Any] = {
        "kind": "compute#instance",
        "id": str(zlib.crc32(f"{project}/{zone}/{name}".encode())),
        "name": name,
        "zone": f"{BASE}/projects/{project}/zones/{zone}",
        "machineType": f"{BASE}/projects/{project}/zones/{zone}/machineTypes/{machine_type}",
        "status": status,
        "selfLink": f"{BASE}/projects/{project}/zones/{zone}/instances/{name}",
    }
    if topology is not None:
        body["resourceStatus"] = {"physicalHostTopology": dict(topology)}
    if bulk:
        body.update(_BULK, labels={"goog-k8s-cluster-name": "train", "goog-k8s-node-pool-name": "a3-pool"})
    return body


_BULK: dict[str, Any] = {
    "metadata": {"kind": "compute#metadata", "items": [
        {"key": "kube-env", "value": "\n".join(f"KUBE_SETTING_{i}: value-{i:04d}-" + "x" * 60 for i in range(110))},
        {"key": "cluster-name", "value": "train"}, {"key": "cluster-location", "value": "us-central1"}]},
    "disks": [{"kind": "compute#attachedDisk", "type": "PERSISTENT", "mode": "READ_WRITE", "boot": True,
               "source": f"{BASE}/projects/p/zones/z/disks/d{i}", "diskSizeGb": "200", "interface": "NVME"}
              for i in range(4)],
    "networkInterfaces": [{"kind": "compute#networkInterface", "network": f"{BASE}/projects/p/global/networks/gpu-{i}",
                           "subnetwork": f"{BASE}/projects/p/regions/r/subnetworks/gpu-{i}",
                           "networkIP": f"10.{i}.0.2", "nicType": "MRDMA" if i else "GVNIC"} for i in range(9)],
}


@dataclass
class ComputeServer(Served):
    """Serves `instances` (bodies from `instance()`) in `zones` (project -> zone names).

    `page_cap` makes pages shorter than maxResults (to exercise paging with little data);
    `forbidden` projects answer 403; `fail` is a queue of HTTP statuses to answer before serving
    (throttling, server errors). A zone or project not in `zones` answers 404.

    With `token` set, lists need `Authorization: Bearer <token>` (else 401), and the server also plays
    the GCE metadata server (`/computeMetadata/v1/...`) that Application Default Credentials use on a
    VM: it names `metadata_project` and hands out `issue` as the default service account's token
    (default: `token`; empty: refuse with a 403, as for a VM without a service account).
    """

    instances: list[dict[str, Any]] = field(default_factory=list)
    zones: dict[str, set[str]] = field(default_factory=dict)
    page_cap: int = MAX_RESULTS
    forbidden: set[str] = field(default_factory=set)
    fail: list[int] = field(default_factory=list)
    token: str | None = None
    issue: str | None = None
    metadata_project: str = "proj-metadata"
    calls: list[Call] = field(default_factory=list)
    bytes_sent: int = 0  # list response bodies, to check that field masks keep them small

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._by_scope: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for body in self.instances:
            project, zone = body["zone"].split("/projects/", 1)[1].split("/zones/")
            self.zones.setdefault(project, set()).add(zone)
            self._by_scope.setdefault((project, zone), []).append(body)
        for bodies in self._by_scope.values():
            bodies.sort(key=lambda b: b["name"])
        self._listener = Listener(_handler(self))

    def respond(self, path: str, query: str, authorization: str | None = None,
                fields: str | None = None) -> tuple[int, dict[str, Any]]:
        """Status and JSON body for one GET (a partial response when `fields`, the field mask, is given)."""
        if self.token and authorization != f"Bearer {self.token}":
            return _error(401, "Request is missing required authentication credential.", "required")
        params = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
        zonal, aggregated = ZONAL.match(path), AGGREGATED.match(path)
        if not (zonal or aggregated):
            return _error(404, f"no such method: {path}", "notFound")
        project, zone = (zonal.group(1), zonal.group(2)) if zonal else (aggregated.group(1), None)
        raw_max = params.get("maxResults")
        asked = int(raw_max) if raw_max and raw_max.isdigit() else None
        with self._lock:
            self.calls.append(Call(project, zone, params.get("filter"), asked, params.get("pageToken"), fields))
            failure = self.fail.pop(0) if self.fail else None
        if failure is not None:
            return _error(failure, HTTPStatus(failure).phrase, "rateLimitExceeded" if failure == 429 else "backendError")
        if project in self.forbidden:
            return _error(403, f"Required 'compute.instances.list' permission for 'projects/{project}'", "forbidden")
        if project not in self.zones or (zone is not None and zone not in self.zones[project]):
            where = f"projects/{project}" + (f"/zones/{zone}" if zone else "")
            return _error(404, f"The resource '{where}' was not found", "notFound")
        max_results = MAX_RESULTS if asked is None else asked
        if (raw_max and asked is None) or max_results > MAX_RESULTS:
            return _error(400, f"Invalid value for field 'maxResults': {raw_max}. Must be less than or "
                          f"equal to {MAX_RESULTS}", "invalid")
        try:
            wanted = _name_matcher(params.get("filter", ""))
        except ValueError as exc:
            return _error(400, f"Invalid value for field 'filter': {exc}", "invalid")
        scopes = [zone] if zone else sorted(self.zones[project])
        found = [(z, b) for z in scopes for b in self._by_scope.get((project, z), []) if wanted(b["name"])]
        start = _offset(params.get("pageToken"))
        if start is None:
            return _error(400, "Invalid value for field 'pageToken'", "invalid")
        size = min(max_results or MAX_RESULTS, self.page_cap)
        page, rest = found[start:start + size], found[start + size:]
        body: dict[str, Any] = {"id": f"projects/{project}", "selfLink": f"{BASE}{path[len('/compute/v1'):]}"}
        if zone:
            body.update(kind="compute#instanceList", items=[b for _, b in page])
        else:
            body.update(kind="compute#instanceAggregatedList", items=_scoped(scopes, page))
        if rest:
            body["nextPageToken"] = f"offset-{start + size}"
        try:
            body = select(body, parse_field_mask(fields)) if fields else body
        except ValueError as exc:
            return _error(400, f"Invalid field selection {fields!r}: {exc}", "invalidParameter")
        with self._lock:
            self.bytes_sent += len(json.dumps(body))
        return 200, body

    def count(self, project: str | None = None, zone: str | None = None, aggregated: bool | None = None) -> int:
        """Calls made, optionally only those for one project, zone, or kind of list."""
        with self._lock:
            calls = list(self.calls)
        return sum(1 for c in calls if (project is None or c.project == project)
                   and (zone is None or c.zone == zone)
                   and (aggregated is None or (c.zone is None) == aggregated))


FieldTree = dict[str, "FieldTree | None"]


def parse_field_mask(mask: str) -> FieldTree:
    """The partial-response syntax: `a,b/c,d(e,f/g),items/*/instances(name)`; None means the whole value."""
    tree, rest = _parse_fields(mask.replace(" ", ""), 0)
    if rest != len(mask.replace(" ", "")):
        raise ValueError(f"unexpected {mask[rest:]!r}")
    return tree


def _parse_fields(mask: str, pos: int) -> tuple[FieldTree, int]:
    tree: FieldTree = {}
    while True:
        m = FIELD_PATH.match(mask, pos)
        if not m:
            raise ValueError(f"expected a field name at {mask[pos:pos + 20]!r}")
        pos = m.end()
        sub: FieldTree | None = None
        if mask.startswith("(", pos):
            sub, pos = _parse_fields(mask, pos + 1)
            if not mask.startswith(")", pos):
                raise ValueError("unbalanced parentheses")
            pos += 1
        for name in reversed(m.group(0).split("/")):
            sub = {name: sub}
        _merge(tree, sub)
        if not mask.startswith(",", pos):
            return tree, pos
        pos += 1


def _merge(tree: FieldTree, add: FieldTree) -> None:
    for key, sub in add.items():
        if key not in tree:
            tree[key] = sub
        elif tree[key] is not None and sub is not None:
            _merge(tree[key], sub)
        else:
            tree[key] = None  # a whole field wins over a selection of its parts


def select(value: Any, tree: FieldTree | None) -> Any:
    """Keep the fields `tree` names; `*` stands for every key of a map (aggregated scopes)."""
    if tree is None:
        return value
    if isinstance(value, list):
        return [select(v, tree) for v in value]
    if not isinstance(value, dict):
        return value
    keys = value if "*" in tree else [k for k in tree if k in value]
    return {k: select(value[k], tree.get("*") if "*" in tree else tree[k]) for k in keys}


def _name_matcher(expr: str):
    """The server side of `name eq "RE"`: the regular expression must match the whole name."""
    if not expr:
        return lambda name: True
    m = NAME_FILTER.match(expr)
    if not m:
        raise ValueError(f"unsupported filter {expr[:80]!r}")
    pattern = next(g for g in m.groups() if g is not None)
    try:
        regex = re2.compile(pattern)  # the API's engine
    except re2.error as exc:
        raise ValueError(f"bad regular expression: {exc}") from None
    return lambda name: regex.fullmatch(name) is not None


def _offset(token: str | None) -> int | None:
    if not token:
        return 0
    m = re.fullmatch(r"offset-(\d+)", token)
    return int(m.group(1)) if m else None


def _scoped(scopes: Iterable[str], page: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Aggregated items: every zone scope, with instances or the API's no-results warning."""
    out: dict[str, Any] = {}
    for zone in scopes:
        bodies = [b for z, b in page if z == zone]
        key = f"zones/{zone}"
        out[key] = {"instances": bodies} if bodies else {"warning": {
            "code": "NO_RESULTS_ON_PAGE", "message": f"There are no results for scope '{key}' on this page.",
            "data": [{"key": "scope", "value": key}]}}
    return out


def _error(code: int, message: str, reason: str) -> tuple[int, dict[str, Any]]:
    return code, {"error": {"code": code, "message": message,
                            "errors": [{"message": message, "domain": "global", "reason": reason}]}}


def _metadata(server: ComputeServer, path: str, flavor: str | None) -> tuple[int, Any]:
    """The few metadata-server paths google-auth reads for a VM's default service account."""
    if flavor != "Google":
        return 403, "Missing Metadata-Flavor:Google header."
    account = re.fullmatch(r"/computeMetadata/v1/instance/service-accounts/([^/]+)/(token)?", path)
    issue = server.token if server.issue is None else server.issue
    if path == "/":
        return 200, "ok"
    if path == "/computeMetadata/v1/project/project-id":
        return 200, server.metadata_project
    if account and not account.group(2):
        return 200, {"email": "topolabel@example.iam.gserviceaccount.com", "aliases": ["default"],
                     "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}
    if account and issue:
        return 200, {"access_token": issue, "expires_in": 3600, "token_type": "Bearer"}
    if account:
        return 403, "The VM has no service account with the requested scopes."
    return 404, "Not Found"


def _handler(server: ComputeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            parts = urlsplit(self.path)
            if parts.path == "/" or parts.path.startswith("/computeMetadata/"):
                self._send(*_metadata(server, parts.path, self.headers.get("Metadata-Flavor")), metadata=True)
            else:
                self._send(*server.respond(parts.path, parts.query, self.headers.get("Authorization"),
                                           self.headers.get("X-Goog-FieldMask")))

        def _send(self, status: int, body: Any, metadata: bool = False) -> None:
            text = isinstance(body, str)
            data = (body if text else json.dumps(body)).encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain" if text else "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(data)))
            if metadata:
                self.send_header("Metadata-Flavor", "Google")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

    return Handler
