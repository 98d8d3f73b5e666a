"""The kopf wiring: login from the same kubeconfig as the CLI, Node events, startup and cleanup.

Nodes are only watched: an `on.event` handler keeps the operator's node cache current and wakes the
reconcile loop. kopf's `on.create`/`on.update` handlers would write a last-handled-configuration annotation
onto every Node, and timers or daemons a finalizer; neither is used. Nor is a kopf index: until its first
listing is indexed, kopf gates every object's worker on a condition that each new object notifies, which
costs O(N^2) and kept a CPU busy for minutes at 10,000 nodes; the cache below does the index's job without it.
The periodic resync is an asyncio task started at startup. Each run has its own registry, so several
operators can run in one process (tests).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf
from kubernetes import client

from labeler.cluster.kube import connect
from labeler.cluster.timeouts import Timeouts
from labeler.errors import InputError
from labeler.io.nodes import Node

from ..pipeline import read_config
from .controller import Controller
from .kubeapi import Kube
from .leader import Elector, LeadershipLost
from .metrics import Health, Metrics, serve
from .settings import RunOptions
from .status import GROUP, PLURAL, VERSION

log = logging.getLogger(__name__)

POOL_SIZE = 256  # HTTP connections kept: label patches run apply.concurrency (at most 256) at once


def connection_info(configuration: client.Configuration) -> kopf.ConnectionInfo:
    """kopf's credentials from the kubernetes client's configuration (read again on every login)."""
    header = (configuration.get_api_key_with_prefix("BearerToken")
              or configuration.get_api_key_with_prefix("authorization"))
    parts = header.split(" ", 1) if header else []
    scheme, token = (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0] if parts else None)
    return kopf.ConnectionInfo(server=configuration.host, ca_path=configuration.ssl_ca_cert,
                               insecure=not configuration.verify_ssl, username=configuration.username or None,
                               password=configuration.password or None, scheme=scheme, token=token,
                               certificate_path=configuration.cert_file, private_key_path=configuration.key_file)


def kopf_settings(timeouts: Timeouts) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.scanning.disabled = True  # the CRDs come with the manifests; no CRD or namespace watching
    settings.posting.enabled = False  # the operator posts its own Events (kopf's need a handler context)
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = timeouts.connect
    settings.networking.connect_timeout = timeouts.connect
    # Memory at 10,000 nodes: kopf lists every node when its watch starts and runs a worker per node for
    # the burst of initial events. Listed in pages, with idle workers gone after half a second (default 5 s),
    # the burst takes tens of MB instead of 170.
    settings.watching.chunk_size = 500
    settings.queueing.idle_timeout = 0.5
    return settings


class Operator:
    """One operator run: its metrics, health, HTTP port, the leader Lease (with leader election) and, once it
    holds it, kopf and the reconcile loop."""

    def __init__(self, opts: RunOptions) -> None:
        read_config(opts.config_path)  # a broken config file stops the start, with the file's error
        self.opts = opts
        self.metrics = Metrics()
        self.kube = Kube(connect(opts.kubeconfig, opts.context, POOL_SIZE, opts.timeouts), self.metrics)
        self.health = Health(stale_after=opts.resync + opts.source_timeout + 300, api_grace=2 * opts.timeouts.read,
                             failing_since=lambda: self.kube.failing_since)
        self.elector = Elector(connect(opts.kubeconfig, opts.context, 4, opts.timeouts),
                               opts.namespace) if opts.leader_election else None
        self.controller: Controller | None = None
        self.port = 0
        self._task: asyncio.Task[None] | None = None
        self._http: Any = None

    async def run(self, stop_flag: Any = None, ready_flag: Any = None) -> None:
        """Serve the probes, wait for the Lease (with leader election), then work until stopped (a signal, or
        `stop_flag` set). Raises `LeadershipLost` when the Lease slips away: the caller must exit at once."""
        try:
            self._http, self.port = await serve(self.metrics, self.health, self.opts.http_host, self.opts.http_port)
        except OSError as exc:
            raise InputError(f"cannot serve http on {self.opts.http_host}:{self.opts.http_port}: {exc}") from None
        try:
            await self._lead(stop_flag, ready_flag)
        finally:
            await self._http.cleanup()

    async def _lead(self, stop_flag: Any, ready_flag: Any) -> None:
        work = kopf.operator(registry=self.registry(), settings=kopf_settings(self.opts.timeouts), clusterwide=True,
                             standalone=True, stop_flag=stop_flag, ready_flag=ready_flag)
        if self.elector is None:
            await work
            return
        self.health.standby = True
        if not await self.elector.acquire(lambda: _is_set(stop_flag)):
            work.close()
            return
        self.health.standby = False
        running, lost = asyncio.create_task(work), asyncio.create_task(self.elector.hold())
        reason = None
        try:
            await asyncio.wait({running, lost}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if lost.done() and not lost.cancelled() and lost.exception() is None:
                reason = lost.result()
            for task in (running, lost):
                task.cancel()
            await asyncio.gather(running, lost, return_exceptions=True)
            if reason is None:  # a clean stop: hand the Lease over at once
                await self.elector.release()
        if reason is not None:
            raise LeadershipLost(f"{reason}; stopping so that only one replica writes")
        running.result()

    def registry(self) -> kopf.OperatorRegistry:
        registry = kopf.OperatorRegistry()
        opts = self.opts

        @kopf.on.login(id="login", registry=registry)
        def login(**_: Any) -> kopf.ConnectionInfo:
            return connection_info(connect(opts.kubeconfig, opts.context, timeouts=opts.timeouts).configuration)

        # Event handlers are coroutines: kopf runs plain functions in threads, and the controller's state
        # belongs to the event loop.
        @kopf.on.event("v1", "nodes", id="node", registry=registry)
        async def node_event(type: str, event: Any, **_: Any) -> None:
            if self.controller is not None:
                self.controller.node_event(Node.from_object(event["object"]), deleted=type == "DELETED")

        @kopf.on.event(GROUP, VERSION, PLURAL, id="topologylabeler", registry=registry)
        async def labeler_event(type: str, name: str, event: Any, **_: Any) -> None:
            if self.controller is not None and name == opts.name:
                self.controller.resource_event(None if type == "DELETED" else event["object"])

        @kopf.on.startup(id="start", registry=registry)
        async def startup(**_: Any) -> None:
            self.controller = Controller(opts, self.kube, self.metrics, self.health)
            self.health.configured = lambda: self.controller is not None and self.controller.settings is not None
            await self.controller.prepare()  # kopf starts its watches once this handler returns
            self._task = asyncio.create_task(self.controller.run(), name="topolabel reconcile loop")
            self.health.loop_done = self._task.done

        @kopf.on.cleanup(id="stop", registry=registry)
        async def cleanup(**_: Any) -> None:
            if self._task is not None:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)

        return registry


def _is_set(flag: Any) -> bool:
    """Whether a stop flag (None, a threading.Event, an asyncio.Event or Future) says stop."""
    if flag is None:
        return False
    return flag.done() if hasattr(flag, "done") else flag.is_set()

