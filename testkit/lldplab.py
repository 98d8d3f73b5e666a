"""An LLDP lab in network namespaces: every switch and host is a namespace running real lldpd, cabled by veths.

`Wiring` is a cabling plan with its ground truth (each host's rack switches and block, and which hosts are
unwired, miswired or degraded). `fixed_wiring()` is a small hand-made plan; `random_wiring(seed)` draws
one. Both know only how things are cabled, nothing of how `providers.lldp.place` infers placement, so
the tests compare two independent views. `Lab(wiring)` builds it (root, `ip`, `lldpd` needed), waits until
every cable is heard from both ends, hands out `lldpcli -f json0 show neighbors` output, and tears
everything down by PID and namespace name in `stop()`, also after a partial start.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

MGMT_SWITCH = "oob-sw"
HOST_MGMT_PORT = "eno1"
SWITCH_MGMT_PORT = "mgmt0"


def lab_available() -> str | None:
    """Why the lab cannot run here (None when it can)."""
    if os.geteuid() != 0:
        return "needs root for network namespaces"
    missing = [tool for tool in ("ip", "lldpd", "lldpcli") if not shutil.which(tool)]
    return f"needs {', '.join(missing)} (apt-get install lldpd iproute2)" if missing else None


@dataclass(frozen=True)
class Link:
    a: str
    a_port: str
    b: str
    b_port: str


@dataclass
class Wiring:
    """Devices, cables, and the truth: host -> its rack's switches and its block (for placed hosts)."""

    switches: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    rack: dict[str, frozenset[str]] = field(default_factory=dict)
    block: dict[str, str] = field(default_factory=dict)
    leaf_block: dict[str, str] = field(default_factory=dict)
    spines: dict[str, list[str]] = field(default_factory=dict)
    pairs: list[frozenset[str]] = field(default_factory=list)
    unwired: set[str] = field(default_factory=set)
    miswired: set[str] = field(default_factory=set)
    degraded: set[str] = field(default_factory=set)
    _ports: Counter = field(default_factory=Counter)

    def cable(self, a: str, b: str, a_port: str | None = None, b_port: str | None = None) -> None:
        """One cable; switch ports are numbered swpN in order, host ports ethN unless named."""
        self.links.append(Link(a, a_port or self._next(a), b, b_port or self._next(b)))

    def _next(self, device: str) -> str:
        self._ports[device] += 1
        prefix = "swp" if device in self.switches else "eth"
        return f"{prefix}{self._ports[device] - (0 if prefix == 'swp' else 1)}"

    def switch_map(self) -> dict:
        """The switch map a network inventory would export for this wiring."""
        return {"levels": ["block"], "switches": {leaf: {"block": b} for leaf, b in self.leaf_block.items()},
                "pairs": [sorted(p) for p in self.pairs]}


def _fabric(w: Wiring, rng: random.Random, blocks: int, racks: tuple[int, int], spines: int,
            pair_share: float) -> list[tuple[str, frozenset[str]]]:
    """Spines and leaves per block, uplinks, MLAG peer links; returns (block, rack switches) per rack."""
    w.switches.append(MGMT_SWITCH)
    names = rng.sample(range(10, 99), blocks * racks[1] * 2 + blocks * spines)
    out = []
    for b in range(blocks):
        block = f"b{b}"
        w.spines[block] = [f"spine-{names.pop()}" for _ in range(spines)]
        w.switches += w.spines[block]
        for _ in range(rng.randint(*racks)):
            paired = rng.random() < pair_share
            leaves = [f"tor-{names.pop()}" for _ in range(2 if paired else 1)]
            w.switches += leaves
            for leaf in leaves:
                w.leaf_block[leaf] = block
                for spine in w.spines[block]:
                    w.cable(leaf, spine)
                if rng.random() < 0.5:
                    w.cable(leaf, MGMT_SWITCH, a_port=SWITCH_MGMT_PORT)
            if paired:
                w.pairs.append(frozenset(leaves))
                for _ in range(rng.randint(1, 2)):  # one or two peer links
                    w.cable(leaves[0], leaves[1])
            out.append((block, frozenset(leaves)))
    return out


def _host(w: Wiring, name: str, mgmt: bool) -> None:
    w.hosts.append(name)
    if mgmt:
        w.cable(name, MGMT_SWITCH, a_port=HOST_MGMT_PORT)


def random_wiring(seed: int, blocks: int = 2, racks: tuple[int, int] = (2, 3), hosts: tuple[int, int] = (1, 3),
                  spines: int = 2, pair_share: float = 0.5) -> Wiring:
    """A random fabric: racks of one leaf or an MLAG pair, hosts with one or two data ports, management
    ports to an out-of-band switch, plus an unwired host, a miswired one and (when a pair exists) a degraded one."""
    rng = random.Random(seed)
    w = Wiring()
    racks_ = _fabric(w, rng, blocks, racks, spines, pair_share)
    count = 0
    for block, rack in racks_:
        for _ in range(rng.randint(*hosts)):
            count += 1
            name = f"gpu-{count:03d}"
            _host(w, name, mgmt=rng.random() < 0.7)
            members = sorted(rack)
            ports = members if len(members) == 2 else members * rng.randint(1, 2)
            for switch in ports:
                w.cable(name, switch)
            w.rack[name], w.block[name] = rack, block
    paired = [r for _, r in racks_ if len(r) == 2]
    if paired:
        count += 1
        name = f"gpu-{count:03d}"
        _host(w, name, mgmt=True)
        rack = rng.choice(paired)
        w.cable(name, sorted(rack)[rng.randint(0, 1)])
        w.rack[name], w.block[name] = rack, w.leaf_block[next(iter(rack))]
        w.degraded.add(name)
    first, second = rng.sample([r for _, r in racks_], 2)
    for kind in ("unwired", "miswired"):
        count += 1
        name = f"gpu-{count:03d}"
        _host(w, name, mgmt=True)
        if kind == "miswired":
            w.cable(name, sorted(first)[0])
            w.cable(name, sorted(second)[0])
            w.miswired.add(name)
        else:
            w.unwired.add(name)
    return w


def fixed_wiring() -> Wiring:
    """The hand-made lab: two racks in one block, rack 2 an MLAG pair.

    gpu-a: two ports to leaf-r01; gpu-b: one port to each of leaf-r02/leaf-r03 (the pair);
    gpu-c: only a management port; gpu-d: one port to leaf-r01 and one to leaf-r02 (miswired).
    Every host's eno1 goes to the out-of-band switch.
    """
    w = Wiring(switches=[MGMT_SWITCH, "spine-1", "leaf-r01", "leaf-r02", "leaf-r03"])
    w.spines["b0"] = ["spine-1"]
    for leaf in ("leaf-r01", "leaf-r02", "leaf-r03"):
        w.leaf_block[leaf] = "b0"
        w.cable(leaf, "spine-1")
    w.cable("leaf-r02", "leaf-r03")
    w.pairs.append(frozenset({"leaf-r02", "leaf-r03"}))
    for host, switches in {"gpu-a": ["leaf-r01", "leaf-r01"], "gpu-b": ["leaf-r02", "leaf-r03"],
                           "gpu-c": [], "gpu-d": ["leaf-r01", "leaf-r02"]}.items():
        _host(w, host, mgmt=True)
        for switch in switches:
            w.cable(host, switch)
    w.rack.update({"gpu-a": frozenset({"leaf-r01"}), "gpu-b": frozenset({"leaf-r02", "leaf-r03"})})
    w.block.update({"gpu-a": "b0", "gpu-b": "b0"})
    w.unwired.add("gpu-c")
    w.miswired.add("gpu-d")
    return w


def dual_homed_wiring() -> Wiring:
    """Racks and no switch map: rack A's hosts are each cabled to tor-a1 and tor-a2 (no peer link, no MLAG
    configured), rack B has one switch, rack C is dual-homed too but one host is cabled from tor-c1 to tor-b.

    gpu-a1..a3: tor-a1 + tor-a2; gpu-a4: tor-a1 only (a link down); gpu-b1, gpu-b2: tor-b;
    gpu-c1, gpu-c2: tor-c1 + tor-c2; gpu-x: tor-c1 + tor-b (miscabled, refused). Every host's eno1 goes to oob-sw.
    """
    racks = {"a": ["tor-a1", "tor-a2"], "b": ["tor-b"], "c": ["tor-c1", "tor-c2"]}
    w = Wiring(switches=[MGMT_SWITCH, "spine-1", *(s for members in racks.values() for s in members)])
    for members in racks.values():
        for leaf in members:
            w.cable(leaf, "spine-1")
    plan = {"gpu-a1": racks["a"], "gpu-a2": racks["a"], "gpu-a3": racks["a"], "gpu-a4": ["tor-a1"],
            "gpu-b1": racks["b"] * 2, "gpu-b2": racks["b"], "gpu-c1": racks["c"], "gpu-c2": racks["c"],
            "gpu-x": ["tor-c1", "tor-b"]}
    for host, switches in plan.items():
        _host(w, host, mgmt=True)
        for switch in switches:
            w.cable(host, switch)
    for host in ("gpu-a1", "gpu-a2", "gpu-a3", "gpu-a4"):
        w.rack[host] = frozenset(racks["a"])
    for host in ("gpu-b1", "gpu-b2"):
        w.rack[host] = frozenset(racks["b"])
    for host in ("gpu-c1", "gpu-c2"):  # two hosts hear the pair: one miscabled host does not take it from them
        w.rack[host] = frozenset(racks["c"])
    w.degraded.add("gpu-a4")
    w.miswired.add("gpu-x")
    return w


class Lab:
    """The wiring built from namespaces and veths, one lldpd per device."""

    def __init__(self, wiring: Wiring) -> None:
        self.wiring = wiring
        self.tag = uuid.uuid4().hex[:6]
        # unix socket paths are limited to 108 bytes: keep the directory short
        self.dir = Path(tempfile.mkdtemp(prefix="tl-lldp-", dir="/tmp"))
        self.dir.chmod(0o755)  # lldpd's unprivileged side (user _lldpd) makes its socket here
        self.namespaces: list[str] = []
        self.daemons: dict[str, subprocess.Popen] = {}

    def ns(self, device: str) -> str:
        return f"tl{self.tag}-{device}"

    def socket(self, device: str) -> str:
        return str(self.dir / f"{device}.sock")

    def start(self, timeout: float = 60.0) -> "Lab":
        devices = self.wiring.switches + self.wiring.hosts
        for device in devices:
            _ip("netns", "add", self.ns(device))
            self.namespaces.append(self.ns(device))
            _ip("-n", self.ns(device), "link", "set", "lo", "up")
        for link in self.wiring.links:
            _ip("link", "add", link.a_port, "netns", self.ns(link.a), "type", "veth",
                "peer", "name", link.b_port, "netns", self.ns(link.b))
            _ip("-n", self.ns(link.a), "link", "set", link.a_port, "up")
            _ip("-n", self.ns(link.b), "link", "set", link.b_port, "up")
        for device in devices:
            self._lldpd(device)
        self._wait(timeout)
        return self

    def _lldpd(self, device: str) -> None:
        # namespaces share the host name, so each lldpd is told its own
        conf = self.dir / f"{device}.conf"
        conf.write_text(f"configure system hostname {device}\nconfigure lldp tx-interval 1\n"
                        "configure lldp portidsubtype ifname\n")
        log = open(self.dir / f"{device}.log", "w")
        self.daemons[device] = subprocess.Popen(
            ["ip", "netns", "exec", self.ns(device), "lldpd", "-d", "-u", self.socket(device), "-O", str(conf)],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def expected(self) -> Counter:
        """How many neighbours each device hears once every cable is up: one per cable end."""
        ends: Counter = Counter()
        for link in self.wiring.links:
            ends[link.a] += 1
            ends[link.b] += 1
        return ends

    def _wait(self, timeout: float) -> None:
        want = self.expected()
        deadline = time.monotonic() + timeout
        pending = [d for d in self.wiring.switches + self.wiring.hosts if want[d]]
        while pending:
            pending = [d for d in pending if self.heard(d) < want[d]]
            if pending and time.monotonic() > deadline:
                raise TimeoutError(f"LLDP lab: after {timeout:.0f} s still waiting for "
                                   + ", ".join(f"{d} ({self.heard(d)}/{want[d]})" for d in pending[:5]))
            time.sleep(0.3)

    def heard(self, device: str) -> int:
        try:
            data = json.loads(self.neighbors(device))
        except (subprocess.CalledProcessError, json.JSONDecodeError):
            return 0
        return sum(len(block.get("interface", [])) for block in data.get("lldp", []))

    def neighbors(self, device: str) -> str:
        """`lldpcli -f json0 show neighbors` as this device's lldpd answers it."""
        return subprocess.run(["lldpcli", "-u", self.socket(device), "-f", "json0", "show", "neighbors"],
                              capture_output=True, text=True, check=True, timeout=10).stdout

    def dump(self, devices: list[str], directory: Path) -> Path:
        """DEVICE.json files of raw lldpcli output, as `--lldp-dir` and `--switch-lldp` read them."""
        directory.mkdir(parents=True, exist_ok=True)
        for device in devices:
            (directory / f"{device}.json").write_text(self.neighbors(device))
        return directory

    def stop(self) -> None:
        for proc in self.daemons.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.daemons.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for ns in self.namespaces:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def build_lab(request: pytest.FixtureRequest) -> Callable[[Wiring], Lab]:
    """Start a lab; it is stopped (daemons by PID, namespaces by name) however the test ends."""
    def build(wiring: Wiring) -> Lab:
        lab = Lab(wiring)
        request.addfinalizer(lab.stop)
        return lab.start()
    return build


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def mismatches(snapshot: dict, wiring: Wiring) -> list[str]:
    """How a snapshot (the `discover -o json` dict) differs from the wiring's truth; empty when it agrees.

    Racks and blocks are compared as groupings (hosts together in the truth are together in the snapshot
    and apart otherwise); a rack's value must also name every switch of the rack.
    """
    nodes, errors = snapshot["nodes"], []
    if set(nodes) != set(wiring.rack):
        errors.append(f"placed {sorted(nodes)}, wired {sorted(wiring.rack)}")
    hosts = sorted(set(nodes) & set(wiring.rack))
    for level, truth in (("rack", wiring.rack), ("block", wiring.block)):
        for a in hosts:
            for b in hosts:
                if (truth[a] == truth[b]) != (nodes[a][level] == nodes[b][level]):
                    errors.append(f"{level}: {a} and {b} are {'together' if truth[a] == truth[b] else 'apart'} "
                                  f"in the wiring but {nodes[a][level]!r} / {nodes[b][level]!r} in the snapshot")
    errors += [f"{h}: rack {nodes[h]['rack']!r} does not name {sorted(wiring.rack[h])}" for h in hosts
               if not all(s in nodes[h]["rack"] for s in wiring.rack[h])]
    noted = {p.get("node") for p in snapshot["problems"]} - {None}
    expected = wiring.unwired | wiring.miswired | wiring.degraded
    if noted != expected:
        errors.append(f"problems name {sorted(noted)}, expected {sorted(expected)}")
    return errors
