"""A local stand-in for UFM Enterprise's REST API, serving the fabric an ibsim simulation runs.

It answers what the ufm source asks, as UFM's REST API Guide documents it: `GET /ufmRest/resources/systems`
and `GET /ufmRest/resources/ports` (`?active=true`: cabled ports only), and the same under `/ufmRestV3` for
access tokens (`Authorization: Basic <token>`). Its records come from the `hack.ibfabric.Fabric` that ibsim
loads, not from `ibnetdiscover`, so a test comparing the ufm source with the infiniband source compares two
independent readings of one fabric. A switch is a system whose ports all carry its GUID; each HCA is a host
system; an HCA port's GUID is its node GUID plus the port number, as ibsim gives them. Over TLS with a
self-signed certificate (testkit.tlscert), on 127.0.0.1, port 0; every request is recorded, and answers can be
made to fail (`fail`: status codes answered first, in order).
"""

from __future__ import annotations

import base64
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from hack.ibfabric import Fabric, Node
from testkit.httpstub import Listener, Served, send_json
from testkit.tlscert import Certificate

USERS = {"topolabel": "read-only-pass", "nobody": "no-rights"}  # `nobody` is refused (403), as a role without rights
TOKEN = "czQYeCfKIeXqlwSqtorunOPysaSp2r"


@dataclass(frozen=True)
class Call:
    path: str
    query: str
    auth: str  # "basic:<user>", "token" or "none"


def _hex(guid: int) -> str:
    return f"{guid:016x}"


def port_guid(node: Node, port: int) -> int:
    return node.guid if node.kind == "Switch" else node.guid + port


def system_name(node: Node) -> str:
    """A switch's host name, or the host an HCA's description names (its GUID when it names none)."""
    if node.kind == "Switch":
        return node.name
    host = node.desc.split(" ", 1)[0]
    return _hex(node.guid) if host.startswith("MT") else host


def systems(fabric: Fabric) -> list[dict[str, Any]]:
    return [{"system_guid": _hex(n.guid), "guid": _hex(n.guid), "type": "switch" if n.kind == "Switch" else "host",
             "system_name": system_name(n), "description": "MQM8790" if n.kind == "Switch" else "ConnectX7",
             "state": "active", "severity": "Info"} for n in fabric.nodes.values()]


def ports(fabric: Fabric, active_only: bool) -> list[dict[str, Any]]:
    """Every port, cabled ones with their peer; with `active_only`, the cabled ones alone."""
    found = []
    for node in fabric.nodes.values():
        for number in range(1, node.nports + 1):
            cabled = node.ports.get(number)
            if cabled is None and active_only:
                continue
            guid = port_guid(node, number)
            record: dict[str, Any] = {
                "name": f"{_hex(guid)}_{number}", "guid": _hex(guid), "systemID": _hex(node.guid), "number": number,
                "dname": str(number), "node_description": node.desc, "system_name": system_name(node),
                "description": "Switch IB Port" if node.kind == "Switch" else "Computer IB Port",
                "logical_state": "Active" if cabled else "Down", "physical_state": "LinkUp" if cabled else "Polling",
                "severity": "Info", "tier": 0, "peer": "", "peer_node_name": "", "active_speed": "", "active_width": ""}
            if cabled:
                remote_id, rport, rate = cabled
                remote = fabric.nodes[remote_id]
                width, _, speed = rate.partition("x")
                rguid = port_guid(remote, rport)
                record.update(peer=f"{_hex(rguid)}_{rport}", peer_guid=_hex(rguid), peer_node_guid=_hex(remote.guid),
                              peer_node_name=system_name(remote), peer_port_dname=str(rport),
                              peer_node_description=remote.desc, active_width=f"{width}x", active_speed=speed)
            found.append(record)
    return found


@dataclass
class UfmServer(Served):
    """Serves `fabric` over TLS with `certificate`."""

    fabric: Fabric
    certificate: Certificate
    calls: list[Call] = field(default_factory=list)
    fail: list[int] = field(default_factory=list)
    answers: dict[str, Any] = field(default_factory=dict)  # resource path -> a JSON answer instead of the fabric's

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._listener = Listener(type("Handler", (_Handler,), {"ufm": self}), self.certificate)

    def count(self, path: str | None = None) -> int:
        with self._lock:
            return sum(1 for c in self.calls if path is None or c.path.endswith(path))

    def answer(self, path: str, auth: str, query: str) -> tuple[int, Any]:
        with self._lock:
            self.calls.append(Call(path, query, auth))
            failure = self.fail.pop(0) if self.fail else None
        if auth == "none":
            return 401, {"error": "Unauthorized"}
        if auth == "basic:nobody":
            return 403, {"error": "Forbidden"}
        if failure is not None:
            return failure, {"error": f"injected {failure}"}
        prefix = "/ufmRestV3/" if auth == "token" else "/ufmRest/"
        if not path.startswith(prefix):
            return 401, {"error": "Unauthorized"}
        resource = path.removeprefix(prefix)
        if resource in self.answers:
            return 200, self.answers[resource]
        if resource == "resources/systems":
            return 200, systems(self.fabric)
        if resource == "resources/ports":
            return 200, ports(self.fabric, parse_qs(query).get("active") == ["true"])
        return 404, {"error": "Not Found"}


class _Handler(BaseHTTPRequestHandler):
    ufm: UfmServer

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        split = urlsplit(self.path)
        send_json(self, *self.ufm.answer(split.path, self._auth(), split.query))

    def _auth(self) -> str:
        header = self.headers.get("Authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme != "Basic" or not value:
            return "none"
        if value == TOKEN:
            return "token"
        try:
            user, _, password = base64.b64decode(value, validate=True).decode().partition(":")
        except ValueError:
            return "none"
        return f"basic:{user}" if USERS.get(user) == password else "none"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        """Quiet: the calls are recorded."""
