"""Running a diagnostic tool of this host (ibnetdiscover, lldpcli, nvidia-smi) under a timeout.

Such tools hang without the fabric or daemon they talk to, so there is always a timeout, and each way of
failing becomes one `SourceError` line that says what to do.
"""

from __future__ import annotations

import subprocess
from typing import Callable, Sequence

from .errors import SourceError


def run_tool(argv: Sequence[str], timeout: float, *, missing: str, stalled: str = "", failed: str = "",
             clean: Callable[[str], str] = str.strip) -> str:
    """The tool's stdout. `missing`, `stalled` and `failed` are hints added to the matching error;
    `clean` tidies the last stderr line (e.g. drops a log prefix) before it is shown."""
    command = " ".join(argv)
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise SourceError(f"{argv[0]}: not found; {missing}") from None
    except subprocess.TimeoutExpired:
        raise SourceError(f"{command}: no answer within {timeout:g} s" + (f" ({stalled})" if stalled else "")) from None
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["no error output"]
        raise SourceError(f"{command}: exit {done.returncode}: {clean(lines[-1])}" + (f" ({failed})" if failed else ""))
    return done.stdout
