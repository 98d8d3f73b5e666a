"""Run `ibnetdiscover` on this host, under a timeout: the only subprocess of the InfiniBand source.

Without a reachable subnet (or simulator) the tool can hang, so the timeout is not optional.
"""

from __future__ import annotations

from labeler.io.hosttools import run_tool

MAX_BYTES = 256 << 20  # a 100,000-HCA fabric prints 37 MB (BENCHMARKS.md)


def run_ibnetdiscover(ca: str | None, timeout: float, binary: str = "ibnetdiscover", port: int | None = None) -> str:
    """Its stdout; a `SourceError` with its stderr when it fails, is missing or runs out of time."""
    return run_tool([binary, *(["-C", ca] if ca else []), *(["-P", str(port)] if port else [])], timeout,
                    max_bytes=MAX_BYTES,
                    missing="install infiniband-diags (Debian/Ubuntu) or rdma-core diagnostics, or pass a saved "
                            "output with --ibnetdiscover FILE",
                    stalled="no active port or subnet manager?; raise --ib-timeout or pass a saved output with "
                            "--ibnetdiscover FILE")
