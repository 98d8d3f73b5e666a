"""Reading HCAs from sysfs (a tree shaped like the kernel's) and the GUID annotation the agent writes from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from labeler.errors import SourceError
from providers.infiniband.hosts import GuidMap
from providers.infiniband.sysfs import guid_entries, read_devices
from testkit.ibsysfs import FakeDevice, FakePort, write_sysfs

STORAGE_PREFIX = 0xFEC0000000000001


def host(tmp_path: Path) -> Path:
    return write_sysfs(tmp_path, [
        FakeDevice("mlx5_0", 0xE09D730300858D88, [FakePort(guid=0xE09D730300858D88)]),
        FakeDevice("mlx5_1", 0xE09D730300858D8C, [FakePort(1, guid=0xE09D730300858D8C),
                                                   FakePort(2, state=1, guid=0xE09D730300858D8D)]),
        FakeDevice("mlx5_10", 0xE09D7303008590A0, [FakePort(subnet_prefix=STORAGE_PREFIX, guid=0xE09D7303008590A0)]),
        FakeDevice("mlx5_bond_0", 0x0C42A10300B4E3F0, [FakePort(link_layer="Ethernet", guid=0x0A5C1BFFFE000001)]),
    ])


def test_devices_read_through_the_class_links_in_natural_order(tmp_path: Path) -> None:
    devices = read_devices(host(tmp_path))
    assert (tmp_path / "class" / "infiniband" / "mlx5_0").is_symlink()
    assert [d.name for d in devices] == ["mlx5_0", "mlx5_1", "mlx5_10", "mlx5_bond_0"]
    first = devices[0]
    assert first.node_guid == 0xE09D730300858D88 and first.is_ca and first.infiniband
    port = first.ports[0]
    assert (port.number, port.state, port.link_layer, port.lid, port.sm_lid) == (1, 4, "InfiniBand", 0x2A, 1)
    assert (port.subnet_prefix, port.guid) == (0xFE80000000000000, 0xE09D730300858D88) and port.active_ib
    assert [p.active_ib for p in devices[1].ports] == [True, False]  # port 2 is DOWN
    assert devices[2].ports[0].subnet_prefix == STORAGE_PREFIX
    roce = devices[3]
    assert roce.ports[0].link_layer == "Ethernet" and not roce.infiniband and not roce.ports[0].active_ib


def test_annotation_lists_infiniband_hcas_and_port_guids_that_differ(tmp_path: Path) -> None:
    value = guid_entries(read_devices(host(tmp_path)))
    assert value == ("mlx5_0=0xe09d730300858d88,mlx5_1=0xe09d730300858d8c,mlx5_1=0xe09d730300858d8d,"
                     "mlx5_10=0xe09d7303008590a0")  # RoCE left out; port 2's own GUID kept although it is down
    guids = GuidMap()
    guids.add("gpu-001", value, "annotation")  # the source reads back exactly what the agent writes
    assert not guids.errors and guids.claims[0xE09D730300858D8D]["gpu-001"].device == "mlx5_1"


def test_a_node_without_rdma_publishes_nothing(tmp_path: Path) -> None:
    assert read_devices(tmp_path) == [] and guid_entries([]) is None
    only_roce = write_sysfs(tmp_path, [FakeDevice("mlx5_bond_0", 0x0C42A10300B4E3F0, [FakePort(link_layer="Ethernet")])])
    assert guid_entries(read_devices(only_roce)) is None


def test_a_broken_device_is_one_line_naming_the_file(tmp_path: Path) -> None:
    root = host(tmp_path)
    (tmp_path / "class" / "infiniband" / "mlx5_1" / "node_guid").write_text("not-a-guid\n")
    with pytest.raises(SourceError, match=r"infiniband/mlx5_1: cannot read the device: 'not-a-guid' is not a GUID"):
        read_devices(root)
    (tmp_path / "class" / "infiniband" / "mlx5_1" / "node_guid").unlink()
    with pytest.raises(SourceError, match=r"mlx5_1: cannot read the device: .*node_guid"):
        read_devices(root)
