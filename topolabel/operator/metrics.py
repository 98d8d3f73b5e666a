"""Prometheus metrics and the operator's HTTP endpoints: /metrics, /healthz (liveness), /readyz (readiness).

Each operator run has its own registry, so several runs in one process (tests, benchmarks) do not collide.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from aiohttp import web
from prometheus_client import (CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram,
                               disable_created_metrics, generate_latest)

from labeler.topology.isolation import HEALTHY, HELD, ISOLATED, SUSPECT, Decision

from .. import version

log = logging.getLogger(__name__)

# No `_created` series beside every counter and histogram: they double the series count and carry a start
# time Prometheus already knows (process_start_time); kube-state-metrics and client-go's exporters omit them.
disable_created_metrics()

NODE_STATES = ("labelled", "pending", "unplaced", "failed")
HEALTH_STATES = (HEALTHY, SUSPECT, ISOLATED, HELD)


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        reg = self.registry
        self.nodes = Gauge("topolabel_nodes", "Nodes by state: labelled (carries its placement), pending "
                           "(placed, not written yet), unplaced (the source did not place it), failed (write failed)",
                           ["state"], registry=reg)
        self.discovery = Histogram("topolabel_discovery_duration_seconds", "Time a source took to answer",
                                   ["source", "scope"], registry=reg,
                                   buckets=(0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300))
        self.api_calls = Counter("topolabel_api_calls_total", "Kubernetes API calls made, by Kubernetes verb (get, "
                                 "list, create, patch, apply, delete), resource and HTTP status code",
                                 ["verb", "resource", "code"], registry=reg)
        self.errors = Counter("topolabel_errors_total", "Errors by kind (source, config, labels, kueue, status, health, "
                              "capacity)", ["kind"], registry=reg)
        self.node_writes = Counter("topolabel_node_writes_total", "Node label patches that succeeded", registry=reg)
        self.kueue_writes = Counter("topolabel_kueue_writes_total", "Kueue object writes", ["kind", "verb"],
                                    registry=reg)
        self.syncs = Counter("topolabel_syncs_total", "Reconcile passes finished: full (resync), nodes (events) or retry (failed writes)",
                             ["scope"], registry=reg)
        self.drift = Gauge("topolabel_drift_nodes", "Nodes whose topology labels differed from the last full "
                           "discovery before it corrected them (stale labels)", registry=reg)
        self.last_sync = Gauge("topolabel_last_sync_timestamp_seconds", "When the last full resync finished",
                               registry=reg)
        self.fabric_nodes = Gauge("topolabel_fabric_nodes", "Nodes by fabric health: healthy, suspect (bad "
                                  "observations, not yet degraded), isolated, held (degraded; the brake kept them in)",
                                  ["state"], registry=reg)
        self.fabric_isolated = Gauge("topolabel_fabric_isolated_nodes", "Isolated nodes by what took them out: "
                                     "node (its own evidence), leaf (its leaf lost its uplinks), or the level of a "
                                     "quarantined domain", ["scope"], registry=reg)
        self.fabric_domains = Gauge("topolabel_fabric_quarantined_domains", "Quarantined domains per level",
                                    ["level"], registry=reg)
        self.brake_refusals = Counter("topolabel_fabric_brake_refusals_total", "Passes in which the brake refused "
                                      "to isolate more nodes", registry=reg)
        self.build_info = Gauge("topolabel_build_info", "Always 1; the version of the running operator",
                                ["version"], registry=reg)
        self.build_info.labels(version=version.current()).set(1)
        self.capacity_up = Gauge("topolabel_capacity_up", "1 when the capacity metrics are current (the last full "
                                 "pass could read pods, Workloads and Kueue objects), else 0", registry=reg)
        self.capacity_free = Gauge("topolabel_capacity_free", "Per TAS flavor, Topology level and resource: the most "
                                   "of the resource free in one domain of the level, as Kueue's TAS counts it",
                                   ["flavor", "level", "resource"], registry=reg)
        self.capacity_free_domains = Gauge("topolabel_capacity_free_domains", "Per TAS flavor, level and resource: "
                                           "domains with all of the resource free", ["flavor", "level", "resource"],
                                           registry=reg)
        self.capacity_domain_free = Gauge("topolabel_capacity_domain_free", "Per TAS flavor and resource: what is "
                                          "free in each top-level domain (at most 64 domains per flavor)",
                                          ["flavor", "domain", "resource"], registry=reg)
        for state in NODE_STATES:
            self.nodes.labels(state=state).set(0)

    def set_node_states(self, counts: dict[str, int]) -> None:
        for state in NODE_STATES:
            self.nodes.labels(state=state).set(counts.get(state, 0))

    def set_capacity(self, rooms: Iterable[Any], max_top: int) -> None:
        """Replace the capacity series with these (`slots.FreeRoom`s): gone flavors and domains disappear."""
        for gauge in (self.capacity_free, self.capacity_free_domains, self.capacity_domain_free):
            gauge.clear()
        for room in rooms:
            for lv in room.levels:
                self.capacity_free.labels(flavor=room.flavor, level=lv.level, resource=room.resource).set(lv.largest)
                self.capacity_free_domains.labels(flavor=room.flavor, level=lv.level,
                                                  resource=room.resource).set(lv.whole)
            for domain, free in sorted(room.top.items(), key=lambda kv: (-kv[1], kv[0]))[:max_top]:
                self.capacity_domain_free.labels(flavor=room.flavor, domain=domain, resource=room.resource).set(free)
        self.capacity_up.set(1)

    def set_health(self, decision: Decision | None) -> None:
        """The fabric health gauges from a pass's decision (None: health is off, every gauge cleared)."""
        for gauge in (self.fabric_nodes, self.fabric_isolated, self.fabric_domains):
            gauge.clear()
        if decision is None:
            return
        for state in HEALTH_STATES:
            self.fabric_nodes.labels(state=state).set(len(decision.names(state)))
        for scope, count in decision.by_scope().items():
            self.fabric_isolated.labels(scope=scope).set(count)
        levels: dict[str, int] = {}
        for q in decision.quarantined:
            levels[q.level] = levels.get(q.level, 0) + 1
        for level, count in levels.items():
            self.fabric_domains.labels(level=level).set(count)
        if decision.refused:
            self.brake_refusals.inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


@dataclass
class Health:
    """What the probes answer.

    Alive while the reconcile loop turns and the API server answers: calls failing for longer than
    `api_grace` (2 x the request timeout) with no success between make /healthz fail, so a wedged client is
    restarted. Ready once the first full pass is done with a valid config; a standby (waiting for the leader
    Lease) is alive and ready, since waiting is its whole job and a rollout must not stall on it.
    """

    stale_after: float
    api_grace: float = 40.0
    heartbeat: float = field(default_factory=time.monotonic)
    ready: bool = False
    standby: bool = False
    loop_done: Callable[[], bool] = lambda: False
    configured: Callable[[], bool] = lambda: False
    failing_since: Callable[[], float | None] = lambda: None

    def beat(self) -> None:
        self.heartbeat = time.monotonic()

    def alive(self) -> tuple[bool, str]:
        since = self.failing_since()
        if since is not None and time.monotonic() - since > self.api_grace:
            return False, f"calls to the API server have failed for {time.monotonic() - since:.0f}s"
        if self.standby:
            return True, "ok (standby)"
        if self.loop_done():
            return False, "the reconcile loop has stopped"
        age = time.monotonic() - self.heartbeat
        if age > self.stale_after:
            return False, f"the reconcile loop has not turned for {age:.0f}s"
        return True, "ok"

    def readiness(self) -> tuple[bool, str]:
        alive, why = self.alive()
        if not alive:
            return False, why
        if self.standby:
            return True, "standby: another replica holds the leader Lease"
        if not self.ready:
            return False, "no full pass yet"
        if not self.configured():
            return False, "no valid config (see the TopologyLabeler's SourceAvailable condition)"
        return True, "ready"


async def serve(metrics: Metrics, health: Health, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start the HTTP endpoints; returns the runner (to stop it) and the port actually bound."""

    async def get_metrics(_: web.Request) -> web.Response:
        return web.Response(body=metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_: web.Request) -> web.Response:
        ok, why = health.alive()
        return web.Response(text=why + "\n", status=200 if ok else 500)

    async def readyz(_: web.Request) -> web.Response:
        ok, why = health.readiness()
        return web.Response(text=why + "\n" if ok else f"not ready: {why}\n", status=200 if ok else 503)

    app = web.Application()
    app.router.add_get("/metrics", get_metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1] if runner.addresses else port  # port 0: the one the system chose
    log.info("serving /metrics, /healthz and /readyz on http://%s:%d", host, bound)
    return runner, bound
