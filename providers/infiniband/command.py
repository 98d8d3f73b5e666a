"""Run `ibnetdiscover` on this host, under a timeout: the only subprocess of the InfiniBand source.

Without a reachable subnet (or simulator) the tool can hang, so the timeout is not optional.
"""

from __future__ import annotations

import subprocess

from providers.base import SourceError


def run_ibnetdiscover(ca: str | None, timeout: float, binary: str = "ibnetdiscover") -> str:
    """Its stdout; a `SourceError` with its stderr when it fails, is missing or runs out of time."""
    argv = [binary, *(["-C", ca] if ca else [])]
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise SourceError(f"{binary}: not found; install infiniband-diags (Debian/Ubuntu) or rdma-core "
                          "diagnostics, or pass a saved output with --ibnetdiscover FILE") from None
    except subprocess.TimeoutExpired:
        raise SourceError(f"{' '.join(argv)}: no answer within {timeout:g} s (no active port or subnet "
                          "manager?); raise --ib-timeout or pass a saved output with --ibnetdiscover FILE") from None
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no error output"])[-1]
        raise SourceError(f"{' '.join(argv)}: exit {result.returncode}: {last}")
    return result.stdout
