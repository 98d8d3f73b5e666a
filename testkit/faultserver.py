"""A tiny raw-socket HTTP server for the faults a real API server will not produce on demand.

`FaultServer(behave)` answers each connection with `behave(conn)` in a thread: stay silent after reading the
request, drip the headers, the body or a TLS handshake a byte at a time, never answer a PATCH, drop the
connection, answer with HTML, with JSON of the wrong shape, with a body that never ends, with 429 and a long
Retry-After, or with list pages whose continue token never ends. Used by tests/test_kube_faults.py and
testkit/fuzz.py.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from pathlib import Path
from typing import Any, Callable

NODE_LIST = {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": [
    {"apiVersion": "v1", "kind": "Node",
     "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1", "cloud.google.com/gce-topology-block": "b1"}}}]}


class FaultServer:
    """`with FaultServer(behave) as server:` - `server.kubeconfig(dir)` points a client at it."""

    def __init__(self, behave: Callable[[socket.socket], None]) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.behave = behave
        self.requests: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def __enter__(self) -> "FaultServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.sock.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        try:
            self.behave(conn)
        except OSError:
            pass

    def kubeconfig(self, directory: Path, tls: bool = False) -> str:
        path = directory / f"fault-{self.port}.kubeconfig"
        cluster = {"server": f"https://127.0.0.1:{self.port}", "insecure-skip-tls-verify": True} if tls else \
            {"server": f"http://127.0.0.1:{self.port}"}
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "c", "clusters": [{"name": "c", "cluster": cluster}],
            "users": [{"name": "u", "user": {}}], "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
        return str(path)


def read_request(conn: socket.socket) -> bytes:
    """One request's head (the body is read and dropped); b"" when the client closed."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return b""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = re.search(rb"(?i)content-length: *(\d+)", head)
    while length and len(body) < int(length.group(1)):
        body += conn.recv(65536)
    return head


def answer(conn: socket.socket, body: bytes, status: str = "200 OK", ctype: str = "application/json",
           headers: str = "") -> None:
    conn.sendall(f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n{headers}\r\n".encode()
                 + body)


def silent(conn: socket.socket) -> None:
    """Reads the request, never answers."""
    read_request(conn)
    time.sleep(3600)


def slow_drip(conn: socket.socket) -> None:
    """Answers at once, then sends the body a byte every half second."""
    read_request(conn)
    body = json.dumps(NODE_LIST).encode() + b" " * 100_000
    conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode())
    for byte in body:
        conn.sendall(bytes([byte]))
        time.sleep(0.5)


def header_drip(conn: socket.socket) -> None:
    """Answers at once, but drips the status line and headers a byte every 0.2 s, for ever."""
    read_request(conn)
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    while True:
        for byte in head:
            conn.sendall(bytes([byte]))
            time.sleep(0.2)
        head = b"X-Drip: " + b"x" * 1000 + b"\r\n"


def tls_drip(conn: socket.socket) -> None:
    """Reads the TLS ClientHello, then drips a handshake record (16 KiB announced) a byte every 0.2 s."""
    conn.recv(65536)
    conn.sendall(b"\x16\x03\x03\x40\x00")
    while True:
        conn.sendall(b"\x02")
        time.sleep(0.2)


def flood(conn: socket.socket) -> None:
    """A 200 with no length and a body of spaces that never ends, as fast as the client reads."""
    read_request(conn)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
    block = b" " * 65536
    while True:
        conn.sendall(block)


def answering(body: bytes, status: str = "200 OK", headers: str = "", where: str = "") -> Callable[[socket.socket], None]:
    """Requests whose path holds `where` (every one by default) answered with `body` (JSON of the wrong shape, a
    throttling 429); the others as a small healthy cluster would: one node, no pods, no Kueue objects."""
    def behave(conn: socket.socket) -> None:
        while head := read_request(conn):
            path = head.split(b" ", 2)[1].decode()
            if where in path:
                answer(conn, body, status, headers=headers)
            elif path.startswith("/api/v1/nodes"):
                answer(conn, json.dumps(NODE_LIST).encode())
            else:
                answer(conn, b'{"kind": "List", "apiVersion": "v1", "metadata": {}, "items": []}')

    return behave


class EndlessPages:
    """Node list pages whose metadata.continue never ends: the same token every time (`same`), or a new one."""

    def __init__(self, same: bool) -> None:
        self.same, self.pages = same, 0

    def __call__(self, conn: socket.socket) -> None:
        while read_request(conn):
            self.pages += 1
            token = "again" if self.same else f"page-{self.pages}"
            answer(conn, json.dumps({**NODE_LIST, "metadata": {"continue": token}}).encode())


def no_patch_answer(conn: socket.socket) -> None:
    """Serves the node list; a PATCH is read and never answered."""
    while head := read_request(conn):
        if head.startswith(b"PATCH"):
            time.sleep(3600)
        answer(conn, json.dumps(NODE_LIST).encode())


def html(conn: socket.socket) -> None:
    """A proxy's login page instead of the API."""
    read_request(conn)
    answer(conn, b"<html>proxy login</html>", ctype="text/html")


class DropsFirstPatch:
    """Serves the node list; the first PATCH gets its connection closed without an answer, later ones 200."""

    def __init__(self) -> None:
        self.patches = 0
        self.lock = threading.Lock()

    def __call__(self, conn: socket.socket) -> None:
        while head := read_request(conn):
            if head.startswith(b"PATCH"):
                with self.lock:
                    self.patches += 1
                    first = self.patches == 1
                if first:
                    conn.close()
                    return
            answer(conn, json.dumps(NODE_LIST).encode())


def closed_port() -> int:
    """A port nothing listens on (connections are refused)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port
