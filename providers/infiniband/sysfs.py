"""This host's RDMA devices as the kernel shows them under /sys/class/infiniband (root configurable, for tests).

Per device: `node_guid` (`e09d:7303:0085:8d88`), `node_type` (`1: CA`), and per port under `ports/N/`:
`state` (`4: ACTIVE`), `link_layer` (`InfiniBand`, or `Ethernet` for RoCE), `lid` and `sm_lid` (`0x2a`)
and `gids/0`, whose upper half is the subnet prefix and lower half the port GUID
(`fe80:0000:0000:0000:e09d:7303:0085:8d89`). Entries under class/infiniband are symlinks into
/sys/devices; they are read through the links as the kernel lays them out.

For fabric health (`read_port_health`) also `phys_state` (`5: LinkUp`), `rate` (`400 Gb/sec (4X NDR)`) and the
error counters under `counters/` (`link_downed`, `symbol_error`, ...: what the port's PMA counts, since boot or
the last clear).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from labeler.errors import InputError, SourceError

from .names import natural_key
from .parse import parse_guid

ACTIVE = 4
INFINIBAND = "InfiniBand"


@dataclass(frozen=True)
class Port:
    number: int
    state: int  # 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE
    link_layer: str
    subnet_prefix: int
    guid: int
    lid: int
    sm_lid: int

    @property
    def active_ib(self) -> bool:
        return self.state == ACTIVE and self.link_layer == INFINIBAND


@dataclass(frozen=True)
class Device:
    name: str
    node_guid: int
    is_ca: bool
    ports: tuple[Port, ...]

    @property
    def infiniband(self) -> bool:
        """An HCA with at least one InfiniBand port (RoCE devices have only Ethernet ones)."""
        return self.is_ca and any(p.link_layer == INFINIBAND for p in self.ports)


def read_devices(sysfs: str | Path = "/sys") -> list[Device]:
    """Every RDMA device, by natural name order; none when the class is absent (no RDMA driver loaded)."""
    root = Path(sysfs) / "class" / "infiniband"
    try:
        entries = sorted(root.iterdir(), key=lambda p: natural_key(p.name))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise SourceError(f"{root}: cannot read: {exc.strerror or exc}") from None
    return [_device(entry) for entry in entries]


def _device(path: Path) -> Device:
    try:
        guid = parse_guid(_read(path / "node_guid"))
        node_type = _read(path / "node_type", "1: CA")
        ports_dir = path / "ports"
        numbers = sorted(int(p.name) for p in ports_dir.iterdir() if p.name.isdigit()) if ports_dir.is_dir() else []
        ports = tuple(_port(ports_dir / str(n), n) for n in numbers)
    except (OSError, InputError, ValueError) as exc:
        raise SourceError(f"{path}: cannot read the device: {exc}") from None
    return Device(path.name, guid, node_type.split(":", 1)[0].strip() == "1", ports)


def _port(path: Path, number: int) -> Port:
    gid = _read(path / "gids" / "0", "0000:0000:0000:0000:0000:0000:0000:0000")
    digits = gid.replace(":", "")
    if not re.fullmatch(r"[0-9a-fA-F]{32}", digits):
        raise InputError(f"{path / 'gids' / '0'}: {gid!r} is not a GID")
    return Port(number, _leading_int(_read(path / "state", "1: DOWN")), _read(path / "link_layer", INFINIBAND),
                int(digits[:16], 16), int(digits[16:], 16), int(_read(path / "lid", "0"), 0),
                int(_read(path / "sm_lid", "0"), 0))


def _read(path: Path, default: str | None = None) -> str:
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        if default is None:
            raise
        return default


def _leading_int(text: str) -> int:
    """`4: ACTIVE` -> 4."""
    return int(text.split(":", 1)[0].strip())


@dataclass(frozen=True)
class PortHealth:
    """An InfiniBand port as fabric health reads it: states, rate (Gb/s, 0 when unknown) and error counters."""

    device: str
    port: int
    state: int
    phys_state: int  # 5 LinkUp; 2 Polling and 3 Disabled are a link down
    rate: float
    counters: dict[str, int]

    @property
    def name(self) -> str:
        return f"{self.device}/{self.port}"


def read_port_health(sysfs: str | Path, counters: Iterable[str]) -> list[PortHealth]:
    """The InfiniBand ports of this host's HCAs, with the named counters (those the kernel lacks are left out)."""
    wanted = tuple(counters)
    root = Path(sysfs) / "class" / "infiniband"
    out = []
    for device in read_devices(sysfs):
        for port in device.ports if device.infiniband else ():
            if port.link_layer != INFINIBAND:
                continue
            path = root / device.name / "ports" / str(port.number)
            try:
                rate = re.match(r"\s*([0-9.]+)", _read(path / "rate", "0"))
                values = {name: int(text) for name in wanted if (text := _read(path / "counters" / name, ""))}
                out.append(PortHealth(device.name, port.number, port.state,
                                      _leading_int(_read(path / "phys_state", "0: unknown")),
                                      float(rate.group(1)) if rate else 0.0, values))
            except (OSError, ValueError) as exc:
                raise SourceError(f"{path}: cannot read the port: {exc}") from None
    return out


def guid_entries(devices: list[Device]) -> str | None:
    """The `topolabel.dev/ib-node-guids` value: `DEVICE=0xNODEGUID` per InfiniBand HCA, plus `DEVICE=0xPORTGUID`
    for InfiniBand ports whose GUID differs from the node's (port 2 of a dual-port HCA); None without any."""
    entries = []
    for device in devices:
        if not device.infiniband:
            continue
        guids = [device.node_guid] + [p.guid for p in device.ports
                                      if p.link_layer == INFINIBAND and p.guid not in (0, device.node_guid)]
        entries += [f"{device.name}={guid:#018x}" for guid in dict.fromkeys(guids)]
    return ",".join(entries) or None
