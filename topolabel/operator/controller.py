"""The reconcile loop: place joining nodes within seconds, resync everything on an interval.

One asyncio task does all the work, so a full pass and a node pass never overlap; kopf's handlers only
record what changed and wake it. Blocking work (sources, patches, Kueue and status calls) runs in threads.

A full pass runs the source over every node, checks the plan against `plan.maxChangeFraction`, adopts the
answer as the last good topology, writes what changed and verifies the Kueue objects against the server.
A node pass (after a node event) places joining nodes (per-node sources answer for them alone; fabric
sources' last discovery may already know them) and writes only the nodes the events touched.

With `health.enabled`, every full pass also judges fabric health (`health.HealthKeeper`): one observation per
pass, written as the nodes' FabricHealthy condition and, where configured, a taint.

A failed write (a node's labels, a Kueue object, the status) is retried by a retry pass with backoff
(`backoff.Backoff`: 1 s doubling to 5 min). A LocalQueue whose namespace does not exist yet is written within
NAMESPACE_POLL seconds of the namespace appearing: until then a retry pass only asks whether it exists.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from typing import Any, Mapping

from kubernetes.client.exceptions import ApiException

from kueue_config.objects import generate
from labeler.cluster.apply import apply_plan
from labeler.cluster.kube import api_error
from labeler.errors import PlanRefused, SourceError, StaleInput, TopolabelError
from labeler.io.nodes import Node
from labeler.progress import Progress, quiet
from labeler.settings.config import Config
from labeler.topology.model import Discovery, Ownership, Problem, Snapshot
from labeler.topology.names import KUEUE_API_VERSION
from labeler.topology.plan import NodeChange, Plan, check_share
from labeler.topology.verify import label_drift, stale

from .. import version
from ..pipeline import run_source
from ..progress import logged
from .backoff import Backoff
from .health import HealthKeeper, HealthReport
from .capacity import CapacityMetrics
from .kubeapi import Kube
from .kueue import KueueSync
from .labelling import Labeller
from .metrics import Health, Metrics
from .settings import RunOptions, Settings, resolve
from .status import Condition, Conditions, Reporter, resource_path, status_body
from .topology import Topology

log = logging.getLogger(__name__)
PASS_PROGRESS = logged(log, every=10.0)  # a full pass's discovery and writes, logged at most every 10 s

HEARTBEAT = 10.0  # the loop wakes at least this often, so liveness sees it turn
LOGGED_NODES = 20  # per pass and outcome; the status and Events count them all
JOINED, CHANGED = "Joined", "Changed"
WORDS = {JOINED: "joining", CHANGED: "changed"}
FULL_GAP = 5.0  # least time between a finished full pass and one asked for early
NAMESPACE_POLL = 2.0  # how often to ask whether a namespace a LocalQueue waits for exists (one GET each)


class SourceTimeout(SourceError):
    """The source did not answer within --source-timeout."""


class Controller:
    def __init__(self, opts: RunOptions, kube: Kube, metrics: Metrics, health: Health) -> None:
        self.opts = opts
        self.kube = kube
        self.metrics = metrics
        self.health = health
        self.cache: dict[str, Node] = {}  # every node: a full pass's list, kept current by node events
        self.asked: dict[str, Node] = {}  # every node as the source last saw it (in a full pass or on joining)
        self.reporter = Reporter(kube, metrics, opts.name)
        self.conditions = Conditions()
        self.topology = Topology()
        self.labeller = Labeller()
        self.kueue = KueueSync(kube)
        self.capacity = CapacityMetrics(kube, metrics) if opts.capacity_metrics else None
        self.fabric_health = HealthKeeper(kube, metrics)
        self.health_report = HealthReport()
        self.spec: dict[str, Any] | None = None  # the TopologyLabeler's spec; None: there is none
        self.configured = False
        self.settings: Settings | None = None
        self.generation: int | None = None  # of the spec `settings` came from (None: the file and flags)
        self.dirty: set[str] = set()
        self.gone: set[str] = set()
        self.wake = asyncio.Event()
        self.full_at = 0.0  # loop time of the next full pass
        self.full_done = 0.0
        self.refused: str | None = None
        self.running: asyncio.Future[Discovery] | None = None
        self.join_problems: dict[str, Problem] = {}
        self.unannounced: list[Condition] = []
        self.backoff = Backoff()
        self.retry_at = math.inf  # loop time of the next retry pass (inf: nothing to retry)
        self.kueue_failed = False  # the last Kueue sync left objects unwritten (worth retrying)
        self.unplaced: dict[str, str] = {}  # nodes logged as left unplaced, with why (logged again when it changes)

    # --- called from kopf handlers (on the loop, never blocking) ---

    def node_event(self, node: Node, deleted: bool) -> None:
        if deleted:
            self.cache.pop(node.name, None)
            self.asked.pop(node.name, None)
            self.labeller.forget(node.name)
            self.gone.add(node.name)
        else:
            self.cache[node.name] = node
            self.labeller.observe(node)
        self.dirty.add(node.name)
        self.wake.set()

    def resource_event(self, body: Mapping[str, Any] | None) -> None:
        """The TopologyLabeler appeared, changed, or went away (None): its spec is the config."""
        if _uid(body) != _uid(self.reporter.resource):
            self.reporter.written = None
        self.reporter.resource = body
        spec = None if body is None else dict(body.get("spec") or {})
        if spec != self.spec or not self.configured:
            self.spec = spec
            self.reconfigure()
            self.request_full()

    def reconfigure(self) -> None:
        """New settings from the spec (or file) and flags. A bad config keeps the previous settings, and
        `ConfigValid` stays false, saying so, until a config is good again."""
        self.configured = True
        generation = _generation(self.reporter.resource) if self.spec is not None else None
        try:
            self.settings = resolve(self.opts, self.spec)
        except TopolabelError as exc:
            self.metrics.errors.labels(kind="config").inc()
            self.announce("ConfigValid", False, "ConfigInvalid", f"{exc}; {self.kept()}")
            return
        self.generation = generation
        self.reporter.source = self.settings.source.name
        self.announce("ConfigValid", True, "Valid", f"{self.settings.origin}"
                      + (f", generation {generation}" if generation is not None else "")
                      + f": source {self.settings.source.name}")

    def kept(self) -> str:
        """What the operator goes on with while the config is invalid."""
        if self.settings is None:
            return "nothing is labelled until it is fixed"
        since = f" (generation {self.generation})" if self.generation is not None else ""
        return (f"still working with the last valid config, from {self.settings.origin}{since}, "
                f"source {self.settings.source.name}")

    def announce(self, type_: str, ok: bool, reason: str, message: str) -> None:
        """Set a condition from a handler; the Event it makes is posted by the next pass (handlers must not
        block)."""
        cond = self.conditions.set(type_, ok, reason, message)
        if cond:
            self.unannounced.append(cond)

    def request_full(self, soon: bool = False) -> None:
        """Ask for a full pass now, or (soon) no earlier than FULL_GAP after the last one."""
        loop = asyncio.get_running_loop()
        self.full_at = min(self.full_at, self.full_done + FULL_GAP if soon else loop.time())
        self.wake.set()

    # --- the loop ---

    async def prepare(self) -> None:
        """Read the TopologyLabeler, then the first full pass. The operator runs this before kopf starts
        watching, so the first labelling does not share the CPU with kopf's initial burst of node events
        (which then show nodes already labelled)."""
        loop = asyncio.get_running_loop()
        await self.startup()
        settings = self.settings
        log.info("topolabel %s: config from %s, source %s; resync every %.0fs", version.current(),
                 settings.origin if settings else "nowhere valid (see the ConfigValid condition)",
                 settings.source.name if settings else "none", self.opts.resync,
                 extra={"reason": "Started", "source": settings.source.name if settings else None})
        self.full_at = loop.time() + self.opts.resync
        await self.guarded("full", self.full_pass)
        self.full_done = loop.time()

    async def run(self) -> None:
        """The loop, after `prepare`: node passes on events, full passes on the interval or on request, retry
        passes when a write failed."""
        loop = asyncio.get_running_loop()
        while True:
            self.health.beat()
            delay = min(self.full_at, self.retry_at) - loop.time()
            if delay > 0 and not self.dirty:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), min(delay, HEARTBEAT))
            self.wake.clear()
            if loop.time() >= self.full_at:
                self.full_at = loop.time() + self.opts.resync
                await self.guarded("full", self.full_pass)
                self.full_done = loop.time()
            elif self.dirty:
                await asyncio.sleep(self.opts.debounce)  # let a burst of joins arrive together
                await self.guarded("nodes", self.node_pass)
            elif loop.time() >= self.retry_at:
                self.retry_at = math.inf
                await self.guarded("retry", self.retry_pass)
            self.schedule_retry()

    def failing_writes(self) -> bool:
        """Whether a write the last passes made failed and is worth retrying."""
        return bool(self.labeller.failed) or self.kueue_failed or self.reporter.failed

    def schedule_retry(self) -> None:
        """After a pass: a retry with backoff while writes fail (one already due stays due), none once they
        succeed."""
        if not self.failing_writes():
            self.backoff.reset()
            self.retry_at = math.inf
        elif self.retry_at == math.inf:
            delay = self.backoff.next()
            self.retry_at = asyncio.get_running_loop().time() + delay
            log.info("retrying failed writes in %.1fs", delay, extra={"reason": "RetryScheduled"})

    async def startup(self) -> None:
        """Read the TopologyLabeler once (its events may come after the first pass)."""
        try:
            body = await asyncio.to_thread(self.kube.get, resource_path(self.opts.name))
        except ApiException as exc:
            log.warning("cannot read TopologyLabeler %s (%s); using the config file and flags",
                        self.opts.name, api_error(exc), extra={"reason": "ResourceUnreadable"})
            body = None
        self.resource_event(body)

    async def guarded(self, scope: str, step: Any) -> None:
        """One pass; an unexpected error is logged and counted, and the loop goes on."""
        try:
            await step()
        except Exception:  # noqa: BLE001 - the loop must outlive a bug in one pass
            self.metrics.errors.labels(kind="internal").inc()
            log.exception("the %s pass failed", scope, extra={"reason": "PassFailed"})
        self.metrics.syncs.labels(scope=scope).inc()

    def nodes(self) -> dict[str, Node]:
        return dict(self.cache)

    async def list_nodes(self) -> dict[str, Node]:
        """Every node, read from the server; it also resets the cache, less nodes deleted meanwhile."""
        self.gone.clear()
        listed = {n.name: n for n in await asyncio.to_thread(self.kube.list_nodes)}
        for name in self.gone:
            listed.pop(name, None)
        self.cache = dict(listed)
        return listed

    # --- passes ---

    async def full_pass(self) -> None:
        started = asyncio.get_running_loop().time()
        self.dirty.clear()
        nodes = await self.list_nodes()
        self.join_problems.clear()
        self.asked = dict(nodes)
        settings = self.settings
        plan = await self.rediscover(settings, nodes) if settings else None
        snapshot = self.topology.snapshot
        if settings and snapshot:
            plan = plan or self.labeller.full_plan(snapshot, nodes.values(), settings.cfg.ownership())
            await self.write(plan, settings.cfg, PASS_PROGRESS)
            await self.sync_kueue(settings, nodes, verify=True)
        if settings:
            await self.judge_health(settings, nodes)
        if settings and self.capacity is not None:
            await asyncio.to_thread(self.capacity.update, list(nodes.values()), settings.cfg.pools.resources)
        self.metrics.last_sync.set_to_current_time()
        self.health.ready = True
        await self.report(nodes)
        log.info("full pass over %d node(s) took %.1fs", len(nodes), asyncio.get_running_loop().time() - started,
                 extra={"reason": "FullPass", "source": settings.source.name if settings else None})

    async def node_pass(self) -> None:
        names, self.dirty = sorted(self.dirty), set()
        gone, self.gone = self.gone, set()
        nodes = self.nodes()
        settings = self.settings
        if settings is None:
            await self.report(nodes)
            return
        touched = [nodes[n] for n in names if n in nodes]
        arrived = [node for node in touched if node.name not in self.asked]
        ask = self.to_ask(touched)
        if ask and settings.source.per_node:
            await self.place(settings, ask)
        self.asked.update({node.name: node for node in [*arrived, *(node for node, _ in ask)]})
        snapshot = self.topology.snapshot
        if snapshot is not None:
            plan = self.labeller.plan_for(snapshot, touched, len(nodes), settings.cfg.ownership())
            await self.write(plan, settings.cfg)
            if arrived or ask or gone:
                await self.sync_kueue(settings, nodes, verify=False)
        await self.report(nodes)

    async def retry_pass(self) -> None:
        """Write again what failed: the failed nodes' labels, the Kueue objects (read from the server), the
        status; nothing is discovered. When all that failed are LocalQueues whose namespaces do not exist, it
        only asks whether one appeared, and asks again NAMESPACE_POLL seconds later."""
        if await self.still_waiting_for_namespaces():
            self.retry_at = asyncio.get_running_loop().time() + NAMESPACE_POLL
            return
        nodes = self.nodes()
        settings, snapshot = self.settings, self.topology.snapshot
        if settings is not None and snapshot is not None:
            failed = [nodes[name] for name in sorted(self.labeller.failed) if name in nodes]
            if failed:
                plan = self.labeller.plan_for(snapshot, failed, len(nodes), settings.cfg.ownership())
                await self.write(plan, settings.cfg)
            if self.kueue_failed:
                await self.sync_kueue(settings, nodes, verify=True)
        await self.report(nodes)

    async def still_waiting_for_namespaces(self) -> bool:
        """Whether the only failed writes are LocalQueues whose namespaces are all still missing."""
        waiting = self.kueue.missing_namespaces
        if not waiting or self.labeller.failed or self.reporter.failed:
            return False
        for namespace in sorted(waiting):
            if await asyncio.to_thread(self.kube.get, f"/api/v1/namespaces/{namespace}") is not None:
                return False
        return True

    def to_ask(self, touched: list[Node]) -> list[tuple[Node, str]]:
        """Unplaced nodes worth asking the source about, and why: joined since the source last saw every node,
        or changed (labels, annotations, provider ID) since it last saw them. A node that was there unplaced
        at the last full pass, as kopf's first events show every node, is not asked again nor called joining."""
        snapshot = self.topology.snapshot
        out: list[tuple[Node, str]] = []
        for node in touched:
            if snapshot is not None and node.name in snapshot.nodes:
                continue
            seen = self.asked.get(node.name)
            if seen is None:
                out.append((node, JOINED))
            elif (seen.labels, seen.annotations, seen.provider_id) != (node.labels, node.annotations, node.provider_id):
                out.append((node, CHANGED))
        return out

    async def discover(self, settings: Settings, nodes: list[Node], scope: str) -> Discovery:
        """Run the source in a thread, giving up after --source-timeout (the thread is left to finish)."""
        if self.running is not None and not self.running.done():
            raise SourceError(f"{settings.source.name}: the previous discovery is still running "
                              f"(it overran --source-timeout {self.opts.source_timeout:.0f}s)")
        loop = asyncio.get_running_loop()
        started = loop.time()
        self.running = loop.run_in_executor(None, run_source, settings.source, settings.options, nodes,
                                            settings.origin, lambda: self.kube.api,
                                            PASS_PROGRESS if scope == "full" else quiet)
        try:
            return await asyncio.wait_for(asyncio.shield(self.running), self.opts.source_timeout)
        except asyncio.TimeoutError:
            raise SourceTimeout(f"{settings.source.name}: no answer within {self.opts.source_timeout:.0f}s") from None
        finally:
            self.metrics.discovery.labels(source=settings.source.name, scope=scope).observe(loop.time() - started)

    async def rediscover(self, settings: Settings, nodes: dict[str, Node]) -> Plan | None:
        """A full discovery adopted as the last good topology when its plan is safe; its plan, or None."""
        try:
            found = await self.discover(settings, list(nodes.values()), "full")
            current = {name: self.labeller.effective(node) for name, node in nodes.items()}
            found, snapshot = self.topology.candidate(settings.cfg, found, current)
        except Exception as exc:  # noqa: BLE001 - any failure of a source keeps the last good topology
            await self.source_failed(exc)
            return None
        plan = self.labeller.full_plan(snapshot, nodes.values(), settings.cfg.ownership())
        try:
            check_share(plan, settings.cfg.plan.max_change_fraction, remedy=self.plan_remedy(settings))
        except PlanRefused as exc:
            self.metrics.errors.labels(kind="plan").inc()
            self.refused = str(exc)
            await self.transition("LabelsInSync", False, "PlanRefused", f"{exc}; the last good topology stays")
            return None
        self.refused = None
        await self.report_drift(snapshot, nodes)
        self.topology.adopt(found, snapshot)
        await self.transition("SourceAvailable", True, "Discovered",
                              f"{settings.source.name}: {len(snapshot.nodes)} node(s) placed in {len(snapshot.levels)} "
                              "level(s)")
        return plan

    def plan_remedy(self, settings: Settings) -> str:
        """What the operator's user can do about a refused plan: the setting, where it is, and the one-off."""
        where = (f"spec.plan.maxChangeFraction of TopologyLabeler {self.opts.name}" if self.spec is not None
                 else f"plan.maxChangeFraction in {settings.origin}")
        return (f"check the source; to accept the change, raise {where}, or write it once with "
                "`topolabel apply --force` (same source and config)")

    async def report_drift(self, snapshot: Snapshot, nodes: dict[str, Node]) -> None:
        """Labels a fresh discovery disagrees with (as `topolabel verify` reports them): a metric and an Event."""
        drifted = stale(label_drift(snapshot, list(nodes.values())))
        names = sorted({d.node for d in drifted})
        self.metrics.drift.set(len(names))
        if names:
            examples = "; ".join(f"{d.node} {d.level}: {d.a} -> {d.b}" for d in drifted[:3])
            await asyncio.to_thread(self.reporter.event, "Warning", "Drift",
                                    f"{len(names)} node(s) carry topology labels that differ from a fresh discovery "
                                    f"({examples}); correcting them")

    async def source_failed(self, exc: Exception) -> None:
        self.metrics.errors.labels(kind="source").inc()
        reason = ("SourceTimeout" if isinstance(exc, SourceTimeout) else "InputStale" if isinstance(exc, StaleInput)
                  else "SourceFailed")
        message = str(exc) if isinstance(exc, TopolabelError) else f"{type(exc).__name__}: {exc}"
        keep = "labelling from the last good topology" if self.topology.snapshot else "no topology yet"
        await self.transition("SourceAvailable", False, reason, f"{message}; nothing removed, {keep}")

    async def place(self, settings: Settings, ask: list[tuple[Node, str]]) -> None:
        """Ask a per-node source about joining (or changed) nodes and merge the answer into the last good
        topology. Each node is logged with its name, the source and why it was asked."""
        names = [node.name for node, _ in ask]
        source = settings.source.name
        try:
            answer = await self.discover(settings, [node for node, _ in ask], "join")
            cluster = [self.labeller.effective(node) for node in self.cache.values()]
            merged = self.topology.join(settings.cfg, answer, names, cluster)
        except Exception as exc:  # noqa: BLE001 - a failed join waits for the next full pass
            self.metrics.errors.labels(kind="source").inc()
            for node, why in ask[:LOGGED_NODES]:
                log.warning("could not place %s node %s: %s", WORDS[why], node.name, exc,
                            extra={"node": node.name, "source": source, "reason": why})
            for node, why in ask:
                self.join_problems[node.name] = Problem("operator", f"not placed when it {WORDS[why]} ({exc}); "
                                                                    "retried at the next resync", node.name)
            return
        for name in names:
            self.join_problems.pop(name, None)
        if not merged:
            self.request_full(soon=True)
            return
        placed = self.topology.snapshot.nodes if self.topology.snapshot else {}
        for node, why in ask[:LOGGED_NODES]:
            if node.name in placed:
                log.info("placed %s node %s", WORDS[why], node.name,
                         extra={"node": node.name, "source": source, "reason": why})

    async def write(self, plan: Plan, cfg: Config, progress: Progress = quiet) -> None:
        if not plan.changes:
            return
        result = await asyncio.to_thread(apply_plan, plan, self.kube.patch_node, cfg.apply.concurrency,
                                         cfg.apply.retries, True, progress)
        self.labeller.record(plan, result)
        written = set(result.written)
        for change in plan.changes:
            if change.node in written:
                log.info("labelled node %s: %s", change.node, _described(change),
                         extra={"node": change.node, "reason": "NodeLabelled"})
        if result.written:
            await asyncio.to_thread(self.reporter.event, "Normal", "Labelled",
                                    f"wrote topology labels on {len(result.written)} node(s)")
        if result.failed:
            self.metrics.errors.labels(kind="labels").inc(len(result.failed))
            for node, error in sorted(result.failed.items())[:LOGGED_NODES]:
                log.warning("could not label node %s: %s", node, error, extra={"node": node, "reason": "WriteFailed"})

    async def sync_kueue(self, settings: Settings, nodes: dict[str, Node], verify: bool) -> None:
        """Bring the Kueue objects to what the topology generates; `verify` reads the server even when
        nothing changed here (a full pass), otherwise an unchanged generation costs no call."""
        snapshot = self.topology.snapshot
        assert snapshot is not None
        try:
            generated = generate(snapshot, list(nodes.values()), settings.cfg)
        except TopolabelError as exc:
            self.metrics.errors.labels(kind="kueue").inc()
            self.kueue.forget()
            self.kueue_failed = False  # the config must change first: nothing to retry
            await self.transition("KueueInSync", False, "GenerateFailed", str(exc))
            return
        try:
            result = await asyncio.to_thread(self.kueue.sync, generated, verify)
        except ApiException as exc:
            self.metrics.errors.labels(kind="kueue").inc()
            self.kueue_failed = True
            missing = exc.status == 404
            await self.transition("KueueInSync", False, "KueueMissing" if missing else "ReadFailed",
                                  f"the Kueue CRDs ({KUEUE_API_VERSION}) are not served" if missing
                                  else f"cannot read the Kueue objects: {api_error(exc)}")
            return
        if result is None:
            return
        if result.writes:
            await asyncio.to_thread(self.reporter.event, "Normal", "KueueUpdated", "; ".join(result.writes))
        failures = result.errors + result.changes.conflicts
        self.kueue_failed = bool(failures)
        if failures:
            self.metrics.errors.labels(kind="kueue").inc(len(result.errors))
            await self.transition("KueueInSync", False, "ApplyFailed" if result.errors else "Conflict",
                                  "; ".join(failures))
        else:
            kept = f"; {'; '.join(result.changes.kept)}" if result.changes.kept else ""
            await self.transition("KueueInSync", True, "Applied",
                                  f"{len(generated.objects)} object(s) as generated{kept}")

    async def judge_health(self, settings: Settings, nodes: dict[str, Node]) -> None:
        """One fabric health observation; Events when nodes are isolated or let back, and when the brake holds."""
        before = self.health_report
        report = await asyncio.to_thread(self.fabric_health.run, settings.cfg, settings.source.name,
                                         settings.options, nodes)
        self.health_report = report
        if report.tainted or report.untainted:
            parts = [f"tainted {len(report.tainted)} node(s) ({', '.join(report.tainted[:LOGGED_NODES])})"
                     if report.tainted else "",
                     f"removed the taint from {len(report.untainted)} node(s) "
                     f"({', '.join(report.untainted[:LOGGED_NODES])})" if report.untainted else ""]
            await asyncio.to_thread(self.reporter.event, "Normal", "FabricTaints", "; ".join(p for p in parts if p))
        old = set(before.assessment.decision.isolated) if before.assessment else set()
        new = set(report.assessment.decision.isolated) if report.assessment else set()
        if new - old:
            await asyncio.to_thread(self.reporter.event, "Warning", "FabricIsolated",
                                    f"{len(new - old)} node(s) isolated: {_sample(new - old)}")
        if old - new:
            await asyncio.to_thread(self.reporter.event, "Normal", "FabricRestored",
                                    f"{len(old - new)} node(s) healthy again: {_sample(old - new)}")
        refused = report.assessment.decision.refused if report.assessment else None
        was = before.assessment.decision.refused if before.assessment else None
        if refused and refused != was:
            await asyncio.to_thread(self.reporter.event, "Warning", "FabricIsolationHeld", refused)
        for notice in report.notices[:LOGGED_NODES]:
            log.warning("%s", notice, extra={"reason": "FabricEvidence"})

    def log_unplaced(self, snapshot: Snapshot | None, nodes: Mapping[str, Node]) -> None:
        """One WARNING per node the topology leaves unplaced, with the source's reason; again only when the
        reason changes, so resyncs do not repeat it."""
        if snapshot is None:
            return
        why = {p.node: p.message for p in [*snapshot.problems, *self.join_problems.values()] if p.node}
        unplaced = {name: why.get(name, "the source did not place it") for name in nodes if name not in snapshot.nodes}
        source = self.settings.source.name if self.settings else None
        for name, message in sorted(unplaced.items()):
            if self.unplaced.get(name) != message:
                log.warning("node %s left unplaced: %s", name, message,
                            extra={"node": name, "source": source, "reason": "Unplaced"})
        self.unplaced = unplaced

    async def transition(self, type_: str, ok: bool, reason: str, message: str) -> None:
        cond = self.conditions.set(type_, ok, reason, message)
        if cond is not None:
            await asyncio.to_thread(self.reporter.transition, cond)

    async def report(self, nodes: dict[str, Node]) -> None:
        """Node-state metrics, the labels condition and the status, from the current state."""
        snapshot = self.topology.snapshot
        owned = self.settings.cfg.ownership() if self.settings else Ownership()
        counts = self.labeller.states(snapshot, nodes.values(), owned)
        self.metrics.set_node_states(counts)
        failed = sorted(self.labeller.failed.items())
        if snapshot is None:
            await self.transition("LabelsInSync", False, "NoTopology", "no discovery has succeeded yet")
        elif failed:
            await self.transition("LabelsInSync", False, "WriteFailed",
                                  f"{len(failed)} node(s) could not be labelled, e.g. {failed[0][0]}: {failed[0][1]}")
        elif self.refused is None:
            await self.transition("LabelsInSync", True, "Synced", f"{counts['labelled']} node(s) carry their placement")
        problems = [*(snapshot.problems if snapshot else []), *self.join_problems.values(), *self.labeller.conflicts,
                    *(Problem("labels", f"write failed: {error}", node) for node, error in failed),
                    *self.kueue.problems]
        self.log_unplaced(snapshot, nodes)
        announce, self.unannounced = self.unannounced, []
        for cond in announce:
            await asyncio.to_thread(self.reporter.transition, cond)
        problems += [Problem("health", message, node) for node, message in sorted(self.health_report.failed.items())]
        status = status_body(self.conditions, counts, snapshot, problems,
                             self.settings.source.name if self.settings else None, self.kueue.count,
                             self.health_report.status())
        await asyncio.to_thread(self.reporter.publish, status, self.generation)


def _sample(names: set[str]) -> str:
    ordered = sorted(names)
    return ", ".join(ordered[:LOGGED_NODES]) + (f" and {len(ordered) - LOGGED_NODES} more"
                                                 if len(ordered) > LOGGED_NODES else "")


def _described(change: NodeChange) -> str:
    """A node's label change as `+key=value -key`."""
    return " ".join([*(f"+{k}={v}" for k, v in sorted(change.set.items())), *(f"-{k}" for k in change.remove)])


def _uid(body: Mapping[str, Any] | None) -> str | None:
    return ((body or {}).get("metadata") or {}).get("uid")


def _generation(body: Mapping[str, Any] | None) -> int | None:
    return ((body or {}).get("metadata") or {}).get("generation")
