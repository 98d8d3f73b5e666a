"""A read-only Kubernetes API on 127.0.0.1 (a free port) serving fixed lists, for the cluster code paths.

It answers GET on list URLs with `{"items": [...]}` in pages of `limit` (with `continue` tokens, as the
real server does) and records every request, so tests can check paging and field selectors. The
kubernetes client talks to it through a kubeconfig it writes.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from testkit.httpstub import send_json


class FakeKube:
    def __init__(self, lists: dict[str, list[dict[str, Any]]]) -> None:
        self.lists = lists
        self.requests: list[tuple[str, dict[str, list[str]]]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                url = urlparse(self.path)
                query = parse_qs(url.query)
                fake.requests.append((url.path, query))
                if url.path not in fake.lists:
                    body, status = {"kind": "Status", "code": 404, "message": f"{url.path} not found"}, 404
                else:
                    items = fake.lists[url.path]
                    start = int((query.get("continue") or ["0"])[0])
                    limit = int((query.get("limit") or [str(len(items) or 1)])[0])
                    page = items[start:start + limit]
                    more = start + limit < len(items)
                    body = {"kind": "List", "metadata": {"continue": str(start + limit) if more else ""},
                            "items": page}
                    status = 200
                send_json(self, status, body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def kubeconfig(self, path: Path) -> Path:
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
            "users": [{"name": "fake", "user": {"token": "test"}}]}))
        return path

    def __enter__(self) -> "FakeKube":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
