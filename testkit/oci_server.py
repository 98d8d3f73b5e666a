"""A small stand-in for OCI's Identity and Compute APIs, for the real `oci` SDK to talk to.

It serves what the oci source calls, as the API serves it (camelCase JSON, `opc-next-page` paging, OCI's
error bodies): `GET /20160918/availabilityDomains`, `GET /20160918/computeHosts` (filtered by compartment and
availability domain, `limit`/`page`) and `GET /20160918/computeHosts/{id}`. Every request must carry a valid
OCI request signature (draft-cavage HTTP signatures over date, (request-target) and host, RSA-SHA256) by a
key the server knows, else 401 NotAuthenticated; so the tests drive the SDK's own signing. Every request is
recorded for counting. It listens on 127.0.0.1, port 0.
"""

from __future__ import annotations

import base64
import hashlib
import re
import threading
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from testkit.httpstub import Listener, Served, send_json

TENANCY = "ocid1.tenancy.oc1..aaaaaaaatopolabeltesttenancy"
USER = "ocid1.user.oc1..aaaaaaaatopolabeltestuser"
REGION = "us-chicago-1"
MAX_LIMIT = 1000
_SIGNATURE = re.compile(r'(\w+)="([^"]*)"')


@dataclass(frozen=True)
class Call:
    operation: str
    availability_domain: str | None = None
    page: str | None = None
    limit: int | None = None


@dataclass
class ApiKey:
    """An API signing key: the private key file the SDK reads and the fingerprint OCI knows it by."""

    path: Path
    public: Any
    fingerprint: str

    @classmethod
    def create(cls, directory: Path) -> "ApiKey":
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        path = directory / "oci_api_key.pem"
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                           serialization.NoEncryption()))
        path.chmod(0o600)
        der = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        digest = hashlib.md5(der).hexdigest()  # noqa: S324 - OCI's key fingerprint is an MD5 of the public key
        return cls(path, key.public_key(), ":".join(digest[i:i + 2] for i in range(0, 32, 2)))

    def config_file(self, directory: Path, region: str = REGION) -> Path:
        """An OCI config file whose DEFAULT profile signs with this key."""
        path = directory / "config"
        path.write_text(f"[DEFAULT]\nuser={USER}\nfingerprint={self.fingerprint}\nkey_file={self.path}\n"
                        f"tenancy={TENANCY}\nregion={region}\n")
        return path


def host(instance: str, ad: str, island: str | None, block: str | None, local: str | None,
         fabric: str | None = None, index: int = 0) -> dict[str, Any]:
    """A compute host as the API returns it in full (ComputeHost); its summary drops what `summary` drops."""
    body: dict[str, Any] = {
        "id": f"ocid1.computebaremetalhost.oc1.us-chicago-1.anxxeljr{index:08d}hostaaaa",
        "instanceId": instance, "availabilityDomain": ad, "compartmentId": TENANCY,
        "faultDomain": "FAULT-DOMAIN-1", "shape": "BM.GPU.H100.8", "lifecycleState": "OCCUPIED", "health": "HEALTHY",
        "hpcIslandId": island, "networkBlockId": block, "localBlockId": local, "gpuMemoryFabricId": fabric,
        "displayName": f"host-{index}", "timeCreated": "2026-10-01T00:00:00.000Z",
        "additionalData": {"locationDetails": {"rack": f"rack-{index // 18}"}},
    }
    return {k: v for k, v in body.items() if v is not None}


@dataclass
class OciServer(Served):
    """Serves `hosts` (bodies from `host()`) in `domains` (availability domain names) of the tenancy.

    `bare_summaries`: host ids whose list entry lacks the topology fields (the full record has them);
    `page_cap` shortens pages below `limit`; `denied` compartments answer 404 NotAuthorizedOrNotFound;
    `fail` is a queue of (status, code) answered before serving; `gone` host ids answer 404 to a Get.
    """

    key: ApiKey
    hosts: list[dict[str, Any]] = field(default_factory=list)
    domains: list[str] = field(default_factory=lambda: ["Uocm:US-CHICAGO-1-AD-1"])
    bare_summaries: set[str] = field(default_factory=set)
    page_cap: int = MAX_LIMIT
    denied: set[str] = field(default_factory=set)
    fail: list[tuple[int, str]] = field(default_factory=list)
    gone: set[str] = field(default_factory=set)
    calls: list[Call] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._listener = Listener(_handler(self))

    def count(self, operation: str | None = None, ad: str | None = None) -> int:
        with self._lock:
            return sum(1 for c in self.calls if (operation is None or c.operation == operation)
                       and (ad is None or c.availability_domain == ad))

    def respond(self, method: str, target: str, headers: Any) -> tuple[int, Any, dict[str, str]]:
        parts = urlsplit(target)
        params = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        path = unquote(parts.path)
        operation, host_id = _route(path)
        if operation is None:
            return _error(404, "NotFound", f"no such resource {path}")
        limit = params.get("limit")
        call = Call(operation, params.get("availabilityDomain"), params.get("page"), int(limit) if limit else None)
        with self._lock:
            self.calls.append(call)
        if not self._signed(method, target, headers):
            return _error(401, "NotAuthenticated", "The required information to complete authentication was not "
                                                   "provided or was incorrect.")
        with self._lock:
            failure = self.fail.pop(0) if self.fail else None
        if failure:
            return _error(failure[0], failure[1], f"{failure[1]} (injected)")
        if operation == "GetComputeHost":
            found = [h for h in self.hosts if h["id"] == host_id]
            if not found or host_id in self.gone:
                return _error(404, "NotAuthorizedOrNotFound", f"Authorization failed or requested resource not "
                                                              f"found: {host_id}")
            return 200, found[0], {}
        compartment = params.get("compartmentId")
        if compartment != TENANCY or compartment in self.denied:
            return _error(404, "NotAuthorizedOrNotFound", "Authorization failed or requested resource not found.")
        if operation == "ListAvailabilityDomains":
            return 200, [{"name": d, "id": f"ocid1.availabilitydomain.oc1..{i}", "compartmentId": TENANCY}
                         for i, d in enumerate(self.domains)], {}
        return self._list_hosts(params)

    def _list_hosts(self, params: dict[str, str]) -> tuple[int, Any, dict[str, str]]:
        limit = int(params.get("limit", MAX_LIMIT))
        if not 1 <= limit <= MAX_LIMIT:
            return _error(400, "InvalidParameter", f"limit must be between 1 and {MAX_LIMIT}")
        ad = params.get("availabilityDomain")
        if ad is not None and ad not in self.domains:
            return _error(400, "InvalidParameter", f"Invalid availabilityDomain {ad}")
        found = [h for h in self.hosts if ad is None or h["availabilityDomain"] == ad]
        start = int(params.get("page") or 0)
        size = min(limit, self.page_cap)
        page = [self._summary(h) for h in found[start:start + size]]
        headers = {"opc-next-page": str(start + size)} if start + size < len(found) else {}
        return 200, {"items": page}, headers

    def _summary(self, body: dict[str, Any]) -> dict[str, Any]:
        drop = {"additionalData"} | ({"hpcIslandId", "networkBlockId", "localBlockId", "gpuMemoryFabricId"}
                                     if body["id"] in self.bare_summaries else set())
        return {k: v for k, v in body.items() if k not in drop}

    def _signed(self, method: str, target: str, headers: Any) -> bool:
        """Whether the request carries the OCI signature of our key over date, (request-target) and host."""
        fields = dict(_SIGNATURE.findall(headers.get("Authorization", "")))
        if fields.get("keyId") != f"{TENANCY}/{USER}/{self.key.fingerprint}" or fields.get("algorithm") != "rsa-sha256":
            return False
        lines = []
        for name in fields.get("headers", "").split():
            value = f"{method.lower()} {target}" if name == "(request-target)" else headers.get(name)
            if value is None:
                return False
            lines.append(f"{name}: {value}")
        if not {"date", "(request-target)", "host"} <= set(fields.get("headers", "").split()):
            return False
        try:
            self.key.public.verify(base64.b64decode(fields.get("signature", "")), "\n".join(lines).encode(),
                                   padding.PKCS1v15(), hashes.SHA256())
        except Exception:  # noqa: BLE001 - any bad signature is simply not signed
            return False
        return True


def _route(path: str) -> tuple[str | None, str | None]:
    if path == "/20160918/availabilityDomains":
        return "ListAvailabilityDomains", None
    if path == "/20160918/computeHosts":
        return "ListComputeHosts", None
    m = re.fullmatch(r"/20160918/computeHosts/([^/]+)", path)
    return ("GetComputeHost", m.group(1)) if m else (None, None)


def _error(status: int, code: str, message: str) -> tuple[int, Any, dict[str, str]]:
    return status, {"code": code, "message": message}, {}


def _handler(server: OciServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            status, body, headers = server.respond("GET", self.path, self.headers)
            send_json(self, status, body, {"opc-request-id": "topolabel-test", "Date": formatdate(usegmt=True),
                                           **headers})

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

    return Handler
