"""UFM's REST API into the fabric model the InfiniBand source places from: its nodes and the cables between them.

Two GETs make the whole fabric: `resources/systems` (each system's GUID and type: switch, host, ...) and
`resources/ports?active=true` (every active port: its name `<port GUID>_<number>`, GUID, system, number,
the node description, the peer port's name and node GUID, and the link's width and speed). A cable is a port
and its peer, kept once. A node is a switch ASIC or an HCA: its GUID is the node GUID its peer port reports
(`peer_node_guid`), else the port's own GUID (the node GUID on a switch and on ConnectX-4 and later HCAs).
Field names are those of UFM's REST API Guide (docs/ufm.md lists each one read).
"""

from __future__ import annotations

import base64
import re
import warnings
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from labeler.errors import InputError, SourceError

from .fabric import Fabric, Rate
from .parse import SPEEDS, parse_guid

SYSTEMS = "resources/systems"
PORTS = "resources/ports?active=true"
MAX_BODY = 1 << 30  # bytes per answer: a 100,000-HCA fabric's ports are about 300 MB of JSON
_PORT_NAME = re.compile(r"^[0-9a-fA-F]{1,16}_[0-9]{1,9}$")  # `<port GUID>_<number>`; anything else: no peer
_WIDTH = re.compile(r"([0-9]{1,2})x", re.IGNORECASE)
_SPEED = re.compile(r"(?<![A-Z0-9])(" + "|".join(sorted(SPEEDS, key=len, reverse=True)) + r")(?![A-Z0-9])")


@dataclass(frozen=True)
class Port:
    """One port record, as much of it as the fabric needs."""

    name: str
    guid: int
    system: int
    number: int
    desc: str
    peer: str
    peer_node: int | None
    width: int | None
    speed: str | None
    switch: bool  # the record's own `description` says Switch IB Port (for a system UFM did not list)


def fabric_from(systems: Any, ports: Any, origin: str) -> tuple[Fabric, list[str]]:
    """The fabric from the two answers, and notices about records left out. Not a list: a SourceError."""
    kinds, names = _systems(_listed(systems, origin, SYSTEMS), origin)
    records = _listed(ports, origin, PORTS)
    by_name: dict[str, Port] = {}
    bad = 0
    for record in records:
        port = _port(record)
        if port is None:
            bad += 1
        else:
            by_name[port.name] = port
    nodes = _Nodes(kinds, names)
    cables: list[tuple[int, int, int, int, int]] = []
    rates: dict[Rate, int] = {}
    seen: set[frozenset[str]] = set()
    unlisted_peers = 0
    for port in by_name.values():
        if not port.peer:
            continue
        peer = by_name.get(port.peer)
        if peer is None:
            unlisted_peers += 1
            continue
        pair = frozenset((port.name, peer.name))
        if pair in seen:
            continue
        seen.add(pair)
        here, there = nodes.of(port, peer), nodes.of(peer, port)
        rate = rates.setdefault((port.width or peer.width, port.speed or peer.speed), len(rates))
        cables.append((here, port.number, there, peer.number, rate))
    if not nodes.guids:
        raise SourceError(f"{origin}: UFM lists no cabled port ({len(records)} port records): no fabric to place")
    notices = []
    if bad:
        notices.append(f"{origin}: {bad} port record(s) without a name, GUID, system or number left out")
    if unlisted_peers:
        notices.append(f"{origin}: {unlisted_peers} port(s) name a peer port UFM does not list (the fabric changed "
                       "while it was read?); their cables are left out")
    fabric = Fabric(nodes.guids, nodes.kinds, nodes.descs, nodes.nports, cables, list(rates), nodes.port_guids)
    return fabric, notices


def _listed(answer: Any, origin: str, path: str) -> list:
    if not isinstance(answer, list):
        raise SourceError(f"{origin}: {path} answered {type(answer).__name__}, not a list of records")
    return answer


def _systems(records: Iterable[Any], origin: str) -> tuple[dict[int, str], dict[int, str]]:
    """System GUID -> node kind (switch, router, ca) and -> name."""
    kinds: dict[int, str] = {}
    names: dict[int, str] = {}
    for record in records:
        if not isinstance(record, Mapping):
            raise SourceError(f"{origin}: {SYSTEMS}: a record is {type(record).__name__}, not an object")
        guid = _hex(record.get("system_guid"))
        if guid is None:
            continue
        kind = str(record.get("type") or "").lower()
        kinds[guid] = "switch" if "switch" in kind else "router" if "router" in kind else "ca"
        names[guid] = str(record.get("system_name") or "")
    return kinds, names


def _port(record: Any) -> Port | None:
    if not isinstance(record, Mapping):
        return None
    name, guid, system = record.get("name"), _hex(record.get("guid")), _hex(record.get("systemID"))
    number = record.get("number")
    if isinstance(number, str) and number.isdigit():
        number = int(number)
    if not isinstance(name, str) or not name or guid is None or system is None or type(number) is not int:
        return None
    peer = record.get("peer")
    width = _WIDTH.search(str(record.get("active_width") or ""))
    speed = _SPEED.search(str(record.get("active_speed") or "").upper())
    return Port(name, guid, system, number, str(record.get("node_description") or "").strip(),
                peer if isinstance(peer, str) and _PORT_NAME.fullmatch(peer) else "", _hex(record.get("peer_node_guid")),
                int(width.group(1)) if width else None, speed.group(1) if speed else None,
                "switch" in str(record.get("description") or "").lower())


class _Nodes:
    """The fabric's node columns (`providers.infiniband.fabric`), filled as ports name their nodes."""

    def __init__(self, kinds: Mapping[int, str], names: Mapping[int, str]) -> None:
        self.system_kinds, self.system_names = kinds, names
        self.index: dict[int, int] = {}  # node GUID -> node
        self.guids: list[int] = []
        self.kinds: list[str] = []
        self.descs: list[str] = []
        self.nports: list[int | None] = []
        self.port_guids: dict[tuple[int, int], int] = {}

    def of(self, port: Port, peer: Port) -> int:
        """`port`'s node, added on first sight with its kind and description; its port count and (an HCA's)
        port GUID as this port says."""
        guid = peer.peer_node if peer.peer_node is not None else port.guid
        node = self.index.get(guid)
        if node is None:
            kind = self.system_kinds.get(port.system) or ("switch" if port.switch else "ca")
            node = self.index[guid] = len(self.guids)
            self.guids.append(guid)
            self.kinds.append(kind)
            self.descs.append(port.desc or (self.system_names.get(port.system, "") if kind == "switch" else ""))
            self.nports.append(0)
        self.nports[node] = max(self.nports[node] or 0, port.number)
        if self.kinds[node] == "ca":
            self.port_guids[(node, port.number)] = port.guid
        return node


def _hex(value: Any) -> int | None:
    """A GUID as UFM writes it (`0002c903007b78b0`), or None."""
    if not isinstance(value, str):
        return None
    try:
        return parse_guid(value)
    except InputError:
        return None


@dataclass(frozen=True)
class Credentials:
    """How to sign in: the Authorization header, the API prefix it goes with, and who it is (for messages; never
    the secret)."""

    header: str
    prefix: str
    who: str


def basic(username: str, password: str) -> Credentials:
    """A UFM user's name and password: the `/ufmRest` API."""
    token = base64.b64encode(f"{username}:{password}".encode()).decode()
    return Credentials(f"Basic {token}", "/ufmRest", f"user {username!r}")


def token(value: str) -> Credentials:
    """An access token (Settings > Access Tokens): the `/ufmRestV3` API, the token sent as UFM documents it."""
    return Credentials(f"Basic {value}", "/ufmRestV3", "the access token")


@dataclass(frozen=True)
class Server:
    """Where UFM answers and how to reach it: every GET has these timeouts and verifies TLS unless `insecure`."""

    url: str
    credentials: Credentials
    ca: str | None = None
    insecure: bool = False
    timeout: float = 60.0
    connect_timeout: float = 10.0
    attempts: int = 3  # per GET: a refused connection or a 429/502/503/504 answer is tried again, with backoff


def fetch(server: Server) -> tuple[Any, Any]:
    """The systems and the active ports: two GETs (each tried at most `server.attempts` times)."""
    import urllib3

    retries = urllib3.Retry(total=server.attempts - 1, read=0, redirect=0, backoff_factor=0.5,
                            status_forcelist=(429, 502, 503, 504), allowed_methods={"GET"}, raise_on_status=False)
    pool = urllib3.PoolManager(cert_reqs="CERT_NONE" if server.insecure else "CERT_REQUIRED", ca_certs=server.ca,
                               retries=retries, timeout=urllib3.Timeout(connect=server.connect_timeout,
                                                                        read=server.timeout))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)  # said once, as a problem
        return _get(pool, server, SYSTEMS), _get(pool, server, PORTS)


def _get(pool: Any, server: Server, path: str) -> Any:
    import orjson
    import urllib3

    from labeler.cluster.kube import unreachable
    from labeler.cluster.timeouts import Timeouts

    url = f"{server.url.rstrip('/')}{server.credentials.prefix}/{path}"
    try:
        response = pool.request("GET", url, headers={"Authorization": server.credentials.header,
                                                     "Accept": "application/json"}, preload_content=False)
        try:
            body = response.read(MAX_BODY + 1)
        finally:
            response.release_conn()
    except urllib3.exceptions.HTTPError as exc:
        raise SourceError(f"ufm: {unreachable(exc, server.url, Timeouts(server.connect_timeout, server.timeout))}") from None
    where = f"ufm: {url}"
    if response.status in (401, 403):
        raise SourceError(f"{where}: UFM refused {server.credentials.who} (HTTP {response.status}): check the "
                          "credentials, and that the user's role may read resources (docs/ufm.md)")
    if response.status != 200:
        raise SourceError(f"{where}: HTTP {response.status}" + (" (is this a UFM Enterprise server?)"
                                                                 if response.status == 404 else ""))
    if len(body) > MAX_BODY:
        raise SourceError(f"{where}: the answer is larger than {MAX_BODY >> 20} MiB")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise SourceError(f"{where}: not JSON ({exc})") from None
