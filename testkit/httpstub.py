"""What the local HTTP stand-ins of remote APIs share (GCE, OCI, UFM, a read-only API server): a server on
127.0.0.1, port 0, serving in a daemon thread (over TLS when given a certificate), and a JSON answer."""

from __future__ import annotations

import json
import ssl
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Mapping, Self

from testkit.tlscert import Certificate


class Listener:
    """`handler` served from `start()` to `stop()`; `url` is where (https:// with a certificate)."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], certificate: Certificate | None = None) -> None:
        self.handler, self.certificate = handler, certificate
        self._http: ThreadingHTTPServer | None = None
        self._files: tempfile.TemporaryDirectory | None = None

    @property
    def url(self) -> str:
        assert self._http is not None, "server not started"
        return f"{'https' if self.certificate else 'http'}://127.0.0.1:{self._http.server_address[1]}"

    def start(self) -> None:
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self.handler)
        self._http.daemon_threads = True
        if self.certificate is not None:
            self._files = tempfile.TemporaryDirectory()
            key, cert = Path(self._files.name) / "key.pem", Path(self._files.name) / "cert.pem"
            key.write_bytes(self.certificate.key_pem)
            cert.write_bytes(self.certificate.cert_pem)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert, key)
            self._http.socket = context.wrap_socket(self._http.socket, server_side=True)
        threading.Thread(target=self._http.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        if self._files is not None:
            self._files.cleanup()


class Served:
    """A stand-in's `url` and `with` block, from the `Listener` it keeps in `_listener`."""

    _listener: Listener

    @property
    def url(self) -> str:
        return self._listener.url

    def __enter__(self) -> Self:
        self._listener.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._listener.stop()


def send_json(handler: BaseHTTPRequestHandler, status: int, body: Any, headers: Mapping[str, str] = {}) -> None:
    """One JSON answer with its length (and `headers`)."""
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    for name, value in headers.items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(data)
