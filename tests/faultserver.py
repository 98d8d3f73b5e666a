"""A tiny raw-socket HTTP server for the faults a real API server will not produce on demand.

`FaultServer(behave)` answers each connection with `behave(conn)` in a thread: stay silent after reading the
request, drip the body a byte at a time, never answer a PATCH, drop the connection, or answer with HTML. Used
by tests/test_kube_faults.py and hack/fuzz.py.
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

    def kubeconfig(self, directory: Path) -> str:
        path = directory / f"fault-{self.port}.kubeconfig"
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{self.port}"}}],
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
