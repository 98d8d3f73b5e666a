"""InfiniBand in the cluster, end to end with real parts: ibsim and the real ibnetdiscover (through umad2sim),
collector processes and node agents authenticated as their manifests' ServiceAccounts, and the operator as
its own user, all on the real API server. No file is handed to the operator: it reads what the collectors
publish and the GUIDs the agents annotate.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from hack.ibfabric import Fabric, Spec, build
from labeler.kube import request_json
from labeler.shards import read_manifest
from providers.infiniband.published import object_name
from tests.ibcluster import (AGENT, COLLECTOR, NAMESPACE, CollectorProcess, apply_docs, ibnetdiscover_wrapper,
                              manifest_docs, sa_kubeconfig)
from tests.ibsim import Simulator, ibsim, needs_ibsim  # noqa: F401 (ibsim is a fixture)
from tests.ibsysfs import FakeDevice, FakePort, write_sysfs
from tests.kubecluster import KubeCluster, kube, kube_cluster  # noqa: F401
from tests.operatorrun import InThread, wait_until
from tests.test_operator_apiserver import cluster, options, prepared  # noqa: F401 (fixtures)
from topolabel.cli import main

pytestmark = [needs_ibsim, pytest.mark.slow]
LEASE_SECONDS = 4.0
AUTO_FABRIC = "fe80000000000000"  # ibsim's subnet prefix, the fabric's name when none is given
LEAFGROUP = "topolabel.dev/leafgroup"


@pytest.fixture
def ib(cluster: KubeCluster, tmp_path: Path) -> Iterator[dict[str, Any]]:  # noqa: F811
    """The namespace, ServiceAccounts and RBAC of manifests/agent and manifests/ib-collector; kubeconfigs for
    the agent and the collector; the operator user bound to the fabric reader Role. Leases and published
    fabrics are deleted before and after."""
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "topolabel-ib-fabric-reader-test-user", "namespace": NAMESPACE},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "topolabel-ib-fabric-reader"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "topolabel-operator"}]}
    apply_docs(cluster, manifest_docs(AGENT / "namespace.yaml", AGENT / "serviceaccount.yaml", AGENT / "rbac.yaml",
                                      COLLECTOR / "rbac.yaml") + [binding])
    clean(cluster)
    yield {"agent": sa_kubeconfig(cluster, NAMESPACE, "topolabel-agent", tmp_path / "agent.kubeconfig"),
           "collector": sa_kubeconfig(cluster, NAMESPACE, "topolabel-ib-collector", tmp_path / "collector.kubeconfig")}
    clean(cluster)


def clean(cluster: KubeCluster) -> None:  # noqa: F811
    cluster.kubectl("delete", "configmaps", "-n", NAMESPACE, "-l", "app.kubernetes.io/managed-by=topolabel")
    cluster.kubectl("delete", "leases", "-n", NAMESPACE, "--all")


def hca_devices(fabric: Fabric, host: str, **port: Any) -> list[FakeDevice]:
    """A host's HCAs as its sysfs shows them: node GUIDs from the fabric, port GUIDs node + port (as ibsim)."""
    return [FakeDevice(device, guid, [FakePort(**port)]) for device, guid in fabric.truth.guids[host]]


def start_collector(name: str, fabric: Fabric, sim: Simulator, ib: dict[str, Any], tmp_path: Path,
                    *args: str) -> CollectorProcess:
    """A collector on host `name`: its own sysfs, and an ibnetdiscover that attaches at its first HCA."""
    sysfs = write_sysfs(tmp_path / name / "sys", hca_devices(fabric, name))
    first = fabric.truth.guids[name][0][0]
    wrapper = ibnetdiscover_wrapper(tmp_path / name / "ibnetdiscover", {"*": (sim, f"hca-{name}-{first}")})
    return CollectorProcess(name, ib["collector"], sysfs, tmp_path / name, "--ibnetdiscover", str(wrapper),
                            "--lease-duration", str(LEASE_SECONDS), "--interval", "2", "--ib-timeout", "30", *args)


def lease_holder(kube: KubeCluster, fabric: str) -> str | None:  # noqa: F811
    try:
        lease = request_json(kube.api(), "GET", f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/"
                                                f"{object_name(fabric)}")
    except Exception:  # noqa: BLE001 - not created yet
        return None
    return (lease.get("spec") or {}).get("holderIdentity")


def leafgroups(kube: KubeCluster) -> dict[str, str | None]:  # noqa: F811
    return {n: labels.get(LEAFGROUP) for n, labels in kube.node_labels().items()}


def partition(values: dict[str, str | None]) -> set[frozenset[str]]:
    groups: dict[str, set[str]] = {}
    for host, value in values.items():
        if value is not None:
            groups.setdefault(value, set()).add(host)
    return {frozenset(g) for g in groups.values()}


def problems(op: InThread) -> list[tuple[str | None, str]]:
    snapshot = op.operator.controller.topology.snapshot if op.operator.controller else None
    return [(p.node, p.message) for p in (snapshot.problems if snapshot else [])]


def test_collectors_publish_the_fabric_the_operator_labels_from_it_a_standby_takes_over_and_a_cut_is_seen(
        ib: dict[str, Any], cluster: KubeCluster, ibsim, tmp_path: Path) -> None:  # noqa: F811
    fabric = build(Spec(sus=3, rails=2, hosts=3, spines=2, default_hosts=1, seed=3))
    truth = fabric.truth
    hosts = sorted(truth.guids)
    default_host = next(iter(set(hosts) - truth.named_hosts()))
    sim = ibsim(fabric, console=True)
    cluster.create_nodes([{"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": h, "labels": {"kubernetes.io/hostname": h}}} for h in hosts])
    first, second = [h for h in hosts if h != default_host][:2]
    collectors = [start_collector(first, fabric, sim, ib, tmp_path), start_collector(second, fabric, sim, ib, tmp_path)]
    try:
        flags = {"source": "infiniband", "ib_fabric": "*", "ib_namespace": NAMESPACE}
        with InThread(options(cluster, flags=flags, resync=2.0)) as op:
            # every host whose HCAs name it is labelled from the published fabric, as the truth groups them
            named = truth.named_hosts()
            want = partition({h: truth.leafgroup[h] for h in named})
            wait_until(lambda: partition({h: v for h, v in leafgroups(cluster).items() if h in named}) == want,
                       120, "the named hosts' leaf groups")
            assert leafgroups(cluster)[default_host] is None
            assert any(node == default_host and "no HCA in the InfiniBand fabric" in m for node, m in problems(op))

            # the agents annotate each node's GUIDs (as the agent's ServiceAccount): the default host is placed
            for host in hosts:
                sysfs = write_sysfs(tmp_path / "agents" / host, hca_devices(fabric, host))
                assert main(["agent", "--no-lldp", "--infiniband", "--once", "--sysfs", str(sysfs), "--node-name",
                             host, "--kubeconfig", str(ib["agent"])]) == 0
            everyone = partition(truth.leafgroup)
            wait_until(lambda: partition(leafgroups(cluster)) == everyone, 60, "every host, the default one too")

            # kill the leader outright: the standby takes the lease over once it has not changed for its duration
            leader_id = wait_until(lambda: lease_holder(cluster, AUTO_FABRIC), 30, "a lease holder")
            leader = next(c for c in collectors if c.identity == leader_id)
            standby = next(c for c in collectors if c is not leader)
            before = read_manifest(cluster.api(), NAMESPACE, object_name(AUTO_FABRIC))
            assert before is not None and before.info["collector"] == leader.name
            killed = time.monotonic()
            leader.kill()
            wait_until(lambda: lease_holder(cluster, AUTO_FABRIC) == standby.identity, 3 * LEASE_SECONDS,
                       "the standby's takeover")
            takeover = time.monotonic() - killed
            print(f"takeover after the leader was killed: {takeover:.2f}s (lease {LEASE_SECONDS:g}s)")
            assert LEASE_SECONDS - 1.5 <= takeover <= LEASE_SECONDS + 2.0, takeover
            # the standby rediscovers at once; the fabric is the same, so only the manifest's heartbeat changes
            wait_until(lambda: read_manifest(cluster.api(), NAMESPACE, object_name(AUTO_FABRIC)).info["collector"]
                       == standby.name, 30, "the standby's first discovery")
            after = read_manifest(cluster.api(), NAMESPACE, object_name(AUTO_FABRIC))
            assert after is not None and after.sha256 == before.sha256 and after.shards == before.shards
            assert "leading (lease acquired)" in standby.output()

            # a cable cut in the simulator: the standby publishes the new fabric, the operator reports the host
            victim = next(h for h in sorted(named) if h not in (first, second))
            device = truth.guids[victim][0][0]
            sim.unlink(f"hca-{victim}-{device}", 1)
            wait_until(lambda: read_manifest(cluster.api(), NAMESPACE, object_name(AUTO_FABRIC)).sha256
                       != before.sha256, 30, "the new fabric's publication")
            wait_until(lambda: any(node == victim and m.startswith("no link to leaf") for node, m in problems(op)),
                       30, "the cut reported on its host")
            assert partition(leafgroups(cluster)) == everyone  # placed by its other link, nothing moved
    finally:
        for c in collectors:
            c.kill()
