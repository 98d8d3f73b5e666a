"""InfiniBand in the cluster, end to end with real parts: ibsim and the real ibnetdiscover (through umad2sim),
collector processes and node agents authenticated as their manifests' ServiceAccounts, and the operator as
its own user, all on the real API server. No file is handed to the operator: it reads what the collectors
publish and the GUIDs the agents annotate.
"""

from __future__ import annotations

import datetime
import json
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from kubernetes.client.exceptions import ApiException

from hack.ibfabric import Fabric, Spec, build
from labeler.cluster.kube import connect, request_json
from labeler.cluster.shards import publish, read_manifest, touch
from providers.infiniband.parse import parse_ibnetdiscover
from providers.infiniband.published import FABRIC_LABEL, TIME_FORMAT, encode, object_name, pack, to_bytes
from testkit.ibcluster import (AGENT, COLLECTOR, NAMESPACE, CollectorProcess, apply_docs, ibnetdiscover_wrapper,
                             lease_holder, manifest_docs, sa_kubeconfig)
from testkit.ibsim import Simulator, ibsim, needs_ibsim  # noqa: F401 (ibsim is a fixture)
from testkit.ibsysfs import FakeDevice, FakePort, write_sysfs
from testkit.kubecluster import KubeCluster, kube, kube_cluster  # noqa: F401
from testkit.operatorrun import InThread, wait_until
from tests.test_operator_apiserver import cluster, options, prepared  # noqa: F401 (fixtures)
from topolabel.cli import main

pytestmark = [needs_ibsim, pytest.mark.slow]
LEASE_SECONDS = 4.0
AUTO_FABRIC = "fe80000000000000"  # ibsim's subnet prefix, the fabric's name when none is given
LEAFGROUP = "topolabel.dev/leafgroup"
COLLECTOR_USER = f"system:serviceaccount:{NAMESPACE}:topolabel-ib-collector"
PROBE = "collector-probe"  # the pod the probing collector's token is bound to


@pytest.fixture
def ib(cluster: KubeCluster, tmp_path: Path) -> Iterator[dict[str, Any]]:  # noqa: F811
    """The namespace, ServiceAccounts and RBAC of manifests/agent and manifests/ib-collector, and the
    collectors' admission policies, in force; kubeconfigs for the agent and for collectors (`collector_for(pod)`:
    a token bound to that pod, as the Deployment's pods get; `collector`: the pod collector-probe's); the
    operator user bound to the fabric reader Role. Leases, published fabrics and the collectors' pods are
    deleted before and after. The policies stay: they match the collector's identity alone, and deleting the
    lease-holder binding would stop the API server's Lease informer that its params come from, for good
    (kubernetes/kubernetes#130887, in 1.36.2; docs/infiniband.md)."""
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "topolabel-ib-fabric-reader-test-user", "namespace": NAMESPACE},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "topolabel-ib-fabric-reader"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "topolabel-operator"}]}
    apply_docs(cluster, manifest_docs(AGENT / "namespace.yaml", AGENT / "serviceaccount.yaml", AGENT / "rbac.yaml",
                                      COLLECTOR / "rbac.yaml", COLLECTOR / "admission-policy.yaml") + [binding])
    clean(cluster)

    def collector_for(pod: str) -> Path:
        return sa_kubeconfig(cluster, NAMESPACE, "topolabel-ib-collector", tmp_path / f"{pod}.kubeconfig", pod=pod)

    collector = collector_for(PROBE)
    try:
        wait_until(lambda: collector_denial(collector, "create", config_map("policy-probe")), 30,
                   "the collector's admission policy to take effect")
        # and the lease holder's, with its Leases as params: a probe fabric another pod leads
        apply_docs(cluster, [lease("policy-probe", "collector-other")])
        wait_until(lambda: collector_denial(collector, "create", config_map(object_name("policy-probe"),
                                                                            fabric="policy-probe")), 60,
                   "the collectors' lease-holder policy to take effect")
        cluster.kubectl("delete", "lease", "-n", NAMESPACE, object_name("policy-probe"))
        yield {"agent": sa_kubeconfig(cluster, NAMESPACE, "topolabel-agent", tmp_path / "agent.kubeconfig"),
               "collector": collector, "collector_for": collector_for}
    finally:
        clean(cluster)


def clean(cluster: KubeCluster) -> None:  # noqa: F811
    cluster.kubectl("delete", "configmaps", "-n", NAMESPACE, "-l", "app.kubernetes.io/managed-by=topolabel")
    cluster.kubectl("delete", "configmaps", "-n", NAMESPACE, "--ignore-not-found", "team-settings")
    cluster.kubectl("delete", "leases", "-n", NAMESPACE, "--all")
    cluster.kubectl("delete", "pods", "-n", NAMESPACE, "-l", "topolabel.test/pod=collector", "--wait=false")


def config_map(name: str, managed: bool = True, fabric: str | None = None) -> dict[str, Any]:
    labels = {"app.kubernetes.io/managed-by": "topolabel"} if managed else {}
    if fabric is not None:
        labels[FABRIC_LABEL] = fabric
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}}


def lease(fabric: str, holder: str) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": object_name(fabric), "namespace": NAMESPACE},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 30}}


def collector_denial(kubeconfig: Path, verb: str, obj: dict[str, Any]) -> str | None:
    """The policy's message when the collector's `verb` of `obj` (a ConfigMap or a Lease) is denied, else None
    (a dry run: nothing is written)."""
    plural = "leases" if obj["kind"] == "Lease" else "configmaps"
    base = (f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases" if plural == "leases"
            else f"/api/v1/namespaces/{NAMESPACE}/configmaps")
    path, body = (base, obj) if verb == "create" else (f"{base}/{obj['metadata']['name']}", None)
    try:
        request_json(connect(str(kubeconfig)), "POST" if verb == "create" else "DELETE", path, body=body,
                     query=[("dryRun", "All")])
    except ApiException as exc:
        assert exc.status == 403, exc.body
        return json.loads(exc.body)["message"]
    return None


def hca_devices(fabric: Fabric, host: str, **port: Any) -> list[FakeDevice]:
    """A host's HCAs as its sysfs shows them: node GUIDs from the fabric, port GUIDs node + port (as ibsim)."""
    return [FakeDevice(device, guid, [FakePort(**port)]) for device, guid in fabric.truth.guids[host]]


def start_collector(name: str, fabric: Fabric, sim: Simulator, ib: dict[str, Any], tmp_path: Path,
                    *args: str) -> CollectorProcess:
    """A collector on host `name`: its own sysfs, and an ibnetdiscover that attaches at its first HCA."""
    sysfs = write_sysfs(tmp_path / name / "sys", hca_devices(fabric, name))
    first = fabric.truth.guids[name][0][0]
    wrapper = ibnetdiscover_wrapper(tmp_path / name / "ibnetdiscover", {"*": (sim, f"hca-{name}-{first}")})
    return CollectorProcess(name, ib["collector_for"](f"collector-{name}"), sysfs, tmp_path / name,
                            "--ibnetdiscover", str(wrapper),
                            "--lease-duration", str(LEASE_SECONDS), "--interval", "2", "--ib-timeout", "30", *args)


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


OWN, LEASE_WRITES = "topolabel-ib-collector-own-objects", "topolabel-ib-collector-lease-writes"


@pytest.mark.parametrize("verb, obj, policy, fragment", [
    ("create", config_map("team-settings"), OWN,
     "may only write ConfigMaps and Leases named topolabel-ib-*, not team-settings"),
    # held by the probe itself, so that lease-writes (which refuses any other holder) has no say and the
    # message is own-objects' whichever policy the server evaluates first
    ("create", {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "kube-leader"},
                "spec": {"holderIdentity": PROBE}}, OWN, "not kube-leader"),
    ("create", config_map("topolabel-ib-unlabelled", managed=False), OWN,
     "carry app.kubernetes.io/managed-by=topolabel"),
    ("create", config_map(object_name(AUTO_FABRIC)), OWN, "is not fabric (none: no topolabel.dev/ib-fabric label)"),
    ("create", config_map(object_name("storage"), fabric=AUTO_FABRIC), OWN, f"is not fabric {AUTO_FABRIC}'s manifest"),
    ("create", lease("x", "collector-other"), LEASE_WRITES,
     "a collector writes a Lease only with itself (collector-probe)"),
    ("delete", config_map("kube-root-ca.crt"), OWN, "not kube-root-ca.crt"),
])
def test_the_real_server_keeps_the_collector_to_its_own_objects(ib: dict[str, Any], verb: str, obj: dict[str, Any],
                                                               policy: str, fragment: str) -> None:
    """RBAC lets the collector create and delete any ConfigMap and create any Lease of its namespace; the
    admission policies keep it to its fabrics' objects, labelled as topolabel's, and say so."""
    denied = collector_denial(ib["collector"], verb, obj)
    assert denied is not None and policy in denied and fragment in denied, denied


def test_the_server_type_checks_the_collectors_policies_without_warnings(cluster: KubeCluster,  # noqa: F811
                                                                         ib: dict[str, Any]) -> None:
    for name in (OWN, LEASE_WRITES, "topolabel-ib-collector-lease-holder"):
        assert cluster.type_check_warnings(name) == [], name


def test_the_real_server_lets_only_the_fabrics_lease_holder_write_its_publication(
        cluster: KubeCluster, ib: dict[str, Any]) -> None:  # noqa: F811
    """Issue 32, S3: any collector's token could overwrite or delete every fabric's publication, and read every
    ConfigMap of its namespace (one held another application's password)."""
    manifest = config_map(object_name(AUTO_FABRIC), fabric=AUTO_FABRIC)
    lease_of = lease(AUTO_FABRIC, PROBE)
    assert collector_denial(ib["collector"], "create", lease_of) is None  # a collector contends as itself
    apply_docs(cluster, [lease_of])
    wait_until(lambda: collector_denial(ib["collector"], "create", manifest) is None, 30, "the Lease as a param")
    apply_docs(cluster, [lease(AUTO_FABRIC, "collector-other")])  # another pod leads the fabric now
    wait_until(lambda: collector_denial(ib["collector"], "create", manifest), 30, "the new holder")
    denied = collector_denial(ib["collector"], "create", manifest)
    assert "topolabel-ib-collector-lease-holder" in denied and (
        f"may write {object_name(AUTO_FABRIC)} only while it holds the Lease {object_name(AUTO_FABRIC)}, which "
        "collector-other holds") in denied, denied
    # reads: its fabric's manifest by name, nothing else
    cluster.kubectl("create", "configmap", "team-settings", "-n", NAMESPACE, "--from-literal=password=hunter2")
    api = connect(str(ib["collector"]))
    for name in ("team-settings", "kube-root-ca.crt"):
        with pytest.raises(ApiException) as refused:
            request_json(api, "GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps/{name}")
        assert refused.value.status == 403
    with pytest.raises(ApiException) as missing:
        request_json(api, "GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps/{object_name(AUTO_FABRIC)}")
    assert missing.value.status == 404  # may read it: it is not there yet


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
    start = cluster.audit_mark()
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
            leader_id = wait_until(lambda: lease_holder(cluster, object_name(AUTO_FABRIC)), 30, "a lease holder")
            leader = next(c for c in collectors if c.identity == leader_id)
            standby = next(c for c in collectors if c is not leader)
            before = read_manifest(cluster.api(), NAMESPACE, object_name(AUTO_FABRIC))
            assert before is not None and before.info["collector"] == leader.name

            def heartbeats() -> int:
                """The collectors' successful patches of the manifest (a round that found the fabric unchanged)."""
                return [e.name for e in cluster.requests(start, resource="configmaps", user=COLLECTOR_USER)
                        if e.code < 300 and e.verb == "patch"].count(object_name(AUTO_FABRIC))
            # the leader has run a round after its publication (under load its first rounds can outlast the steps above)
            wait_until(lambda: heartbeats() >= 1, 30, "the leader's heartbeat")
            killed = time.monotonic()
            leader.kill()
            wait_until(lambda: lease_holder(cluster, object_name(AUTO_FABRIC)) == standby.identity,
                       3 * LEASE_SECONDS, "the standby's takeover")
            takeover = time.monotonic() - killed
            print(f"takeover after the leader was killed: {takeover:.2f}s (lease {LEASE_SECONDS:g}s)")
            assert LEASE_SECONDS - 1.5 <= takeover <= LEASE_SECONDS + 2.0, takeover
            # the standby rediscovers at once; the fabric is the same, so only the manifest's heartbeat changes
            wait_until(lambda: read_manifest(cluster.api(), NAMESPACE, object_name(AUTO_FABRIC)).info["collector"]
                       == standby.name, 30, "the standby's first discovery")
            after = read_manifest(cluster.api(), NAMESPACE, object_name(AUTO_FABRIC))
            assert after is not None and after.sha256 == before.sha256 and after.shards == before.shards
            assert "leading (lease acquired)" in standby.output()
            # one publication (a shard and the manifest) however many rounds two leaders ran; heartbeats besides
            writes = [e for e in cluster.requests(start, resource="configmaps", user=COLLECTOR_USER) if e.code < 300]
            assert [e.verb for e in writes if e.verb in ("create", "update", "delete")] == ["create", "create"]
            assert heartbeats() >= 2  # the leader's and the standby's

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


def discover_json(capsys: pytest.CaptureFixture, kubeconfig: Path, *args: str) -> tuple[int, Any, str]:
    """`topolabel discover --source infiniband ... -o json` as the operator's user; (code, snapshot, stderr)."""
    code = main(["discover", "--source", "infiniband", "--ib-namespace", NAMESPACE, "--kubeconfig", str(kubeconfig),
                 "-o", "json", *args])
    out, err = capsys.readouterr()
    return code, json.loads(out) if code == 0 else None, err


def test_two_fabrics_on_one_prefix_are_told_apart_by_name_and_read_apart(
        ib: dict[str, Any], cluster: KubeCluster, ibsim, tmp_path: Path,  # noqa: F811
        capsys: pytest.CaptureFixture) -> None:
    """Compute (mlx5_0, mlx5_1) and storage (mlx5_8) are two subnets that both keep the default prefix."""
    compute = build(Spec(sus=2, rails=2, hosts=2, spines=2, seed=1))
    storage = build(Spec(sus=2, rails=1, hosts=2, spines=1, device="mlx5_8", naming="plain", seed=2))
    hosts = sorted(compute.truth.guids)
    assert hosts == sorted(storage.truth.guids)
    sims = {"compute": ibsim(compute), "storage": ibsim(storage)}
    cluster.create_nodes([{"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": h, "labels": {"kubernetes.io/hostname": h}}} for h in hosts])
    host = hosts[0]
    sysfs = write_sysfs(tmp_path / "sys", hca_devices(compute, host) + hca_devices(storage, host))
    wrapper = ibnetdiscover_wrapper(tmp_path / "ibnetdiscover", {
        "mlx5_[0-7]": (sims["compute"], f"hca-{host}-mlx5_0"), "mlx5_8": (sims["storage"], f"hca-{host}-mlx5_8")})
    operator = cluster.operator_kubeconfig
    kubeconfig = ib["collector_for"](f"collector-{host}")
    # fabrics named with --ib-fabric are added to the Role's resourceNames, as manifests/ib-collector/rbac.yaml says
    role = next(d for d in manifest_docs(COLLECTOR / "rbac.yaml") if d["kind"] == "Role"
                and d["metadata"]["name"] == "topolabel-ib-collector")
    for rule in role["rules"]:
        if "resourceNames" in rule:
            rule["resourceNames"] += [object_name("compute"), object_name("storage")]
    apply_docs(cluster, [role])

    def run_collector(*names: str) -> CollectorProcess:
        return CollectorProcess(host, kubeconfig, sysfs, tmp_path / "work", "--ibnetdiscover", str(wrapper),
                                "--lease-duration", "3", "--interval", "2", *names)

    def published(fabric: str) -> bool:
        return read_manifest(cluster.api(), NAMESPACE, object_name(fabric)) is not None

    # without names: one fabric per prefix, so the storage HCA is counted in it; the discovery shows it is not
    collector = run_collector()
    try:
        wait_until(lambda: published(AUTO_FABRIC), 60, "the prefix-named fabric")
    finally:
        collector.stop()
    code, snap, _ = discover_json(capsys, operator, "--ib-fabric")
    assert code == 0
    notes = [p["message"] for p in snap["problems"]]
    assert any(f"{host}: mlx5_8 port 1 counted in fabric {AUTO_FABRIC} but not in the discovery from mlx5_0 port 1: "
               "two subnets share the subnet prefix" in m for m in notes), notes
    assert lease_holder(cluster, object_name(AUTO_FABRIC)) is None  # SIGTERM handed the lease back

    # named by their HCAs: two leases, two publications
    collector = run_collector("--ib-fabric", "compute=^mlx5_[0-7]$", "--ib-fabric", "storage=^mlx5_8$")
    try:
        wait_until(lambda: published("compute") and published("storage"), 60, "both fabrics")
        holders = {lease_holder(cluster, object_name(fabric)) for fabric in ("compute", "storage")}
        assert holders == {collector.identity}
    finally:
        collector.stop()
    for name, fabric in (("compute", compute), ("storage", storage)):
        code, snap, err = discover_json(capsys, operator, "--ib-fabric", name)
        assert code == 0, err
        groups: dict[str, set[str]] = {}
        for node, values in snap["nodes"].items():
            groups.setdefault(values["leafgroup"], set()).add(node)
        assert {frozenset(g) for g in groups.values()} == partition(fabric.truth.leafgroup)
        leaves = {n.name for n in fabric.nodes.values() if n.kind == "Switch"}
        assert all(any(leaf in value for leaf in leaves) for value in groups), (name, groups)  # its own switches
        assert not any("not in the discovery" in p["message"] for p in snap["problems"])
    code, _, err = discover_json(capsys, operator, "--ib-fabric")
    assert code == 2 and f"3 fabrics published in namespace {NAMESPACE} (compute, {AUTO_FABRIC}, storage)" in err
    code, snap, _ = discover_json(capsys, operator, "--ib-fabric", "compute", "--hca-pattern", "^mlx5_0$")
    assert code == 0 and "HCAs used: mlx5_0;" in snap["problems"][0]["message"] + ";"
    code, _, err = discover_json(capsys, operator, "--ib-fabric", "rail9")
    assert code == 2 and "no fabric 'rail9' published" in err and "published: compute" in err


def events(cluster: KubeCluster, reason: str) -> list[str]:  # noqa: F811
    found = request_json(cluster.api(), "GET", "/api/v1/namespaces/default/events")
    return [e["message"] for e in found["items"] if e.get("reason") == reason]


def test_a_stale_or_missing_fabric_keeps_the_labels_with_an_event_and_a_condition_naming_its_age(
        ib: dict[str, Any], cluster: KubeCluster) -> None:  # noqa: F811
    """Published here without a simulator (the collector's own publish calls); then made stale, then removed."""
    fabric = build(Spec(sus=2, rails=1, hosts=2, spines=1))
    hosts = sorted(fabric.truth.guids)
    cluster.create_nodes([{"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": h, "labels": {"kubernetes.io/hostname": h}}} for h in hosts])
    api = cluster.api()
    name = object_name("compute")
    labels = {"app.kubernetes.io/managed-by": "topolabel", FABRIC_LABEL: "compute"}

    def checked(ago: float) -> dict[str, str]:
        when = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=ago)
        return {"checkedAt": when.strftime(TIME_FORMAT), "collector": "gpu-x"}

    blob = pack(to_bytes(encode(parse_ibnetdiscover(fabric.capture_text(), "test"))))
    publish(api, NAMESPACE, name, blob, checked(0), labels, None)
    flags = {"source": "infiniband", "ib_fabric": "compute", "ib_namespace": NAMESPACE, "ib_max_age": 600}
    with InThread(options(cluster, flags=flags, resync=1.0)) as op:
        want = partition(fabric.truth.leafgroup)
        wait_until(lambda: partition(leafgroups(cluster)) == want, 60, "labels from the published fabric")
        labelled = leafgroups(cluster)
        condition = op.operator.controller.conditions.items

        manifest = read_manifest(api, NAMESPACE, name)
        touch(api, NAMESPACE, manifest, checked(2 * 3600 + 5 * 60))  # the collector stopped 2h05m ago
        wait_until(lambda: op.conditions.get("SourceAvailable") == ("False", "InputStale"), 30, "InputStale")
        message = condition["SourceAvailable"].message
        assert "was last discovered 2h 05m ago by the collector on gpu-x, longer than ibMaxAge 10m 00s" in message
        assert "nothing removed, labelling from the last good topology" in message
        # the Event is posted after the condition, by kopf's event poster
        wait_until(lambda: any("2h 05m ago" in m for m in events(cluster, "InputStale")), 30, "the InputStale Event")
        op.wait_passes(op.passes() + 2)
        assert leafgroups(cluster) == labelled

        request_json(api, "DELETE", f"/api/v1/namespaces/{NAMESPACE}/configmaps/{name}")
        wait_until(lambda: "no fabric 'compute' published" in condition["SourceAvailable"].message, 30, "missing")
        op.wait_passes(op.passes() + 2)
        assert leafgroups(cluster) == labelled

        publish(api, NAMESPACE, name, blob, checked(0), labels, None)
        wait_until(lambda: op.conditions.get("SourceAvailable", ("",))[0] == "True", 30, "the fabric back")
