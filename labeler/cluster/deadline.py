"""Deadlines over a whole exchange with the API server: connecting (TLS included) within the connect timeout,
and the answer, headers and body, within the read timeout of sending the request.

urllib3's read timeout bounds each wait for a byte, not the answer: a server that drips its headers a byte a
second never times out, and the body is read after the call returned. Here the connections of an API client's
pools take the timeouts of the calling thread's `exchange`; when a request is sent its connection's deadline is
set, and its socket turns every read and write into one that waits at most until then: a blocked read ends at
the deadline as a socket timeout, which urllib3 reports as a read timeout, wherever the body is read. The TLS
handshake reads before the socket is wrapped, so a timer shuts the socket down if connecting outlasts its
timeout.
"""

from __future__ import annotations

import contextlib
import io
import math
import socket
import threading
import time
from typing import Any, Iterator

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

_current = threading.local()


@contextlib.contextmanager
def exchange(connect: float, read: float) -> Iterator[None]:
    """Connections this thread opens inside the block connect within `connect` seconds, and requests it sends
    are answered, whole, within `read` seconds of being sent."""
    outer = _timeouts()
    _current.timeouts = (connect, read)
    try:
        yield
    finally:
        _current.timeouts = outer


def _timeouts() -> tuple[float, float]:
    return getattr(_current, "timeouts", (math.inf, math.inf))


class _DeadlineMixin:
    """A urllib3 connection whose socket waits no longer than the deadline of the exchange it serves."""

    deadline = math.inf
    sock: Any

    def connect(self) -> None:
        seconds = _timeouts()[0]
        self.deadline = time.monotonic() + seconds
        timer = threading.Timer(seconds, self._cut) if math.isfinite(seconds) else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            super().connect()  # type: ignore[misc]
        finally:
            if timer is not None:
                timer.cancel()
        self.sock = DeadlineSocket(self.sock, self)

    def request(self, *args: Any, **kwargs: Any) -> None:
        self.deadline = time.monotonic() + _timeouts()[1]
        super().request(*args, **kwargs)  # type: ignore[misc]

    def _cut(self) -> None:
        """The deadline passed during connect (a TLS handshake dripped): end it."""
        sock = getattr(self, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class DeadlineSocket:
    """A connected socket whose reads and writes wait at most until its connection's deadline (and never
    longer than the timeout urllib3 sets); everything else is the socket's own."""

    def __init__(self, sock: Any, conn: _DeadlineMixin) -> None:
        self._sock, self._conn = sock, conn
        self._timeout: float | None = sock.gettimeout()

    def settimeout(self, timeout: float | None) -> None:
        self._timeout = timeout
        self._sock.settimeout(timeout)

    def gettimeout(self) -> float | None:
        return self._timeout

    def _bound(self) -> None:
        left = self._conn.deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("the exchange's deadline passed")
        self._sock.settimeout(left if self._timeout is None else min(self._timeout, left))

    def recv_into(self, *args: Any) -> int:
        self._bound()
        return int(self._sock.recv_into(*args))

    def recv(self, *args: Any) -> bytes:
        self._bound()
        return bytes(self._sock.recv(*args))

    def send(self, *args: Any) -> int:
        self._bound()
        return int(self._sock.send(*args))

    def sendall(self, *args: Any) -> None:
        self._bound()
        self._sock.sendall(*args)

    def makefile(self, mode: str = "r", buffering: int | None = None, **_: Any) -> Any:
        """Binary file objects over this socket (http.client reads the answer through one)."""
        raw = socket.SocketIO(self, mode.replace("b", ""))  # type: ignore[arg-type]
        self._sock._io_refs += 1
        if buffering == 0:
            return raw
        size = io.DEFAULT_BUFFER_SIZE if buffering in (None, -1) else buffering
        return io.BufferedReader(raw, size) if "r" in mode else io.BufferedWriter(raw, size)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class _HTTPConnection(_DeadlineMixin, HTTPConnection):
    pass


class _HTTPSConnection(_DeadlineMixin, HTTPSConnection):
    pass


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


def install(pool_manager: urllib3.PoolManager) -> None:
    """Make every pool `pool_manager` creates from now on use deadline connections."""
    pool_manager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}
