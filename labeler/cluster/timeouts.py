"""How long a call to the API server may take: every call has both bounds (a CLI flag, an operator flag).

Apart from `labeler.cluster.kube` so that the command line can show the defaults without loading the Kubernetes client."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Timeouts:
    """Seconds to wait for a connection, and for each answer: `read` bounds every wait for the server and
    reading a whole response body."""

    connect: float = 10.0
    read: float = 20.0
