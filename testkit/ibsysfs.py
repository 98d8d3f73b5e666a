"""Fake sysfs trees shaped exactly like the kernel's, for the agent's and the collector's `--sysfs`.

`class/infiniband/<dev>` is a symlink into `devices/pci.../infiniband/<dev>` as on a real host; every file
holds what the kernel prints, newline included (`node_guid` as `e09d:7303:0085:8d88`, `state` as
`4: ACTIVE`, `gids/0` as the subnet prefix and port GUID in eight groups of four hex digits, `rate` as
`400 Gb/sec (4X NDR)`, each error counter as a decimal under `counters/`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_PREFIX = 0xFE80000000000000
STATES = {1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE"}


@dataclass
class FakePort:
    number: int = 1
    state: int = 4
    link_layer: str = "InfiniBand"
    subnet_prefix: int = DEFAULT_PREFIX
    guid: int | None = None  # default: the node GUID plus the port number, as ibsim gives them
    lid: int = 0x2A
    sm_lid: int = 1
    rate: str = "400 Gb/sec (4X NDR)"
    phys_state: str | None = None  # default: 5: LinkUp when the port is up, else 3: Disabled
    counters: dict[str, int] = field(default_factory=dict)  # ports/N/counters/<name>


@dataclass
class FakeDevice:
    name: str
    node_guid: int
    ports: list[FakePort] = field(default_factory=lambda: [FakePort()])
    node_type: str = "1: CA"
    desc: str = ""


def colon_hex(value: int, groups: int) -> str:
    digits = f"{value:0{groups * 4}x}"
    return ":".join(digits[i:i + 4] for i in range(0, len(digits), 4))


def write_sysfs(root: Path, devices: list[FakeDevice]) -> Path:
    """A sysfs tree under `root` with these devices; returns `root` (for `--sysfs`). Rewrites it when
    called again, so a test can take a port down or change a GUID."""
    classdir = root / "class" / "infiniband"
    classdir.mkdir(parents=True, exist_ok=True)
    for link in classdir.iterdir():
        link.unlink()
    for i, device in enumerate(devices):
        real = root / "devices" / "pci0000:00" / f"0000:00:{i + 1:02x}.0" / f"0000:{i + 3:02x}:00.0" / "infiniband" / device.name
        real.mkdir(parents=True, exist_ok=True)
        files = {"node_guid": colon_hex(device.node_guid, 4), "sys_image_guid": colon_hex(device.node_guid, 4),
                 "node_type": device.node_type, "node_desc": device.desc or f"host {device.name}",
                 "fw_ver": "28.39.1002", "hca_type": "MT4129", "board_id": "MT_0000000838"}
        for name, text in files.items():
            (real / name).write_text(text + "\n")
        for port in device.ports:
            pdir = real / "ports" / str(port.number)
            (pdir / "gids").mkdir(parents=True, exist_ok=True)
            (pdir / "counters").mkdir(exist_ok=True)
            guid = port.guid if port.guid is not None else device.node_guid + port.number
            ib = port.link_layer == "InfiniBand"
            pfiles = {"state": f"{port.state}: {STATES[port.state]}",
                      "phys_state": port.phys_state or ("5: LinkUp" if port.state > 1 else "3: Disabled"),
                      "link_layer": port.link_layer, "lid": f"{port.lid if ib else 0:#x}",
                      "sm_lid": f"{port.sm_lid if ib else 0:#x}", "lid_mask_count": "0", "sm_sl": "0",
                      "rate": port.rate, "cap_mask": "0xa651e848",
                      **{f"counters/{name}": str(value) for name, value in port.counters.items()},
                      "gids/0": colon_hex((port.subnet_prefix << 64) | guid, 8),
                      "gids/1": colon_hex(0, 8)}
            for name, text in pfiles.items():
                (pdir / name).write_text(text + "\n")
        (classdir / device.name).symlink_to(Path("..") / ".." / real.relative_to(root))
    return root
