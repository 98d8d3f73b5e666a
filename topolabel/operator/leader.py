"""Leader election on a `coordination.k8s.io/v1` Lease, with client-go's rules, so two replicas can run.

The replica holding the Lease works; the other waits. The holder renews it every `retry` seconds. A standby
takes it over once it has seen no renewal for the lease's duration, timed on its own clock from when it last
saw the Lease change, so clocks that disagree between nodes do not matter. A holder that cannot renew within
`renew_deadline` (shorter than the duration) stops working before anyone can take over: two replicas never
write at once. A holder that stops cleanly releases the Lease, for an immediate takeover; a killed one is
replaced within the duration plus one retry (about 17 s by default).

Every Lease call is one attempt with short timeouts (a conflict is a lost race, not something to retry), and
the renewal loop does not wait for a call longer than the deadline leaves. Writes are merge patches carrying
the resourceVersion read, so two replicas racing for the Lease cannot both win.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import random
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from kubernetes.client.exceptions import ApiException

from labeler.errors import TopolabelError

from .kubeapi import Kube

log = logging.getLogger(__name__)

LEASE_NAME = "topolabel-operator"
HELD, OTHER, FAILED = "held", "held by another replica", "failed"


def lease_time() -> str:
    """Now, as a Lease's MicroTime."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def default_identity() -> str:
    """The pod's name (its hostname) and a random part, so a restarted pod is a new holder."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def _guarded(lease: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """A merge patch that writes `spec` only if the Lease is still the version read: the API server checks a
    resourceVersion given in a patch (409 Conflict otherwise), as client-go's Update does."""
    return {"metadata": {"resourceVersion": (lease.get("metadata") or {}).get("resourceVersion")}, "spec": spec}


class LeadershipLost(TopolabelError):
    """The Lease could not be renewed in time, or another replica holds it: this replica must stop writing."""


@dataclass
class Elector:
    kube: Kube
    namespace: str
    name: str = LEASE_NAME
    identity: str = field(default_factory=default_identity)
    duration: float = 15.0
    renew_deadline: float = 10.0
    retry: float = 2.0
    clock: Callable[[], float] = time.monotonic
    _seen: tuple[Any, ...] | None = field(default=None, init=False)
    _seen_at: float = field(default=0.0, init=False)

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{self.name}"

    def try_acquire_or_renew(self) -> str:
        """One attempt (blocking): HELD when this replica holds the Lease now, OTHER when another does."""
        lease = self.kube.get(self.path)
        if lease is None:
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace}, "spec": self._spec({}, "")}
            return self._write(lambda: self.kube.create(self.path.rsplit("/", 1)[0], body))
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, spec.get("renewTime"), spec.get("leaseDurationSeconds"), spec.get("leaseTransitions"))
        if record != self._seen:
            self._seen, self._seen_at = record, self.clock()
        duration = float(spec.get("leaseDurationSeconds") or self.duration)
        if holder and holder != self.identity and self.clock() < self._seen_at + duration:
            return OTHER
        return self._write(lambda: self.kube.merge_patch(self.path, _guarded(lease, self._spec(spec, holder))))

    def _spec(self, spec: dict[str, Any], holder: str) -> dict[str, Any]:
        now = lease_time()
        mine = holder == self.identity
        return {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.duration),
                "acquireTime": spec.get("acquireTime") if mine else now, "renewTime": now,
                "leaseTransitions": int(spec.get("leaseTransitions") or 0) + (0 if mine or not holder else 1)}

    def _write(self, call: Callable[[], Any]) -> str:
        try:
            call()
        except ApiException as exc:
            if exc.status == 409:  # another replica wrote first (resourceVersion or create race)
                return OTHER
            raise
        return HELD

    def release(self) -> None:
        """Give the Lease up (a clean stop), so the standby takes over at once."""
        lease = self.kube.get(self.path)
        spec = (lease or {}).get("spec") or {}
        if lease is None or spec.get("holderIdentity") != self.identity:
            return
        released = {**spec, "holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": lease_time()}
        self.kube.merge_patch(self.path, _guarded(lease, released))

    async def attempt(self, timeout: float) -> str:
        """One attempt in a thread, given up after `timeout` seconds; API errors count as FAILED."""
        try:
            return await asyncio.wait_for(asyncio.to_thread(self.try_acquire_or_renew), timeout)
        except (asyncio.TimeoutError, ApiException, TopolabelError) as exc:
            log.warning("leader election: %s", exc or "no answer in time")
            return FAILED

    async def acquire(self, stopped: Callable[[], bool] = lambda: False) -> bool:
        """Wait until this replica holds the Lease (True), or until `stopped()` (False)."""
        log.info("leader election: waiting for Lease %s/%s as %s", self.namespace, self.name, self.identity)
        while not stopped():
            if await self.attempt(self.retry + self.renew_deadline) == HELD:
                log.info("leader election: holding Lease %s/%s", self.namespace, self.name)
                return True
            await asyncio.sleep(self.retry * random.uniform(1.0, 1.2))
        return False

    async def hold(self) -> str:
        """Renew every `retry` seconds while holding; returns why leadership was lost."""
        renewed = self.clock()
        while True:
            await asyncio.sleep(self.retry)
            left = renewed + self.renew_deadline - self.clock()
            outcome = await self.attempt(max(left, 0.1))
            if outcome == HELD:
                renewed = self.clock()
            elif outcome == OTHER:
                return f"another replica holds Lease {self.namespace}/{self.name}"
            elif self.clock() - renewed > self.renew_deadline:
                return f"Lease {self.namespace}/{self.name} not renewed for {self.renew_deadline:g}s"
