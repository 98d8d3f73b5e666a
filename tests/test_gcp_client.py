"""The gcp source end to end: the real google-cloud-compute client (REST) against a local Compute API.

Every test counts the list calls the server saw and checks them against the bound: one call per zone
page, fewer when an aggregated list packs small zones together.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from labeler.errors import SourceError
from labeler.io.nodes import Node
from labeler.topology.model import Discovery
from labeler.topology.placement import level_keys, to_snapshot
from providers.base import SourceContext
from providers.gcp import AGGREGATED_FIELDS, PAGE_SIZE, ZONAL_FIELDS, discover, node_refs, plan_calls, with_project
from testkit.compute_server import ComputeServer, instance
from testkit.environment import ROOT
from topolabel.cli import main


def topo(cluster: str, block: str, subblock: str, host: str) -> dict[str, str]:
    return {"cluster": cluster, "block": block, "subblock": subblock, "host": host}


def gce_node(project: str, zone: str, name: str, node: str | None = None) -> Node:
    return Node(node or name, provider_id=f"gce://{project}/{zone}/{name}")


def run(server: ComputeServer, nodes: list[Node], **options):
    options = {"api_endpoint": server.url, "anonymous": True, **options}
    found = discover(SourceContext(nodes=nodes, options=options, origin="test"))
    return found, to_snapshot(found, level_keys(found.level_names))


def expected_calls(nodes: list[Node], page: int = PAGE_SIZE) -> int:
    """The bound: the planned lists, each one page unless the server pages shorter."""
    refs = with_project(node_refs(nodes, Discovery("gcp", ())), None, Discovery("gcp", ()))
    return len(plan_calls(refs.values()))


@pytest.fixture
def cluster() -> tuple[list[dict], list[Node]]:
    """Two projects: proj-one with GPU nodes in three zones (one a CPU pool), proj-two in one zone."""
    bodies, nodes = [], []
    for zone, block in (("us-central1-a", "blk-a"), ("us-central1-b", "blk-b")):
        for i in range(6):
            name = f"gke-train-a3-pool-{zone[-1]}1f2e3d-{i:04d}"
            bodies.append(instance("proj-one", zone, name, topo("clu-1", block, f"{block}-sb{i // 3}", f"h-{name}")))
            nodes.append(gce_node("proj-one", zone, name))
    for i in range(2):
        name = f"gke-train-cpu-pool-c9a8b7-{i:04d}"
        bodies.append(instance("proj-one", "us-central1-c", name, None, machine_type="n2-standard-8"))
        nodes.append(gce_node("proj-one", "us-central1-c", name))
    for i in range(4):
        name = f"a4-{i}"
        bodies.append(instance("proj-two", "europe-west4-b", name, topo("clu-2", "blk-e", "blk-e-sb0", f"h-{i}"),
                               machine_type="a4-highgpu-8g"))
        nodes.append(gce_node("proj-two", "europe-west4-b", name, node=f"eu-{i}"))
    bodies.append(instance("proj-two", "europe-west4-b", "someone-elses-vm", topo("clu-2", "blk-e", "x", "y")))
    return bodies, nodes


def test_several_zones_and_projects(cluster) -> None:
    bodies, nodes = cluster
    with ComputeServer(bodies) as server:
        found, snap = run(server, nodes)
    assert [lv.name for lv in snap.levels] == ["cluster", "block", "subblock"]
    assert snap.nodes["gke-train-a3-pool-a1f2e3d-0004"] == {"cluster": "clu-1", "block": "blk-a", "subblock": "blk-a-sb1"}
    assert snap.nodes["gke-train-a3-pool-b1f2e3d-0000"] == {"cluster": "clu-1", "block": "blk-b", "subblock": "blk-b-sb0"}
    assert snap.nodes["eu-3"] == {"cluster": "clu-2", "block": "blk-e", "subblock": "blk-e-sb0"}
    assert len(snap.nodes) == 16
    cpu = {p.node: p.message for p in snap.problems}
    assert set(cpu) == {"gke-train-cpu-pool-c9a8b7-0000", "gke-train-cpu-pool-c9a8b7-0001"}
    assert "(n2-standard-8, RUNNING) has no resourceStatus.physicalHostTopology" in cpu["gke-train-cpu-pool-c9a8b7-0000"]
    # proj-one's three small zones share one aggregated list; proj-two's single zone has a zonal one
    assert server.count() == expected_calls(nodes) == 2
    assert server.count("proj-one", aggregated=True) == 1 and server.count("proj-two", "europe-west4-b") == 1
    assert all(c.max_results == PAGE_SIZE and c.filter.startswith('name eq "') for c in server.calls)
    assert {c.fields for c in server.calls} == {ZONAL_FIELDS, AGGREGATED_FIELDS}


def test_responses_carry_only_the_fields_needed() -> None:
    """GKE instances carry ~14 KB each (kube-env, disks, NICs); the field mask leaves ~260 bytes."""
    bodies = [instance("proj-one", f"zone-{i % 3}", f"n-{i}", topo("c", "b", f"s{i % 4}", f"h{i}"), bulk=True)
              for i in range(300)]
    nodes = [gce_node("proj-one", f"zone-{i % 3}", f"n-{i}") for i in range(300)]
    with ComputeServer(bodies) as server:
        _, snap = run(server, nodes)
    assert len(snap.nodes) == 300
    assert server.count() == 1 and server.bytes_sent < 300 * 400


def test_subblock_and_host_come_from_the_api_json(cluster) -> None:
    """The API spells it `subblock`; the client exposes it as `.subblock`. Host is a level on request."""
    bodies, nodes = cluster
    with ComputeServer(bodies) as server:
        _, snap = run(server, nodes, host_level=True)
    assert [lv.name for lv in snap.levels] == ["cluster", "block", "subblock", "host"]
    assert snap.nodes["eu-1"] == {"cluster": "clu-2", "block": "blk-e", "subblock": "blk-e-sb0", "host": "h-1"}


def test_pages_are_followed_and_each_is_one_call() -> None:
    bodies = [instance("proj-one", "zone-a", f"n-{i}", topo("c", "b", f"s{i % 2}", f"h{i}")) for i in range(5)]
    nodes = [gce_node("proj-one", "zone-a", f"n-{i}") for i in range(5)]
    with ComputeServer(bodies, page_cap=2) as server:
        _, snap = run(server, nodes)
    assert len(snap.nodes) == 5
    assert server.count() == 3  # ceil(5 / 2) pages of the one zonal list
    assert [c.page_token for c in server.calls] == [None, "offset-2", "offset-4"]


def test_calls_grow_with_the_cluster_not_the_project() -> None:
    """1,200 cluster nodes among 3,000 instances in a zone: 3 filtered pages, where listing all takes 6."""
    bodies, nodes = [], []
    for pool, count in (("gke-big-a3-pool-5e6f7a8b", 1200), ("other-team-vm-0a0b0c0d", 1800)):
        for i in range(count):
            name = f"{pool}-{i:04x}"
            bodies.append(instance("proj-one", "us-east5-a", name, topo("c", f"b{i // 64}", f"s{i // 16}", name)))
            if pool.startswith("gke-big"):
                nodes.append(gce_node("proj-one", "us-east5-a", name))
    with ComputeServer(bodies) as server:
        _, snap = run(server, nodes)
    assert len(snap.nodes) == 1200 and not snap.problems
    assert server.count() == expected_calls(nodes) == 3
    assert all(c.page_token is None for c in server.calls)  # every filtered list was one page


def test_unsupported_stopped_partial_and_missing_instances_are_problems_per_node() -> None:
    bodies = [instance("proj-one", "zone-a", "ok", topo("c", "b", "s", "h")),
              instance("proj-one", "zone-a", "stopped", None, status="TERMINATED"),
              instance("proj-one", "zone-a", "cpu", None, machine_type="e2-standard-4"),
              instance("proj-one", "zone-a", "nohost", {"cluster": "c", "block": "b", "subblock": "s2"})]
    nodes = [gce_node("proj-one", "zone-a", n) for n in ("ok", "stopped", "cpu", "nohost", "deleted")]
    nodes.append(Node("kind-worker", provider_id="kind://docker/kind/kind-worker"))
    with ComputeServer(bodies) as server:
        _, snap = run(server, nodes, host_level=True)
    assert set(snap.nodes) == {"ok"}
    messages = {p.node: p.message for p in snap.problems}
    assert "(a3-megagpu-8g, TERMINATED) has no resourceStatus.physicalHostTopology" in messages["stopped"]
    assert "(e2-standard-4, RUNNING) has no resourceStatus.physicalHostTopology" in messages["cpu"]
    assert "without host; run without --host-level" in messages["nohost"]
    assert messages["deleted"] == "instance proj-one/zone-a/deleted not found (deleted, or a stale providerID)"
    assert "not a GCE instance" in messages["kind-worker"]
    assert server.count() == 1


def test_unknown_zone_and_project_are_problems_for_their_nodes() -> None:
    bodies = [instance("proj-one", "zone-a", "ok", topo("c", "b", "s", "h"))]
    nodes = [gce_node("proj-one", "zone-a", "ok"), gce_node("proj-one", "zone-q", "lost"),
             gce_node("proj-nope", "zone-a", "x1"), gce_node("proj-nope", "zone-b", "x2")]
    with ComputeServer(bodies) as server:
        _, snap = run(server, nodes)
    assert set(snap.nodes) == {"ok"}
    messages = {p.node: p.message for p in snap.problems}
    # proj-one: two zones, one name each -> one aggregated list, where zone-q simply has no such instance
    assert messages["lost"] == "instance proj-one/zone-q/lost not found (deleted, or a stale providerID)"
    assert messages["x1"] == ("instance proj-nope/zone-a/x1: projects/proj-nope not found "
                              "(The resource 'projects/proj-nope' was not found)")
    assert server.count() == 2


def test_unknown_zone_on_a_zonal_list() -> None:
    with ComputeServer([instance("proj-one", "zone-a", "ok", topo("c", "b", "s", "h"))]) as server:
        _, snap = run(server, [gce_node("proj-one", "zone-z", "n1")])
    assert snap.problems[0].message == ("instance proj-one/zone-z/n1: projects/proj-one/zones/zone-z not found "
                                        "(The resource 'projects/proj-one/zones/zone-z' was not found)")


def test_permission_denied_is_one_clear_error(cluster) -> None:
    bodies, nodes = cluster
    with ComputeServer(bodies, forbidden={"proj-two"}) as server:
        with pytest.raises(SourceError, match=r"permission denied listing instances in "
                           r"projects/proj-two/zones/europe-west4-b: the credentials need compute\.instances\.list"):
            run(server, nodes)


def test_throttling_and_server_errors_are_retried() -> None:
    bodies = [instance("proj-one", "zone-a", "n1", topo("c", "b", "s", "h"))]
    with ComputeServer(bodies, fail=[429, 503]) as server:
        _, snap = run(server, [gce_node("proj-one", "zone-a", "n1")])
    assert snap.nodes["n1"]["subblock"] == "s"
    assert server.count() == 3  # two refused, then the one list


def test_a_bad_request_is_an_error_not_a_retry() -> None:
    with ComputeServer([instance("proj-one", "zone-a", "n1")], fail=[400]) as server:
        with pytest.raises(SourceError, match="listing instances in projects/proj-one/zones/zone-a failed: 400"):
            run(server, [gce_node("proj-one", "zone-a", "n1")])
    assert server.count() == 1


def test_unreachable_endpoint() -> None:
    with ComputeServer() as server:
        url = server.url
    with pytest.raises(SourceError, match=f"cannot reach the Compute API at {url}: .*refused"):
        discover(SourceContext(nodes=[gce_node("proj-one", "zone-a", "n1")],
                               options={"api_endpoint": url, "anonymous": True}))


def test_nodes_without_gce_instances_need_no_api() -> None:
    found = discover(SourceContext(nodes=[Node("w", provider_id="aws:///us-east-1a/i-0abc")],
                                   options={"api_endpoint": "http://127.0.0.1:9", "anonymous": False}))
    assert found.paths == {} and found.problems[0].node == "w"


@pytest.fixture
def on_gce(tmp_path, monkeypatch):
    """Application Default Credentials as on a GCE VM: the local server plays the metadata server.

    The environment is what google-auth documents; it also reads GCE_METADATA_HOST once at import, so
    the module's copy is set too (the subprocess test below goes by the environment alone).
    """
    from google.auth.compute_engine import _metadata

    def setup(server: ComputeServer) -> dict[str, str]:
        host = server.url.removeprefix("http://")
        env = {"GCE_METADATA_HOST": host, "GCE_METADATA_IP": host, "CLOUDSDK_CONFIG": str(tmp_path)}
        for key in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT"):
            monkeypatch.delenv(key, raising=False)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.setattr(_metadata, "_GCE_METADATA_HOST", host)
        return env

    return setup


def test_application_default_credentials_and_their_project(on_gce) -> None:
    bodies = [instance("proj-metadata", "zone-a", "n1", topo("c", "b", "s", "h"))]
    with ComputeServer(bodies, token="ya29.local") as server:
        on_gce(server)
        _, snap = run(server, [Node("n1", provider_id="gce:///zone-a/n1")], anonymous=False)
    assert snap.nodes["n1"] == {"cluster": "c", "block": "b", "subblock": "s"}
    assert server.count("proj-metadata") == 1


def test_project_flag_wins_over_the_adc_project(on_gce) -> None:
    bodies = [instance("proj-flag", "zone-a", "n1", topo("c", "b", "s", "h"))]
    with ComputeServer(bodies, token="ya29.local") as server:
        on_gce(server)
        _, snap = run(server, [Node("n1", provider_id="gce:///zone-a/n1")], anonymous=False, project="proj-flag")
    assert "n1" in snap.nodes and server.count("proj-flag") == 1


def test_refused_token(on_gce) -> None:
    with ComputeServer([instance("proj-one", "zone-a", "n1")], token="ya29.local", issue="") as server:
        on_gce(server)
        with pytest.raises(SourceError, match="wants credentials and none could be had: .*403"):
            run(server, [gce_node("proj-one", "zone-a", "n1")], anonymous=False)
    assert server.count() == 0


def test_rejected_token(on_gce) -> None:
    with ComputeServer([instance("proj-one", "zone-a", "n1")], token="ya29.local", issue="ya29.stale") as server:
        on_gce(server)
        with pytest.raises(SourceError, match="credentials were rejected .*missing required authentication"):
            run(server, [gce_node("proj-one", "zone-a", "n1")], anonymous=False)


def test_anonymous_against_an_api_that_wants_credentials() -> None:
    with ComputeServer([instance("proj-one", "zone-a", "n1")], token="ya29.local") as server:
        with pytest.raises(SourceError, match="wants credentials and none could be had: Anonymous"):
            run(server, [gce_node("proj-one", "zone-a", "n1")])


def test_cli_on_a_vm_with_default_credentials(on_gce, tmp_path) -> None:
    """The in-cluster path as a user runs it: `topolabel` in its own process, ADC from the metadata server."""
    nodes_file = tmp_path / "nodes.yaml"
    nodes_file.write_text(yaml.safe_dump({"items": [
        {"metadata": {"name": f"n{i}"}, "spec": {"providerID": f"gce:///zone-{i % 2}/n{i}"}} for i in range(4)]}))
    bodies = [instance("proj-metadata", f"zone-{i % 2}", f"n{i}", topo("c", "b", f"s{i % 2}", "h")) for i in range(4)]
    with ComputeServer(bodies, token="ya29.local") as server:
        env = {**os.environ, **on_gce(server)}
        done = subprocess.run([sys.executable, "-m", "topolabel.cli", "discover", "--source", "gcp", "--nodes",
                               str(nodes_file), "--api-endpoint", server.url, "-o", "json"],
                              env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    snap = json.loads(done.stdout)
    assert snap["nodes"]["n3"] == {"cluster": "c", "block": "b", "subblock": "s1"} and not snap["problems"]
    assert server.count("proj-metadata", aggregated=True) == 1


def test_missing_credentials_say_how_to_get_them(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "absent.json"))
    with pytest.raises(SourceError, match="no Application Default Credentials .*gcloud auth application-default login"):
        discover(SourceContext(nodes=[gce_node("proj-one", "zone-a", "n1")], options={}))


def test_cli_prints_the_snapshot(cluster, tmp_path, capsys) -> None:
    bodies, nodes = cluster
    nodes_file = tmp_path / "nodes.yaml"
    nodes_file.write_text(yaml.safe_dump({"items": [
        {"metadata": {"name": n.name}, "spec": {"providerID": n.provider_id}} for n in nodes]}))
    with ComputeServer(bodies) as server:
        code = main(["discover", "--source", "gcp", "--nodes", str(nodes_file), "--api-endpoint", server.url,
                     "--anonymous", "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [lv["label"] for lv in out["levels"]] == ["topolabel.dev/cluster", "topolabel.dev/block",
                                                    "topolabel.dev/subblock"]
    assert out["nodes"]["eu-0"] == {"cluster": "clu-2", "block": "blk-e", "subblock": "blk-e-sb0"}
    assert len(out["nodes"]) == 16 and len(out["problems"]) == 2
    assert server.count() == 2


def test_cli_config_file_and_error_line(cluster, tmp_path, capsys) -> None:
    bodies, nodes = cluster
    nodes_file = tmp_path / "nodes.yaml"
    nodes_file.write_text(yaml.safe_dump([{"kind": "Node", "metadata": {"name": n.name},
                                           "spec": {"providerID": n.provider_id}} for n in nodes]))
    with ComputeServer(bodies, forbidden={"proj-one"}) as server:
        config = tmp_path / "topolabel.yaml"
        config.write_text(yaml.safe_dump({"source": {"type": "gcp", "apiEndpoint": server.url, "anonymous": True,
                                                     "hostLevel": True}}))
        code = main(["discover", "--config", str(config), "--nodes", str(nodes_file), "-o", "json"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0].startswith("topolabel discover: error: gcp: permission denied listing instances in projects/proj-one")
