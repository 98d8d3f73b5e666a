"""Leader election with a coordination.k8s.io/v1 Lease: one holder at a time, taken over when it stops renewing.

The Lease is written the way Kubernetes' own components (client-go's leaderelection) write theirs, so
`kubectl get lease` reads the same: spec.holderIdentity, leaseDurationSeconds, acquireTime, renewTime,
leaseTransitions. Every write is an update that carries the resourceVersion just read, so of two
contenders racing for one Lease exactly one wins; the other gets 409 Conflict and stays a follower.

Safe against clock skew: no one compares renewTime with their own clock. A contender notes, on its own
monotonic clock, when it last saw the Lease record change, and treats the Lease as expired once it has not
changed for leaseDurationSeconds since. The holder counts itself leader only while its last successful
renewal, timed from before the request was sent, is younger than `renew_deadline` (less than the duration),
so it stops acting before anyone may take over.

`Lease` makes one attempt per call and never sleeps; `Keeper` holds one from a background thread, so work
that takes longer than the lease (a discovery) does not lose it.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from typing import Any, Callable

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from ..errors import KubeUnreachable
from .kube import api_error, request_json

log = logging.getLogger(__name__)

API = "coordination.k8s.io/v1"


def micro_time(now: datetime.datetime | None = None) -> str:
    """A MicroTime as the API server writes it: RFC 3339, UTC, microseconds."""
    return (now or datetime.datetime.now(datetime.timezone.utc)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Lease:
    """One Lease, one identity. `try_acquire()` creates, renews or takes over the Lease (one attempt);
    `held` says whether this identity may act as its holder now; `release()` hands it over at once."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str, identity: str, duration: float = 15.0,
                 renew_deadline: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        if not duration >= 1:
            raise ValueError("a lease lasts at least one second")
        self.api, self.namespace, self.name, self.identity = api, namespace, name, identity
        self.duration = duration
        self.renew_deadline = renew_deadline if renew_deadline is not None else duration * 2 / 3
        self.clock = clock
        self.timeout = max(1.0, min(5.0, self.renew_deadline / 2))  # one call must not outlast the deadline
        self.holder: str | None = None  # as last observed
        self.renewed_at = float("-inf")  # when our last successful write was sent (our clock)
        self._record: tuple[Any, ...] | None = None  # the holder's record as last observed
        self._observed_at = float("-inf")  # when that record last changed (our clock)
        self._object: dict[str, Any] | None = None

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{self.name}"

    @property
    def held(self) -> bool:
        return self.holder == self.identity and self.clock() - self.renewed_at < self.renew_deadline

    def try_acquire(self) -> bool:
        """Create, renew or take over the Lease; True when this identity holds it afterwards.

        API errors propagate (the caller retries on its schedule); a lost race is just False.
        """
        started = self.clock()
        try:
            current = request_json(self.api, "GET", self.path, timeout=self.timeout)
        except ApiException as exc:
            if exc.status != 404:
                raise
            return self._create(started)
        self._observe(current)
        spec = current.get("spec") or {}
        holder = spec.get("holderIdentity") or None
        if holder not in (None, self.identity) and not self._expired(spec):
            return False
        return self._update(current, started, takeover=holder != self.identity)

    def release(self) -> None:
        """Give the Lease up now (when held), so a follower takes it at its next attempt, not a duration later."""
        if not self.held or self._object is None:
            return
        body = dict(self._object)
        body["spec"] = {**body.get("spec", {}), "holderIdentity": None, "leaseDurationSeconds": 1,
                        "renewTime": micro_time()}
        try:
            request_json(self.api, "PUT", self.path, body=body, timeout=self.timeout)
        except (ApiException, HTTPError, KubeUnreachable) as exc:
            log.warning("could not release lease %s/%s: %s", self.namespace, self.name, _reason(exc))
        self.holder, self.renewed_at = None, float("-inf")

    def _create(self, started: float) -> bool:
        now = micro_time()
        body = {"apiVersion": API, "kind": "Lease", "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": _seconds(self.duration),
                         "acquireTime": now, "renewTime": now, "leaseTransitions": 0}}
        try:
            created = request_json(self.api, "POST", self.path.rsplit("/", 1)[0], body=body, timeout=self.timeout)
        except ApiException as exc:
            if exc.status == 409:  # another contender created it first
                return False
            raise
        self._won(created, started)
        return True

    def _update(self, current: dict[str, Any], started: float, takeover: bool) -> bool:
        spec = dict(current.get("spec") or {})
        now = micro_time()
        spec.update(holderIdentity=self.identity, leaseDurationSeconds=_seconds(self.duration), renewTime=now)
        if takeover:
            spec.update(acquireTime=now, leaseTransitions=int(spec.get("leaseTransitions") or 0) + 1)
        body = {**current, "spec": spec}  # metadata.resourceVersion as read: a concurrent write makes this 409
        try:
            updated = request_json(self.api, "PUT", self.path, body=body, timeout=self.timeout)
        except ApiException as exc:
            if exc.status == 409:
                if not takeover:
                    self.holder = None  # someone else wrote it while we held it: we are not sure we still do
                return False
            raise
        self._won(updated, started)
        return True

    def _won(self, obj: dict[str, Any], started: float) -> None:
        self._object = obj
        self.holder, self.renewed_at = self.identity, started
        self._observe(obj)

    def _observe(self, obj: dict[str, Any]) -> None:
        spec = obj.get("spec") or {}
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseTransitions"),
                  (obj.get("metadata") or {}).get("resourceVersion"))
        if record != self._record:
            self._record, self._observed_at = record, self.clock()
        self.holder = spec.get("holderIdentity") or None
        if self.holder != self.identity:
            self.renewed_at = float("-inf")

    def _expired(self, spec: dict[str, Any]) -> bool:
        """No change seen for the holder's own leaseDurationSeconds, timed on our clock."""
        return self.clock() - self._observed_at >= float(spec.get("leaseDurationSeconds") or self.duration)


class Keeper:
    """Holds a Lease from a daemon thread: an attempt every `retry` seconds (acquire when free or expired,
    renew while held). `held` is the Lease's own answer, so it turns False by itself when renewals fail."""

    def __init__(self, lease: Lease, retry: float | None = None,
                 on_change: Callable[[bool], None] | None = None) -> None:
        self.lease = lease
        self.retry = retry if retry is not None else lease.duration / 6
        self.on_change = on_change
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease {lease.name}", daemon=True)
        self._was_held = False

    @property
    def held(self) -> bool:
        return self.lease.held

    def start(self) -> "Keeper":
        self._thread.start()
        return self

    def stop(self, release: bool = True) -> None:
        """Stop trying; with `release`, hand the Lease over at once instead of letting it expire."""
        self._stop.set()
        self._thread.join(self.lease.timeout * 2 + self.retry)
        if release:
            self.lease.release()
        self._changed()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.lease.try_acquire()
            except (ApiException, HTTPError, KubeUnreachable) as exc:
                log.warning("lease %s/%s: %s", self.lease.namespace, self.lease.name, _reason(exc))
            self._changed()
            self._stop.wait(self.retry)

    def _changed(self) -> None:
        held = self.lease.held
        if held != self._was_held:
            self._was_held = held
            log.info("lease %s/%s: %s", self.lease.namespace, self.lease.name,
                     "acquired" if held else f"not held (holder: {self.lease.holder or 'none'})")
            if self.on_change is not None:
                self.on_change(held)


def _seconds(duration: float) -> int:
    return max(1, round(duration))


def _reason(exc: Exception) -> str:
    return api_error(exc) if isinstance(exc, ApiException) else f"{type(exc).__name__}: {exc}"
