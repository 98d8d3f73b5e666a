"""Benchmark: how long a fabric goes without a collector when the leading one dies or stops.

Real parts: a kube-apiserver 1.20 + etcd started here (hack/testcluster.py), the collector's ServiceAccount
and Role from manifests/ib-collector, ibsim serving a small fabric and the real ibnetdiscover behind each
collector. Two collector processes per run; the leader is killed with SIGKILL (a dead node: nothing
released) or stopped with SIGTERM (a rolling update: the Lease is handed over), and the time until the
standby holds the Lease is read by polling the Lease every 50 ms. Run: python -m bench.ibtakeover
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.table import print_table
from hack import testcluster
from hack.ibfabric import Spec, build
from providers.infiniband.published import object_name
from testkit.ibcluster import (AGENT, COLLECTOR, NAMESPACE, CollectorProcess, apply_docs, ibnetdiscover_wrapper,
                             lease_holder, manifest_docs, sa_kubeconfig)
from testkit.ibsim import simulate
from testkit.ibsysfs import FakeDevice, FakePort, write_sysfs
from testkit.kubecluster import KubeCluster

LEASE = object_name("fe80000000000000")  # ibsim's subnet prefix names the fabric


def wait(check, limit: float) -> float:
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > limit:
            raise SystemExit(f"gave up after {limit:.0f}s")
        time.sleep(0.05)
    return time.monotonic() - start


def one_run(cluster: KubeCluster, sim, fabric, kubeconfig: Path, tmp: Path, lease: float, how: str) -> float:
    hosts = sorted(fabric.truth.guids)[:2]
    collectors = []
    for host in hosts:
        devices = [FakeDevice(d, g, [FakePort()]) for d, g in fabric.truth.guids[host]]
        sysfs = write_sysfs(tmp / how / host / "sys", devices)
        wrapper = ibnetdiscover_wrapper(tmp / how / host / "ibnetdiscover", {"*": (sim, f"hca-{host}-mlx5_0")})
        collectors.append(CollectorProcess(host, kubeconfig, sysfs, tmp / how / host, "--ibnetdiscover", str(wrapper),
                                           "--lease-duration", str(lease), "--interval", "30"))
    try:
        wait(lambda: lease_holder(cluster, LEASE) in {c.identity for c in collectors}, 3 * lease + 60)
        leader = next(c for c in collectors if c.identity == lease_holder(cluster, LEASE))
        standby = next(c for c in collectors if c is not leader)
        time.sleep(lease / 2)  # mid-way between renewals, on average
        start = time.monotonic()
        if how == "SIGKILL":
            leader.kill()
        else:
            leader.stop()
        wait(lambda: lease_holder(cluster, LEASE) == standby.identity, 3 * lease + 30)
        return time.monotonic() - start
    finally:
        for c in collectors:
            c.kill()
        cluster.kubectl("delete", "configmaps", "-n", NAMESPACE, "-l", "app.kubernetes.io/managed-by=topolabel")
        cluster.kubectl("delete", "leases", "-n", NAMESPACE, "--all")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--leases", type=float, nargs="+", default=[4, 15, 30], metavar="SECONDS")
    args = parser.parse_args()
    fabric = build(Spec(sus=2, rails=1, hosts=2, spines=1))
    rows = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        binaries = testcluster.find_binaries()
        if binaries is None:
            raise SystemExit("no kube-apiserver: run hack/build-test-stack")
        cluster = KubeCluster(tmp / "kube", testcluster.up(tmp / "kube", binaries))
        try:
            apply_docs(cluster, manifest_docs(AGENT / "namespace.yaml", COLLECTOR / "rbac.yaml"))
            kubeconfig = sa_kubeconfig(cluster, NAMESPACE, "topolabel-ib-collector", tmp / "collector.kubeconfig")
            with simulate(fabric, tmp) as sim:
                for lease in args.leases:
                    rows.append({"lease s": f"{lease:g}",
                                 "leader killed (SIGKILL): standby holds the lease after s":
                                     round(one_run(cluster, sim, fabric, kubeconfig, tmp, lease, "SIGKILL"), 2),
                                 "leader stopped (SIGTERM): standby holds the lease after s":
                                     round(one_run(cluster, sim, fabric, kubeconfig, tmp, lease, "SIGTERM"), 2)})
        finally:
            testcluster.down(tmp / "kube")
    print_table("InfiniBand collector: takeover", rows)


if __name__ == "__main__":
    main()
