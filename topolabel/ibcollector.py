"""The InfiniBand fabric collector: on one node per fabric, run ibnetdiscover and publish the parsed fabric.

Every collector (`topolabel agent --ib-collector`, a small Deployment in manifests/agent) reads this
node's ports from sysfs and groups the Active InfiniBand ones into fabrics: by `--ib-fabric NAME=REGEX` on
the device name when given, else by the subnet prefix in the port's GID. Per fabric it contends for the
Lease `topolabel-ib-<fabric>`; the holder runs `ibnetdiscover -C DEVICE -P PORT` every interval, parses it
and, when the parsed fabric differs from the published one, publishes it as ConfigMap shards
(`labeler.cluster.shards`, the format of `providers.infiniband.published`); otherwise it only refreshes the
manifest's `checkedAt`, which tells the operator the fabric is current. A collector that dies stops
renewing, and a standby takes the Lease over after leaseDurationSeconds; one that stops cleanly (SIGTERM)
hands it over at once. A port that leaves Active (cable pulled, HCA down) makes this node drop the fabric.
With `--ib-errors` the holder also runs `ibqueryerrors` and publishes, in the manifest, how much each port's
error counters rose since its last run (`portErrors`, `errorsAt`): fabric health's counter evidence.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import random
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence, TextIO

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from labeler.cluster.kube import api_error
from labeler.cluster.lease import Keeper, Lease
from labeler.cluster.shards import publish, read_manifest, touch
from labeler.errors import InputError, SourceError, TopolabelError
from labeler.topology.names import MANAGED_BY
from providers.base import regex
from providers.infiniband.command import run_ibnetdiscover
from providers.infiniband.fabric import Fabric
from providers.infiniband.parse import parse_ibnetdiscover
from providers.infiniband.portrecord import increases
from providers.infiniband.published import (ERRORS_AT, FABRIC_LABEL, FORMAT, PORT_ERRORS, TIME_FORMAT, encode,
                                           encode_errors, object_name, pack, to_bytes)
from providers.infiniband.queryerrors import PortErrors, parse_queryerrors, run_queryerrors
from providers.infiniband.sysfs import Device, read_devices

FABRIC_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")


@dataclass(frozen=True)
class FabricPort:
    """An Active InfiniBand port of this node, and the fabric it is counted in."""

    fabric: str
    device: str
    port: int
    subnet_prefix: int
    port_guid: int
    node_guid: int
    sm_lid: int

    @property
    def label(self) -> str:
        return f"{self.device} port {self.port}"


def parse_fabric_names(specs: Sequence[str]) -> dict[str, re.Pattern[str]]:
    """`--ib-fabric NAME=REGEX` values, in the order given (the first match wins)."""
    named: dict[str, re.Pattern[str]] = {}
    for spec in specs:
        name, sep, pattern = spec.partition("=")
        if not sep or not FABRIC_NAME.fullmatch(name):
            raise InputError(f"--ib-fabric {spec!r}: expected NAME=REGEX, NAME lower-case letters, digits and "
                                    "dashes (at most 40), e.g. compute=^mlx5_[0-7]$")
        try:
            named[name] = regex(pattern)
        except ValueError as exc:
            raise InputError(f"--ib-fabric {spec!r}: {exc}") from None
    return named


def fabric_ports(devices: Sequence[Device], named: Mapping[str, re.Pattern[str]]) -> dict[str, list[FabricPort]]:
    """Active InfiniBand ports by fabric: the first `named` pattern matching the device name, or (with no
    names) the subnet prefix as 16 hex digits. Ports no pattern matches are left out."""
    fabrics: dict[str, list[FabricPort]] = {}
    for device in devices:
        if not device.is_ca:
            continue
        for port in device.ports:
            if not port.active_ib:
                continue
            name = (next((n for n, p in named.items() if p.search(device.name)), None) if named
                    else f"{port.subnet_prefix:016x}")
            if name is not None:
                fabrics.setdefault(name, []).append(FabricPort(name, device.name, port.number, port.subnet_prefix,
                                                               port.guid, device.node_guid, port.sm_lid))
    return fabrics


@dataclass
class Settings:
    namespace: str
    node: str
    identity: str
    sysfs: str = "/sys"
    named: Mapping[str, re.Pattern[str]] = field(default_factory=dict)
    interval: float = 300.0
    lease_duration: float = 30.0
    ibnetdiscover: str = "ibnetdiscover"
    timeout: float = 120.0
    errors: bool = False  # also run ibqueryerrors and publish the counters' increases
    ibqueryerrors: str = "ibqueryerrors"


class Collector:
    """One collector process: a Keeper per fabric this node is on, a discovery per interval while it leads."""

    def __init__(self, api: client.ApiClient, settings: Settings, log: TextIO = sys.stderr,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.api, self.settings, self.log, self.clock = api, settings, log, clock
        self.keepers: dict[str, Keeper] = {}
        self.due: dict[str, float] = {}
        self.counters: dict[str, tuple[float, PortErrors]] = {}  # fabric -> the last ibqueryerrors reading

    def say(self, message: str) -> None:
        print(f"topolabel ib-collector: {message}", file=self.log, flush=True)

    def tick(self) -> None:
        """Follow this node's ports (join or leave fabrics), then discover the fabrics it leads that are due."""
        ports = fabric_ports(read_devices(self.settings.sysfs), self.settings.named)
        for name in sorted(set(self.keepers) - set(ports)):
            self.say(f"fabric {name}: no Active port here any more; leaving it")
            self.keepers.pop(name).stop(release=True)
            self.due.pop(name, None)
        for name in sorted(set(ports) - set(self.keepers)):
            self.say(f"fabric {name}: ports {', '.join(p.label for p in ports[name])}; contending for lease "
                     f"{self.settings.namespace}/{object_name(name)}")
            self.keepers[name] = self._keeper(name)
        for name, keeper in sorted(self.keepers.items()):
            if keeper.held and self.clock() >= self.due.get(name, float("-inf")):
                self.due[name] = self.clock() + self.settings.interval
                try:
                    self.say(f"fabric {name}: {self.collect(name, ports[name], keeper)}")
                except TopolabelError as exc:
                    self.say(f"fabric {name}: error: {exc}")
                except ApiException as exc:
                    self.say(f"fabric {name}: Kubernetes API error: {api_error(exc)}")
                except HTTPError as exc:
                    self.say(f"fabric {name}: Kubernetes API unreachable: {exc}")

    def _keeper(self, name: str) -> Keeper:
        lease = Lease(self.api, self.settings.namespace, object_name(name), self.settings.identity,
                      self.settings.lease_duration)

        def changed(held: bool) -> None:
            if held:
                self.due.pop(name, None)  # a new leader discovers at once
            self.say(f"fabric {name}: " + ("leading (lease acquired)" if held
                                           else f"standing by (lease held by {lease.holder or 'nobody'})"))

        return Keeper(lease, on_change=changed).start()

    def collect(self, name: str, ports: list[FabricPort], keeper: Keeper) -> str:
        """Discover from the first port, publish when the fabric changed; a line saying what happened."""
        port = ports[0]
        origin = f"ibnetdiscover -C {port.device} -P {port.port}"
        text = run_ibnetdiscover(port.device, self.settings.timeout, self.settings.ibnetdiscover, port.port)
        fabric = parse_ibnetdiscover(text, origin)
        kinds = fabric.kinds
        if "switch" not in kinds:
            raise SourceError(f"{origin}: no switch in the fabric (port down, or no subnet manager?); "
                              "the published fabric is left as it is")
        raw = to_bytes(encode(fabric))
        digest = hashlib.sha256(raw).hexdigest()
        now = _now()
        info = {"fabric": name, "format": FORMAT, "fabricHash": digest, "checkedAt": now,
                "collector": self.settings.node, "ranFrom": f"{port.device} port {port.port}",
                "subnetPrefix": f"{port.subnet_prefix:016x}", "smLid": str(port.sm_lid),
                "hcas": str(kinds.count("ca")), "switches": str(kinds.count("switch")),
                "notices": json.dumps(self.notices(name, ports, fabric))}
        if self.settings.errors:
            info.update(self.port_errors(name, port))
        namespace = self.settings.namespace
        try:
            current = read_manifest(self.api, namespace, object_name(name))
        except ApiException as exc:
            if exc.status != 403:
                raise
            raise SourceError(f"may not read ConfigMap {namespace}/{object_name(name)}: add it to the resourceNames of "
                              "the collector's Role (manifests/ib-collector/rbac.yaml; with the chart, name the fabric in "
                              "ibCollector.fabrics or ibCollector.subnetPrefixes)") from None
        if not keeper.held:
            return "lost the lease during discovery; not published"
        if current is not None and current.info.get("fabricHash") == digest:
            touch(self.api, namespace, current, {**info, "publishedAt": current.info.get("publishedAt", now)})
            return f"unchanged ({info['hcas']} HCAs, {info['switches']} switches)"
        blob = pack(raw)
        written = publish(self.api, namespace, object_name(name), blob, {**info, "publishedAt": now},
                          {**MANAGED_BY, FABRIC_LABEL: name}, current)
        return (f"published {info['hcas']} HCAs, {info['switches']} switches: {len(blob):,} bytes in "
                f"{len(written.shards)} shard(s)")

    def port_errors(self, name: str, port: FabricPort) -> dict[str, str]:
        """The manifest keys of the counters' increases since the last reading; none on the first (the counters
        hold whatever accumulated since they were last cleared, which says nothing about now)."""
        text = run_queryerrors(port.device, port.port, self.settings.timeout, self.settings.ibqueryerrors)
        now, counters = self.clock(), parse_queryerrors(text, f"ibqueryerrors -C {port.device} -P {port.port}")
        last = self.counters.get(name)
        self.counters[name] = (now, counters)
        if last is None:
            return {}
        rises = {key: rise for key, values in counters.items() if (rise := increases(values, last[1].get(key, {})))}
        return {PORT_ERRORS: encode_errors(rises, now - last[0]), ERRORS_AT: _now()}

    def notices(self, name: str, ports: list[FabricPort], fabric: Fabric) -> list[str]:
        """This node's ports counted in the fabric that its discovery did not reach: they are on another subnet."""
        missing = [p for p in ports if p.node_guid not in fabric.index]
        if not missing:
            return []
        hint = ("its pattern (--ib-fabric) matches HCAs on another subnet" if self.settings.named
                else "two subnets share the subnet prefix; tell them apart with --ib-fabric NAME=REGEX on the "
                     "device names")
        return [f"{self.settings.node}: {', '.join(p.label for p in missing)} counted in fabric {name} but not "
                f"in the discovery from {ports[0].label}: {hint}"]

    def stop(self) -> None:
        """Hand every Lease over (a clean stop), so standbys take over at their next attempt."""
        for keeper in self.keepers.values():
            keeper.stop(release=True)
        self.keepers.clear()


def run(collector: Collector, sleep: Callable[[float], None] = time.sleep) -> int:
    """Ticks every few seconds (a sixth of the lease, jittered) until interrupted; leases released on the way out."""
    pause = collector.settings.lease_duration / 6
    try:
        while True:
            try:
                collector.tick()
            except TopolabelError as exc:
                collector.say(f"error: {exc}")
            sleep(pause * random.uniform(0.9, 1.1))
    finally:
        collector.stop()


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime(TIME_FORMAT)
