"""Leader election for the operator, so two replicas can run: the one holding the Lease works, the other waits.

The Lease is `labeler.cluster.lease`'s (client-go's rules, the one the InfiniBand collectors hold): a `Keeper` thread
acquires and renews it, so a slow pass never starves the renewals. This module only waits for it from the
event loop and watches it while the replica works. A holder whose renewals fail for the renew deadline (two
thirds of the duration) stops before anyone may take over, so two replicas never write at once. A holder
that stops cleanly releases the Lease for an immediate takeover; a killed one is replaced within the
duration plus one renewal interval (about 17 s by default).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from typing import Callable

from kubernetes import client

from labeler.cluster.lease import Keeper, Lease
from labeler.errors import TopolabelError

log = logging.getLogger(__name__)

LEASE_NAME = "topolabel-operator"
POLL = 0.2  # seconds between looks at the Keeper's answer


class LeadershipLost(TopolabelError):
    """The Lease could not be renewed in time, or another replica holds it: this replica must stop writing."""


def default_identity() -> str:
    """The pod's name (its hostname) and a random part, so a restarted pod is a new holder."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


class Elector:
    """The operator's Lease `name` in `namespace`, held by a Keeper thread once `acquire` starts it."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str = LEASE_NAME, identity: str | None = None,
                 duration: float = 15.0, retry: float = 2.0) -> None:
        self.lease = Lease(api, namespace, name, identity or default_identity(), duration)
        self.keeper = Keeper(self.lease, retry)

    @property
    def where(self) -> str:
        return f"{self.lease.namespace}/{self.lease.name}"

    async def acquire(self, stopped: Callable[[], bool] = lambda: False) -> bool:
        """Wait until this replica holds the Lease (True), or until `stopped()` (False)."""
        log.info("leader election: waiting for Lease %s as %s", self.where, self.lease.identity)
        self.keeper.start()
        while not self.keeper.held:
            if stopped():
                await self.release()
                return False
            await asyncio.sleep(POLL)
        log.info("leader election: holding Lease %s", self.where)
        return True

    async def hold(self) -> str:
        """Return, with the reason, as soon as this replica no longer holds the Lease."""
        while self.keeper.held:
            await asyncio.sleep(POLL)
        if self.lease.holder not in (None, self.lease.identity):
            return f"another replica holds Lease {self.where}"
        return f"Lease {self.where} not renewed for {self.lease.renew_deadline:g}s"

    async def release(self) -> None:
        """Stop renewing and hand the Lease over at once (a clean stop)."""
        await asyncio.to_thread(self.keeper.stop, True)
