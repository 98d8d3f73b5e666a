"""The nebius source end to end: the real `nebius` SDK over TLS against a local gRPC server built from the SDK's
own service definitions (testkit/nebius_server.py).

Every test counts the List calls the server saw against the bound: per project, max(1, ceil(instances /
page)) calls, whatever the number of nodes.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("nebius")

import grpc  # noqa: E402 (after the skip: grpc comes with the SDK)

from labeler.errors import SourceError  # noqa: E402
from labeler.io.nodes import Node  # noqa: E402
from labeler.topology.placement import level_keys, to_snapshot  # noqa: E402
from providers import nebius as source  # noqa: E402
from providers.base import SourceContext  # noqa: E402
from providers.labels import discover as discover_labels  # noqa: E402
from testkit.environment import ROOT  # noqa: E402
from testkit.nebius_server import TOKEN, NebiusServer, instance  # noqa: E402
from testkit.tlscert import Certificate  # noqa: E402

P1, P2 = "project-e00train", "project-e00infer"
# The held-out fixture: (project, root, spine, leaf, instances), the path root first as Nebius reports it.
LAYOUT = [(P1, "fabric-2", "spine-a", "leaf-a0", 4), (P1, "fabric-2", "spine-a", "leaf-a1", 4),
          (P1, "fabric-2", "spine-b", "leaf-b0", 4), (P2, "fabric-7", "spine-c", "leaf-c0", 3)]


@pytest.fixture(scope="module")
def certificate() -> Certificate:
    return Certificate.create()


@pytest.fixture(autouse=True)
def token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(source.TOKEN_ENV, TOKEN)


def vm(i: int) -> str:
    return f"computeinstance-e00{i:08d}"


def cluster(others: int = 5) -> tuple[dict[str, list], list[Node], dict[str, dict[str, str]]]:
    """Instances per LAYOUT plus `others` of other users in P1, the nodes on them, and where each must land."""
    projects: dict[str, list] = {P1: [], P2: []}
    nodes, expected = [], {}
    i = 0
    for project, root, spine, leaf, count in LAYOUT:
        for _ in range(count):
            projects[project].append(instance(project, vm(i), [root, spine, leaf]))
            nodes.append(Node(f"gpu-{i:02d}", provider_id=f"nebius://{vm(i)}"))
            expected[f"gpu-{i:02d}"] = {"tier-3": root, "tier-2": spine, "tier-1": leaf}
            i += 1
    projects[P1] += [instance(P1, vm(500 + j), ["fabric-2", "spine-a", "leaf-a0"]) for j in range(others)]
    return projects, nodes, expected


def run(server: NebiusServer, nodes: list[Node], tmp_path: Path, projects: list[str] | None = None, **options):
    options = {"nebius_project": projects or [P1, P2], "nebius_endpoint": server.address,
               "nebius_ca": str(server.certificate.bundle(tmp_path)), **options}
    found = source.discover(SourceContext(nodes=nodes, options=options, origin="test"))
    return found, to_snapshot(found, level_keys(found.level_names))


def bound(server: NebiusServer, projects: list[str]) -> int:
    page = min(source.PAGE_SIZE, server.page_cap)
    return sum(max(1, math.ceil(len(server.projects.get(p, [])) / page)) for p in projects)


def test_places_a_held_out_cluster_exactly(certificate: Certificate, tmp_path: Path) -> None:
    projects, nodes, expected = cluster()
    with NebiusServer(certificate, projects) as server:
        found, snap = run(server, nodes, tmp_path)
    assert [lv.name for lv in snap.levels] == ["tier-3", "tier-2", "tier-1"]
    assert snap.nodes == expected and not snap.problems
    assert server.count() == bound(server, [P1, P2]) == 2
    assert {c.page_size for c in server.calls} == {source.PAGE_SIZE}


def test_pages_are_followed_and_each_is_one_call(certificate: Certificate, tmp_path: Path) -> None:
    projects, nodes, expected = cluster(others=20)
    with NebiusServer(certificate, projects, page_cap=4) as server:
        _, snap = run(server, nodes, tmp_path)
    assert snap.nodes == expected
    assert server.count(P1) == math.ceil((12 + 20) / 4) and server.count(P2) == 1
    assert [c.page_token for c in server.calls if c.project == P1] == [""] + [str(4 * k) for k in range(1, 8)]
    assert server.count() == bound(server, [P1, P2])


def test_every_unplaceable_node_is_a_problem_of_its_own(certificate: Certificate, tmp_path: Path) -> None:
    projects, nodes, expected = cluster(others=0)
    projects[P1].append(instance(P1, vm(90), None, state="STOPPED"))  # no path: stopped
    projects[P1].append(instance(P1, vm(91), None))  # no path: not in a GPU cluster
    nodes += [Node("stopped", provider_id=f"nebius://{vm(90)}"), Node("cpu", provider_id=f"nebius://{vm(91)}"),
              Node("elsewhere", provider_id=f"nebius://{vm(92)}"), Node("kind", provider_id="kind://docker/k/w"),
              Node("bare", provider_id=vm(93)), Node("twin", provider_id=nodes[0].provider_id)]
    with NebiusServer(certificate, projects) as server:
        _, snap = run(server, nodes, tmp_path)
    assert snap.nodes == expected
    why = {p.node: p.message for p in snap.problems}
    assert set(why) == {"stopped", "cpu", "elsewhere", "kind", "bare", "twin"}
    assert why["stopped"] == (f"instance {vm(90)} (STOPPED) has no status.infiniband_topology_path (not in a GPU "
                              "cluster, or not running)")
    assert why["cpu"].startswith(f"instance {vm(91)} (RUNNING) has no status.infiniband_topology_path")
    assert why["elsewhere"] == (f"instance {vm(92)} is in none of the projects listed ({P1}, {P2}): deleted, or in "
                                "another project (--nebius-project)")
    assert "is not a Nebius instance (expected nebius://computeinstance-...)" in why["kind"]
    assert why["bare"].startswith(f"'{vm(93)}' is not a Nebius instance")
    assert why["twin"] == f"instance {vm(0)} is also node gpu-00's; left as it is"
    assert server.count() == bound(server, [P1, P2])


def test_shorter_paths_repeat_their_leaf_and_say_so(certificate: Certificate, tmp_path: Path) -> None:
    projects, nodes, expected = cluster(others=0)
    projects[P2] = [instance(P2, vm(12 + k), ["fabric-7", "leaf-c0"]) for k in range(3)]  # a two-tier fabric
    with NebiusServer(certificate, projects) as server:
        _, snap = run(server, nodes, tmp_path)
    assert snap.nodes["gpu-13"] == {"tier-3": "fabric-7", "tier-2": "leaf-c0", "tier-1": "leaf-c0"}
    assert [p.message.split(";")[0] for p in snap.problems] == ["3 node(s) report fewer than 3 levels"]


def test_nvlink_instance_groups_are_the_nvlink_level(certificate: Certificate, tmp_path: Path) -> None:
    projects, nodes, expected = cluster(others=0)
    for k, item in enumerate(projects[P1][:8]):  # two GB200 racks, one under each leaf of spine-a
        item.spec.nvl_instance_group_id = f"nvlinstancegroup-e00{k // 4}"
    with NebiusServer(certificate, projects) as server:
        _, snap = run(server, nodes, tmp_path)
    assert [lv.name for lv in snap.levels] == ["tier-3", "tier-2", "tier-1", "nvlink"]
    assert snap.nodes["gpu-05"]["nvlink"] == "nvlinstancegroup-e001"
    assert snap.nodes["gpu-09"]["nvlink"] == "gpu-09"  # no group: a domain of its own


def test_values_equal_what_the_nebius_preset_reads_so_the_sources_agree(certificate: Certificate,
                                                                         tmp_path: Path) -> None:
    projects, nodes, _ = cluster(others=0)
    for k, item in enumerate(projects[P1][:8]):
        item.spec.nvl_instance_group_id = f"nvlinstancegroup-e00{k // 4}"
    with NebiusServer(certificate, projects) as server:
        _, snap = run(server, nodes, tmp_path)
    by_id = {i.metadata.id: i for items in projects.values() for i in items}
    labelled = []
    for n in nodes:  # Soperator's labels: tier-1 the leaf (the path's last switch), tier-0 the NVLink domain
        item = by_id[n.provider_id.removeprefix("nebius://")]
        path = item.status.infiniband_topology_path.path
        labels = {f"topology.nebius.com/tier-{t}": s for t, s in enumerate(reversed(path), 1)}
        if item.spec.nvl_instance_group_id:
            labels["topology.nebius.com/tier-0"] = item.spec.nvl_instance_group_id
        labelled.append(Node(n.name, labels=labels))
    found = discover_labels(SourceContext(nodes=labelled, options={"preset": "nebius"}))
    from_labels = to_snapshot(found, level_keys(found.level_names))
    assert from_labels.levels == snap.levels and from_labels.nodes == snap.nodes


def test_permission_denied_names_the_role(certificate: Certificate, tmp_path: Path) -> None:
    projects, nodes, _ = cluster(others=0)
    with NebiusServer(certificate, projects, denied={P2}) as server:
        with pytest.raises(SourceError, match=rf"^nebius: permission denied listing instances in {P2}: the identity "
                                              r"needs a role .*docs/nebius.md, Permissions"):
            run(server, nodes, tmp_path)


def test_rejected_token_and_unknown_project(certificate: Certificate, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    projects, nodes, _ = cluster(others=0)
    with NebiusServer(certificate, projects) as server:
        with pytest.raises(SourceError, match=r"^nebius: project project-e00nope not found"):
            run(server, nodes, tmp_path, projects=["project-e00nope"])
        monkeypatch.setenv(source.TOKEN_ENV, "stolen")
        with pytest.raises(SourceError, match=r"^nebius: the credentials were rejected \(UNAUTHENTICATED"):
            run(server, nodes, tmp_path)


def test_unavailable_is_retried(certificate: Certificate, tmp_path: Path) -> None:
    projects, nodes, expected = cluster(others=0)
    with NebiusServer(certificate, {P1: projects[P1]}, fail=[grpc.StatusCode.UNAVAILABLE]) as server:
        _, snap = run(server, nodes[:12], tmp_path, projects=[P1])
    assert snap.nodes == {n: v for n, v in expected.items() if n in snap.nodes} and len(snap.nodes) == 12
    assert server.count() == 2


def test_tls_is_verified_against_the_system_bundle_by_default(certificate: Certificate, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(source, "TIMEOUT", 3.0)
    projects, nodes, _ = cluster(others=0)
    with NebiusServer(certificate, projects) as server:
        with pytest.raises(SourceError, match=rf"^nebius: cannot reach {server.address} to list instances"):
            source.discover(SourceContext(nodes=nodes, options={"nebius_project": [P1],
                                                                "nebius_endpoint": server.address}))
        assert server.count() == 0  # the handshake failed: no call reached the service


def test_no_project_no_credentials_and_no_sdk_are_one_line_each(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = cluster(others=0)[1]
    with pytest.raises(SourceError, match=r"give --nebius-project"):
        source.discover(SourceContext(nodes=nodes, options={}))
    monkeypatch.delenv(source.TOKEN_ENV)
    with pytest.raises(SourceError, match=rf"no credentials: set {source.TOKEN_ENV}"):
        source.discover(SourceContext(nodes=nodes, options={"nebius_project": [P1]}))
    monkeypatch.setitem(sys.modules, "nebius.sdk", None)
    with pytest.raises(SourceError, match=r"the Nebius SDK is not installed: pip install 'topolabel\[nebius\]'"):
        source.discover(SourceContext(nodes=nodes, options={"nebius_project": [P1]}))


def test_nodes_without_nebius_instances_need_no_api() -> None:
    found = source.discover(SourceContext(nodes=[Node("w", provider_id="aws:///us-east-1a/i-0abc")], options={}))
    assert found.paths == {} and found.problems[0].node == "w"


def test_cli_discover(certificate: Certificate, tmp_path: Path) -> None:
    projects, nodes, expected = cluster(others=0)
    items = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n.name}, "spec": {"providerID": n.provider_id}}
             for n in nodes]
    (tmp_path / "nodes.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    env = {**os.environ, source.TOKEN_ENV: TOKEN}
    with NebiusServer(certificate, projects) as server:
        args = [sys.executable, "-m", "topolabel.cli", "discover", "--source", "nebius",
                "--nebius-project", f"{P1},{P2}",
                "--nebius-endpoint", server.address, "--nebius-ca", str(certificate.bundle(tmp_path)),
                "--nodes", str(tmp_path / "nodes.json")]
        ok = subprocess.run(args + ["-o", "json"], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
        denied = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120,
                                env={**env, source.TOKEN_ENV: "stolen"})
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["nodes"] == expected
    assert denied.returncode == 2 and denied.stderr.count("\n") == 1 and "Traceback" not in denied.stderr
