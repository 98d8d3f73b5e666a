"""Fabric health in the cluster, end to end with real parts: ibsim with a subnet manager (`opensm --once`), a
collector process (`--ib-errors`: the real ibnetdiscover and ibqueryerrors through umad2sim) and the node agents
(`--ib-health`) authenticated as their manifests' ServiceAccounts, and the operator as its own user reading what
they publish. Packet drops injected on one HCA port in the simulator take that node, and only it, out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack.ibfabric import Spec, build
from labeler.topology.isolation import COUNTERS
from providers.infiniband.published import ERRORS_AT, PORT_ERRORS, object_name
from labeler.cluster.shards import read_manifest
from testkit.ibcluster import NAMESPACE, ibnetdiscover_wrapper
from testkit.ibsim import ibsim, needs_opensm  # noqa: F401 (ibsim is a fixture)
from testkit.ibsysfs import write_sysfs
from testkit.kubecluster import KubeCluster, kube, kube_cluster  # noqa: F401 (fixtures)
from testkit.operatorrun import InThread, wait_until
from tests.test_health_apiserver import health, nodes, taints
from tests.test_ib_collector import AUTO_FABRIC, LEASE_SECONDS, hca_devices, ib  # noqa: F401 (fixture)
from tests.test_ib_collector import CollectorProcess
from tests.test_operator_apiserver import cluster, options, prepared  # noqa: F401 (fixtures)
from topolabel.cli import main

pytestmark = [needs_opensm, pytest.mark.slow]


def test_drops_on_one_hca_port_seen_by_the_collector_take_that_node_only(
        ib: dict[str, Any], cluster: KubeCluster, ibsim, tmp_path: Path) -> None:  # noqa: F811
    fabric = build(Spec(sus=4, hosts=5, spines=2))  # 20 hosts
    hosts = sorted(fabric.truth.guids)
    sim = ibsim(fabric, console=True)
    sim.subnet_manager(tmp_path)
    cluster.create_nodes([{"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": h, "labels": {"kubernetes.io/hostname": h}},
                           "status": {"conditions": [{"type": "Ready", "status": "True"}]}} for h in hosts])
    # every node's agent publishes its GUIDs and its ports' record, as the agent's ServiceAccount
    for host in hosts:
        sysfs = write_sysfs(tmp_path / "agents" / host, [
            d.__class__(d.name, d.node_guid, [p.__class__(counters=dict.fromkeys(COUNTERS, 0)) for p in d.ports])
            for d in hca_devices(fabric, host)])
        assert main(["agent", "--no-lldp", "--infiniband", "--ib-health", "--once", "--sysfs", str(sysfs),
                     "--node-name", host, "--kubeconfig", str(ib["agent"])]) == 0
    leader = hosts[0]
    workdir = tmp_path / leader
    workdir.mkdir()
    first = f"hca-{leader}-{fabric.truth.guids[leader][0][0]}"
    discover = ibnetdiscover_wrapper(workdir / "ibnetdiscover", {"*": (sim, first)})
    query = ibnetdiscover_wrapper(workdir / "ibqueryerrors", {"*": (sim, first)}, tool="ibqueryerrors")
    # its token bound to the pod it names as the Lease holder, as the lease-writes admission policy requires
    kubeconfig = ib["collector_for"](f"collector-{leader}")
    collector = CollectorProcess(leader, kubeconfig, write_sysfs(workdir / "sys", hca_devices(fabric, leader)),
                                 workdir, "--ibnetdiscover", str(discover), "--ib-errors", "--ibqueryerrors",
                                 str(query), "--lease-duration", str(LEASE_SECONDS), "--interval", "2",
                                 "--ib-timeout", "30")
    config = tmp_path / "topolabel.yaml"
    config.write_text(yaml.safe_dump({"health": {"enabled": True, "degradeAfter": 2, "fabric": AUTO_FABRIC,
                                                 "fabricNamespace": NAMESPACE, "taint": {"effect": "NoSchedule"}}}))
    flags = {"source": "infiniband", "ib_fabric": AUTO_FABRIC, "ib_namespace": NAMESPACE}
    manifest = lambda: read_manifest(cluster.api(), NAMESPACE, object_name(AUTO_FABRIC))  # noqa: E731
    try:
        # the collector's first reading is its baseline; the second publishes what rose since (nothing yet)
        wait_until(lambda: (m := manifest()) is not None and ERRORS_AT in m.info, 120, "a reading with increases")
        with InThread(options(cluster, config_path=str(config), flags=flags, resync=1.0)) as op:
            wait_until(lambda: all(health(n) for n in nodes(cluster).values()), 60, "every node's FabricHealthy")
            assert {health(n)[:2] for n in nodes(cluster).values()} == {("True", "FabricOK")}
            victim = hosts[7]
            hca = f"hca-{victim}-{fabric.truth.guids[victim][0][0]}"
            for drops in (300, 900, 1500, 2100):  # dropping on: a new increase in each of the collector's runs
                at = manifest().info[ERRORS_AT]
                sim.set_counter(hca, 1, "PortXmitDiscards", drops)
                wait_until(lambda: manifest().info[ERRORS_AT] != at and f'"{fabric.nodes[hca].guid + 1:016x}"'
                           in manifest().info[PORT_ERRORS], 60, f"the collector's reading of {drops} drops")
            wait_until(lambda: (health(nodes(cluster)[victim]) or ("",))[0] == "False", 30, "the victim isolated")
            op.wait_passes(op.passes() + 2)
            seen = nodes(cluster)
            status, reason, message = health(seen[victim])
            assert (status, reason) == ("False", "FabricDegraded")
            # the drops stopped with the last increase: the node waits out its clean period, and says why it is out
            assert f"{fabric.truth.guids[victim][0][0]} port 1: port_xmit_discards +600" in message
            assert taints(seen[victim]) == [{"key": "topolabel.dev/fabric-degraded", "effect": "NoSchedule"}]
            assert {n for n, node in seen.items() if health(node)[0] == "False" or taints(node)} == {victim}
            doc = json.loads(manifest().info[PORT_ERRORS])
            assert doc["window"] >= 1 and all(port == 1 for _, port, _ in doc["ports"])
    finally:
        collector.kill()
