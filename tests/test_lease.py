"""Leader election (labeler.cluster.lease) on the real API server: one holder, takeover only after the holder stopped
renewing for the lease's duration, an immediate handover on release, stale writes refused by
resourceVersion, and renewTime never compared with a local clock."""

from __future__ import annotations

import datetime
import threading
import time
import uuid
from typing import Any, Iterator

import pytest
from kubernetes.client.exceptions import ApiException

import labeler.cluster.lease as lease_module
from labeler.cluster.kube import request_json
from labeler.cluster.lease import Keeper, Lease, micro_time
from testkit.ibcluster import name, scratch_api  # noqa: F401 (fixtures)
from testkit.kubecluster import kube_cluster  # noqa: F401

pytestmark = pytest.mark.slow
NS = "topolabel-lease-test"


@pytest.fixture
def api(scratch_api: Any) -> Any:
    return scratch_api


def read(api: Any, name: str) -> dict[str, Any]:
    return request_json(api, "GET", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{name}")["spec"]


def poll_until_acquired(contender: Lease, limit: float) -> float:
    """Try every 0.1 s; the seconds it took to acquire (fails after `limit`)."""
    start = time.monotonic()
    while not contender.try_acquire():
        assert time.monotonic() - start < limit, f"not acquired within {limit}s; holder {contender.holder}"
        time.sleep(0.1)
    return time.monotonic() - start


def test_one_holder_then_takeover_a_duration_after_renewals_stop(api: Any, name: str) -> None:
    a = Lease(api, NS, name, "a", duration=2)
    b = Lease(api, NS, name, "b", duration=2)
    assert a.try_acquire() and a.held
    spec = read(api, name)
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == ("a", 2, 0)
    deadline = time.monotonic() + 4  # two lease durations: a keeps renewing, b never gets it
    while time.monotonic() < deadline:
        assert a.try_acquire()
        last_renewal = time.monotonic()
        assert not b.try_acquire() and b.holder == "a" and not b.held
        time.sleep(0.3)
    # a stops renewing (as if its process died): b takes over the lease's duration after a's last renewal
    poll_until_acquired(b, 5)
    since = time.monotonic() - last_renewal
    assert 2.0 <= since <= 3.0, since
    assert b.held and not a.held  # a's renew deadline (2/3 of the duration) passed long before
    spec = read(api, name)
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)
    assert not a.try_acquire() and a.holder == "b"


def test_release_hands_over_at_the_next_attempt(api: Any, name: str) -> None:
    a, b = Lease(api, NS, name, "a", duration=30), Lease(api, NS, name, "b", duration=30)
    assert a.try_acquire() and not b.try_acquire()
    a.release()
    assert not a.held and read(api, name).get("holderIdentity") is None
    assert b.try_acquire() and b.held  # no 30 s wait


def test_a_write_based_on_a_stale_read_loses(api: Any, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """b reads the expired Lease, a takes it between b's read and b's write: b's update carries the old
    resourceVersion, the server answers 409, and b does not think it holds the Lease."""
    dead = Lease(api, NS, name, "dead", duration=1)
    assert dead.try_acquire()
    a, b = Lease(api, NS, name, "a", duration=1), Lease(api, NS, name, "b", duration=1)
    assert not a.try_acquire() and not b.try_acquire()  # both start watching the record
    time.sleep(1.2)
    real = lease_module.request_json
    statuses = []

    def racing(api_: Any, method: str, path: str, **kw: Any) -> Any:
        if method == "PUT" and kw["body"]["spec"]["holderIdentity"] == "b" and not statuses:
            statuses.append(a.try_acquire())  # a wins in between
        try:
            return real(api_, method, path, **kw)
        except ApiException as exc:
            statuses.append(exc.status)
            raise

    monkeypatch.setattr(lease_module, "request_json", racing)
    assert not b.try_acquire()
    assert statuses == [True, 409] and not b.held and a.held
    assert read(api, name)["holderIdentity"] == "a"


def test_concurrent_contenders_never_both_win(api: Any) -> None:
    for _ in range(5):
        name = f"race-{uuid.uuid4().hex[:8]}"
        contenders = [Lease(api, NS, name, f"c{i}", duration=5) for i in range(4)]
        barrier = threading.Barrier(len(contenders))
        won = []

        def go(lease: Lease) -> None:
            barrier.wait()
            if lease.try_acquire():
                won.append(lease.identity)

        threads = [threading.Thread(target=go, args=(c,)) for c in contenders]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert len(won) == 1 and read(api, name)["holderIdentity"] == won[0]


@pytest.mark.parametrize("skew", [-3600, 3600])
def test_renew_time_from_a_skewed_clock_is_never_compared(api: Any, name: str, skew: int) -> None:
    """A holder whose clock is an hour off writes renewTime an hour off; it is neither taken over at once (an
    hour in the past) nor kept for ever (an hour ahead): the contender times the lease on its own clock."""
    when = micro_time(datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=skew))
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
            "spec": {"holderIdentity": "skewed", "leaseDurationSeconds": 2, "acquireTime": when, "renewTime": when}}
    request_json(api, "POST", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases", body=body)
    b = Lease(api, NS, name, "b", duration=2)
    assert not b.try_acquire() and b.holder == "skewed"
    assert 1.9 <= poll_until_acquired(b, 5) <= 3.0


@pytest.fixture
def keepers() -> Iterator[list[Keeper]]:
    started: list[Keeper] = []
    yield started
    for keeper in started:
        keeper.stop()


def test_keeper_holds_the_lease_through_long_work(api: Any, name: str, keepers: list[Keeper]) -> None:
    changes: list[bool] = []
    a = Keeper(Lease(api, NS, name, "a", duration=2), retry=0.3, on_change=changes.append).start()
    keepers.append(a)
    deadline = time.monotonic() + 5
    while not a.held:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    b = Lease(api, NS, name, "b", duration=2)
    end = time.monotonic() + 5  # 2.5 durations of "work" on the main thread; the keeper renews meanwhile
    while time.monotonic() < end:
        assert not b.try_acquire()
        time.sleep(0.2)
    assert a.held and changes == [True]
    a.stop(release=True)
    assert changes == [True, False] and b.try_acquire()
