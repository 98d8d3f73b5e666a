"""A TCP proxy that adds a fixed delay in each direction: a local API server made to answer like a remote one.

Bytes pass through untouched (TLS included, so the client still verifies the server), each chunk forwarded
half the round trip after it arrived, in order; a connection closes when either side closes it. It runs as
its own process so that its CPU is neither the client's nor the server's. bench/apply.py uses it for
`--latency`.

Run: python -m bench.latency UPSTREAM_HOST:PORT ROUND_TRIP_MS  (prints the port it listens on, 127.0.0.1)
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from contextlib import contextmanager
from typing import Iterator

from bench.measure import ROOT

CHUNK = 1 << 16


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """Forward what `reader` gives to `writer`, each chunk `delay` seconds after it arrived; then close."""
    loop = asyncio.get_running_loop()
    while data := await reader.read(CHUNK):
        loop.call_later(delay, writer.write, data)
    loop.call_later(delay, writer.close)


async def _serve(upstream: str, delay: float) -> None:
    host, port = upstream.rsplit(":", 1)

    async def connection(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(_pump(client_reader, server_writer, delay), _pump(server_reader, client_writer, delay),
                             return_exceptions=True)

    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


@contextmanager
def delayed(server_url: str, round_trip_ms: float) -> Iterator[str]:
    """`server_url` (https://HOST:PORT) behind a proxy adding `round_trip_ms` to every round trip; yields the
    proxy's URL (same scheme, 127.0.0.1: the test server's certificate names that address)."""
    match = re.fullmatch(r"(https?)://([^/]+):([0-9]+)/?", server_url)
    if not match:
        raise SystemExit(f"bench.latency: cannot proxy {server_url!r}: expected scheme://host:port")
    scheme, host, port = match.groups()
    proc = subprocess.Popen([sys.executable, "-m", "bench.latency", f"{host}:{port}", str(round_trip_ms)],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        listening = proc.stdout.readline().strip()
        if not listening.isdigit():
            raise SystemExit(f"bench.latency: the proxy did not start (exit {proc.poll()})")
        yield f"{scheme}://127.0.0.1:{listening}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> None:
    upstream, round_trip = sys.argv[1], float(sys.argv[2])
    try:
        asyncio.run(_serve(upstream, round_trip / 2000))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
