"""How the collector tells fabrics apart from this node's sysfs, and its command line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from labeler.errors import InputError
from providers.infiniband.fabric import Fabric
from providers.infiniband.sysfs import read_devices
from testkit.ibsysfs import FakeDevice, FakePort, write_sysfs
from topolabel.cli import main
from topolabel.ibcollector import Collector, Settings, fabric_ports, parse_fabric_names

STORAGE = 0xFEC0000000000001


def node(tmp_path: Path) -> list:
    return read_devices(write_sysfs(tmp_path, [
        FakeDevice("mlx5_0", 0xA0, [FakePort()]),
        FakeDevice("mlx5_1", 0xB0, [FakePort(), FakePort(2, state=2)]),  # port 2 INIT: no subnet manager yet
        FakeDevice("mlx5_8", 0xC0, [FakePort(subnet_prefix=STORAGE)]),
        FakeDevice("mlx5_9", 0xD0, [FakePort(state=1)]),  # DOWN
        FakeDevice("mlx5_bond_0", 0xE0, [FakePort(link_layer="Ethernet")]),
    ]))


def summary(fabrics: dict) -> dict[str, list[str]]:
    return {name: [p.label for p in ports] for name, ports in fabrics.items()}


def test_without_names_each_subnet_prefix_is_a_fabric_of_active_infiniband_ports(tmp_path: Path) -> None:
    fabrics = fabric_ports(node(tmp_path), {})
    assert summary(fabrics) == {"fe80000000000000": ["mlx5_0 port 1", "mlx5_1 port 1"],
                                "fec0000000000001": ["mlx5_8 port 1"]}
    first = fabrics["fe80000000000000"][0]
    assert (first.node_guid, first.port_guid, first.sm_lid) == (0xA0, 0xA1, 1)


def test_names_pick_ports_by_device_the_first_match_winning(tmp_path: Path) -> None:
    named = parse_fabric_names(["compute=^mlx5_[0-7]$", "storage=^mlx5_(8|9)$", "all=mlx5"])
    assert summary(fabric_ports(node(tmp_path), named)) == {"compute": ["mlx5_0 port 1", "mlx5_1 port 1"],
                                                           "storage": ["mlx5_8 port 1"]}
    assert summary(fabric_ports(node(tmp_path), parse_fabric_names(["rail0=^mlx5_0$"]))) == {"rail0": ["mlx5_0 port 1"]}


@pytest.mark.parametrize("spec, fragment", [
    ("compute", "expected NAME=REGEX"), ("Compute=x", "expected NAME=REGEX"), ("a_b=x", "expected NAME=REGEX"),
    ("compute=mlx5_[", "not a regular expression"),
])
def test_bad_fabric_names_are_one_line(spec: str, fragment: str) -> None:
    with pytest.raises(InputError, match=re.escape(f"--ib-fabric {spec!r}: {fragment}")):
        parse_fabric_names([spec])


def test_a_port_missing_from_the_discovery_is_a_notice(tmp_path: Path) -> None:
    ports = fabric_ports(node(tmp_path), {})["fe80000000000000"]
    collector = Collector(None, Settings(namespace="ns", node="gpu-1", identity="c"))
    assert collector.notices("fe80000000000000", ports, hcas(0xA0, 0xB0)) == []
    [notice] = collector.notices("fe80000000000000", ports, hcas(0xA0))
    assert notice.startswith("gpu-1: mlx5_1 port 1 counted in fabric fe80000000000000 but not in the discovery from "
                             "mlx5_0 port 1: two subnets share the subnet prefix")


def hcas(*guids: int) -> Fabric:
    """A fabric of these HCAs alone (what `notices` reads of a discovery is which node GUIDs it holds)."""
    return Fabric(list(guids), ["ca"] * len(guids), [""] * len(guids), [1] * len(guids), [], [])


@pytest.mark.parametrize("args, fragment", [
    (["--once"], "--ib-collector runs alone until stopped"),
    (["--infiniband"], "--ib-collector runs alone until stopped"),
    (["--lease-duration", "1"], "--lease-duration must be at least 3 seconds"),
    (["--ib-fabric", "x"], "--ib-fabric 'x': expected NAME=REGEX"),
])
def test_bad_collector_flags_exit_2_with_one_line(args: list[str], fragment: str,
                                                  capsys: pytest.CaptureFixture) -> None:
    code = main(["agent", "--ib-collector", "--node-name", "gpu-1", "--kubeconfig", "/nonexistent", *args])
    err = capsys.readouterr().err
    assert code == 2 and fragment in err and len(err.strip().splitlines()) == 1, err
