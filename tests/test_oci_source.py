"""The oci source end to end: the real `oci` SDK, signing with an API key from an OCI config file, against a
local OCI API (testkit/oci_server.py) that checks each request's signature.

Every test counts the calls the server saw against the bound: one ListAvailabilityDomains, one
ListComputeHosts per page of each availability domain listed, one GetComputeHost per host of a node whose
summary lacks a topology field.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from labeler.errors import SourceError
from labeler.io.nodes import Node
from labeler.topology.placement import level_keys, to_snapshot
from providers.base import SourceContext
from providers.labels import discover as discover_labels
from providers.oci import PAGE_LIMIT, discover
from testkit.environment import ROOT
from testkit.oci_server import TENANCY, ApiKey, OciServer, host

pytest.importorskip("oci")

AD1, AD2 = "Uocm:US-CHICAGO-1-AD-1", "Uocm:US-CHICAGO-1-AD-2"
ZONE = "topology.kubernetes.io/zone"
OCI = "oci.oraclecloud.com/"

# The held-out fixture: where each GPU host sits, as a table (AD, island, network block, local block, hosts).
LAYOUT = [(AD1, "isl-a", "nb-a1", "lb-a1-0", 4), (AD1, "isl-a", "nb-a1", "lb-a1-1", 4),
          (AD1, "isl-a", "nb-a2", "lb-a2-0", 4), (AD2, "isl-b", "nb-b1", "lb-b1-0", 4)]


def ocid(kind: str, name: str) -> str:
    """An OCID as OCI issues them; its last 11 characters are what Oracle's OKE labeler writes."""
    return f"ocid1.{kind}.oc1.us-chicago-1.anxxeljr{name:0>11}"


def instance(i: int) -> str:
    return f"ocid1.instance.oc1.us-chicago-1.anxxeljrinst{i:06d}"


def cluster(others: int = 10) -> tuple[list[dict], list[Node], dict[str, dict[str, str]]]:
    """Hosts per LAYOUT (plus `others` hosts of instances outside the cluster), the OKE nodes on them, and
    where each node must land, from the table alone."""
    bodies, nodes, expected = [], [], {}
    i = 0
    for ad, island, block, local, count in LAYOUT:
        for _ in range(count):
            bodies.append(host(instance(i), ad, ocid("hpcisland", island), ocid("networkblock", block),
                               ocid("localblock", local), index=i))
            provider = instance(i) if i % 2 else f"oci://{instance(i)}"  # OKE writes the bare OCID
            nodes.append(Node(f"gpu-{i:02d}", provider_id=provider, labels={ZONE: ad.split(":")[1]}))
            expected[f"gpu-{i:02d}"] = {"island": f"{island:0>11}", "block": f"{block:0>11}",
                                        "local-block": f"{local:0>11}"}
            i += 1
    for j in range(others):
        bodies.append(host(instance(1000 + j), AD1, ocid("hpcisland", "isl-a"), ocid("networkblock", "nb-x"),
                           ocid("localblock", "lb-x"), index=1000 + j))
    return bodies, nodes, expected


@pytest.fixture
def key(tmp_path: Path) -> ApiKey:
    return ApiKey.create(tmp_path)


def run(server: OciServer, nodes: list[Node], tmp_path: Path, **options):
    options = {"oci_config": str(server.key.config_file(tmp_path)), "oci_endpoint": server.url, **options}
    found = discover(SourceContext(nodes=nodes, options=options, origin="test"))
    return found, to_snapshot(found, level_keys(found.level_names))


def bound(server: OciServer, listed: list[str], read_in_full: int = 0) -> int:
    """The calls the source may make: 1 + the pages of each availability domain listed + hosts read in full."""
    pages = sum(max(1, math.ceil(sum(1 for h in server.hosts if h["availabilityDomain"] == ad)
                                 / min(PAGE_LIMIT, server.page_cap))) for ad in listed)
    return 1 + pages + read_in_full


def test_places_a_held_out_cluster_exactly(key: ApiKey, tmp_path: Path) -> None:
    bodies, nodes, expected = cluster()
    with OciServer(key, bodies, domains=[AD1, AD2, "Uocm:US-CHICAGO-1-AD-3"]) as server:
        found, snap = run(server, nodes, tmp_path)
    assert [lv.name for lv in snap.levels] == ["island", "block", "local-block"]
    assert snap.nodes == expected and not snap.problems
    # the nodes' zone labels name AD-1 and AD-2: AD-3 is never listed
    assert server.count("ListAvailabilityDomains") == 1
    assert server.count("ListComputeHosts", "Uocm:US-CHICAGO-1-AD-3") == 0
    assert len(server.calls) == bound(server, [AD1, AD2]) == 3
    assert {c.limit for c in server.calls if c.operation == "ListComputeHosts"} == {PAGE_LIMIT}


def test_pages_are_followed_and_each_is_one_call(key: ApiKey, tmp_path: Path) -> None:
    bodies, nodes, expected = cluster(others=23)
    with OciServer(key, bodies, domains=[AD1, AD2], page_cap=5) as server:
        _, snap = run(server, nodes, tmp_path)
    assert snap.nodes == expected
    assert server.count("ListComputeHosts", AD1) == math.ceil((12 + 23) / 5)
    assert server.count("ListComputeHosts", AD2) == 1
    assert [c.page for c in server.calls if c.availability_domain == AD1] == [None] + [str(5 * k) for k in range(1, 7)]
    assert len(server.calls) == bound(server, [AD1, AD2])


def test_every_domain_is_listed_when_a_node_names_no_zone(key: ApiKey, tmp_path: Path) -> None:
    bodies, nodes, expected = cluster(others=0)
    nodes[0] = Node(nodes[0].name, provider_id=nodes[0].provider_id)  # no zone label
    domains = [AD1, AD2, "Uocm:US-CHICAGO-1-AD-3"]
    with OciServer(key, bodies, domains=domains) as server:
        _, snap = run(server, nodes, tmp_path)
    assert snap.nodes == expected
    assert len(server.calls) == bound(server, domains) == 4


def test_summaries_without_topology_are_read_in_full(key: ApiKey, tmp_path: Path) -> None:
    bodies, nodes, expected = cluster()
    ours = {b["id"] for b in bodies[:3]}
    strangers = {b["id"] for b in bodies[-2:]}  # hosts of instances outside the cluster are never read
    with OciServer(key, bodies, domains=[AD1, AD2], bare_summaries=ours | strangers) as server:
        _, snap = run(server, nodes, tmp_path)
    assert snap.nodes == expected
    assert server.count("GetComputeHost") == 3 and len(server.calls) == bound(server, [AD1, AD2], read_in_full=3)


def test_every_unplaceable_node_is_a_problem_of_its_own(key: ApiKey, tmp_path: Path) -> None:
    bodies, nodes, expected = cluster(others=0)
    bodies[1].pop("localBlockId")  # a host whose record lacks a field, in summary and in full
    bodies[2].pop("hpcIslandId")
    bodies[2].pop("networkBlockId")
    gone = bodies[3]["id"]
    nodes += [Node("vm-node", provider_id=instance(77), labels={ZONE: "US-CHICAGO-1-AD-1"}),
              Node("kind-worker", provider_id="kind://docker/kind/kind-worker"),
              Node("no-provider"), Node("twin", provider_id=nodes[0].provider_id)]
    with OciServer(key, bodies, domains=[AD1, AD2], bare_summaries={gone}, gone={gone}) as server:
        _, snap = run(server, nodes, tmp_path)
    why = {p.node: p.message for p in snap.problems}
    assert set(snap.nodes) == set(expected) - {"gpu-01", "gpu-02", "gpu-03"}
    assert set(why) == {"gpu-01", "gpu-02", "gpu-03", "vm-node", "kind-worker", "no-provider", "twin"}
    assert why["gpu-01"].endswith("has no localBlockId (its shape or capacity reports no RDMA topology)")
    assert "has no hpcIslandId, networkBlockId" in why["gpu-02"]
    assert f"compute host {gone} could not be read: 404 NotAuthorizedOrNotFound" in why["gpu-03"]
    assert why["vm-node"].startswith(f"instance {instance(77)} is on no compute host listed in {AD1}, {AD2} "
                                     f"of compartment {TENANCY}")
    assert "'kind://docker/kind/kind-worker' is not an OCI instance" in why["kind-worker"]
    assert why["no-provider"].startswith("no spec.providerID is not an OCI instance")
    assert why["twin"] == f"instance {instance(0)} is also node gpu-00's; left as it is"
    # the three hosts whose summaries lack a field are read in full; the others' summaries are enough
    assert server.count("GetComputeHost") == 3 and len(server.calls) == bound(server, [AD1, AD2], read_in_full=3)


def test_gpu_memory_fabrics_are_the_nvlink_level(key: ApiKey, tmp_path: Path) -> None:
    bodies, nodes, expected = cluster(others=0)
    for i, body in enumerate(bodies[:8]):  # two GB200 racks in lb-a1-0 and lb-a1-1
        body["gpuMemoryFabricId"] = ocid("computegpumemoryfabric", f"rack-{i // 4}")
    with OciServer(key, bodies, domains=[AD1, AD2]) as server:
        _, snap = run(server, nodes, tmp_path)
    assert [lv.name for lv in snap.levels] == ["island", "block", "local-block", "nvlink"]
    assert snap.nodes["gpu-05"]["nvlink"] == "00000rack-1"
    assert snap.nodes["gpu-09"]["nvlink"] == "gpu-09"  # no fabric: a domain of its own
    assert {n: {k: v for k, v in values.items() if k != "nvlink"} for n, values in snap.nodes.items()} == expected


def test_values_equal_what_oracles_labeler_writes_so_the_sources_agree(key: ApiKey, tmp_path: Path) -> None:
    bodies, nodes, _ = cluster(others=0)
    with OciServer(key, bodies, domains=[AD1, AD2]) as server:
        _, snap = run(server, nodes, tmp_path)
    by_instance = {b["instanceId"]: b for b in bodies}
    labelled = []
    for n in nodes:  # the same nodes as the OKE labeler labels them: the last 11 characters of each OCID
        b = by_instance[n.provider_id.removeprefix("oci://")]
        labelled.append(Node(n.name, labels={OCI + "rdma.hpc_island_id": b["hpcIslandId"][-11:],
                                             OCI + "rdma.network_block_id": b["networkBlockId"][-11:],
                                             OCI + "rdma.local_block_id": b["localBlockId"][-11:]}))
    found = discover_labels(SourceContext(nodes=labelled, options={"preset": "oci"}))
    assert to_snapshot(found, level_keys(found.level_names)).nodes == snap.nodes


def test_a_key_oci_does_not_know_is_one_error(key: ApiKey, tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    stranger = ApiKey.create(tmp_path / "other")
    bodies, nodes, _ = cluster(others=0)
    with OciServer(key, bodies) as server:
        config = stranger.config_file(tmp_path / "other")
        with pytest.raises(SourceError, match=r"^oci: OCI rejected the credentials for ListAvailabilityDomains "
                                              r"\(401 NotAuthenticated: "):
            discover(SourceContext(nodes=nodes, options={"oci_config": str(config), "oci_endpoint": server.url}))
    assert server.count() == 1


def test_a_denied_tenancy_names_the_permission(key: ApiKey, tmp_path: Path) -> None:
    bodies, nodes, _ = cluster(others=0)
    with OciServer(key, bodies, denied={TENANCY}) as server:
        with pytest.raises(SourceError, match=r"ListAvailabilityDomains in compartment .*: not authorized, or no "
                                              r"such compartment; .*docs/oci.md, Permissions"):
            run(server, nodes, tmp_path)


def test_throttling_and_server_errors_are_retried(key: ApiKey, tmp_path: Path) -> None:
    bodies, nodes, expected = cluster(others=0)
    fail = [(429, "TooManyRequests"), (500, "InternalServerError")]
    with OciServer(key, bodies, domains=[AD1, AD2], fail=fail) as server:
        _, snap = run(server, nodes, tmp_path)
    assert snap.nodes == expected and len(server.calls) == bound(server, [AD1, AD2]) + 2


def test_a_bad_request_is_an_error_not_a_retry(key: ApiKey, tmp_path: Path) -> None:
    bodies, nodes, _ = cluster(others=0)
    with OciServer(key, bodies, fail=[(400, "InvalidParameter")]) as server:
        with pytest.raises(SourceError, match=r"^oci: ListAvailabilityDomains failed \(400 InvalidParameter"):
            run(server, nodes, tmp_path)
    assert server.count() == 1


def test_unreachable_endpoint(key: ApiKey, tmp_path: Path) -> None:
    with OciServer(key) as server:
        url = server.url
    with pytest.raises(SourceError, match="cannot reach the OCI API for ListAvailabilityDomains"):
        discover(SourceContext(nodes=cluster(others=0)[1], options={"oci_config": str(key.config_file(tmp_path)),
                                                                   "oci_endpoint": url}))


def test_no_config_file_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"^oci: cannot authenticate \(config\): ConfigFileNotFound"):
        discover(SourceContext(nodes=cluster(others=0)[1], options={"oci_config": str(tmp_path / "missing")}))


def test_nodes_without_oci_instances_need_no_api() -> None:
    found = discover(SourceContext(nodes=[Node("w", provider_id="aws:///us-east-1a/i-0abc")],
                                   options={"oci_config": "/nonexistent", "oci_endpoint": "http://127.0.0.1:9"}))
    assert found.paths == {} and found.problems[0].node == "w"


def test_without_the_sdk_the_error_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "oci", None)
    with pytest.raises(SourceError, match=r"the OCI SDK is not installed: pip install 'topolabel\[oci\]'"):
        discover(SourceContext(nodes=cluster(others=0)[1], options={}))


def test_cli_discover(key: ApiKey, tmp_path: Path) -> None:
    bodies, nodes, expected = cluster(others=0)
    items = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n.name, "labels": dict(n.labels)},
              "spec": {"providerID": n.provider_id}} for n in nodes]
    (tmp_path / "nodes.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    with OciServer(key, bodies, domains=[AD1, AD2]) as server:
        ok = subprocess.run([sys.executable, "-m", "topolabel.cli", "discover", "--source", "oci", "--oci-config",
                             str(key.config_file(tmp_path)), "--oci-endpoint", server.url, "--nodes",
                             str(tmp_path / "nodes.json"), "-o", "json"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
        bad = subprocess.run([sys.executable, "-m", "topolabel.cli", "discover", "--source", "oci", "--oci-config",
                              str(tmp_path / "missing"), "--nodes", str(tmp_path / "nodes.json")], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["nodes"] == expected
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
