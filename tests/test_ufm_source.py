"""The ufm source against a local UFM (testkit.ufm_server) serving fabrics from hack.ibfabric: the same fabric
ibsim simulates, read here over UFM's REST API with TLS verification on.

It must place a held-out fabric as its ground truth says, report every node it cannot place, ask UFM twice per
discovery (a bounded number of retries included), keep its credentials out of every message, and, on a fabric
ibsim runs, give what the infiniband source gives from the real `ibnetdiscover`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from hack.ibfabric import Fabric, Spec, build, random_spec
from labeler.errors import SourceError
from labeler.io.nodes import Node
from labeler.topology.model import Discovery
from providers.base import SourceContext
from providers.registry import get_source
from testkit.ibsim import ibsim, needs_ibsim  # noqa: F401 (ibsim is a fixture)
from tests.test_infiniband_sim import truth_partition
from testkit.tlscert import Certificate
from testkit.ufm_server import TOKEN, USERS, UfmServer

USER = "topolabel"
HELD_OUT_SEEDS = (1109, 2203, 3307)  # shapes drawn from seeds the reader was never tuned on


@pytest.fixture(scope="module")
def certificate() -> Certificate:
    return Certificate.create()


@pytest.fixture
def credentials(tmp_path: Path) -> Path:
    """A basic-auth Secret as a volume mounts it: one file per key."""
    directory = tmp_path / "ufm-secret"
    directory.mkdir()
    (directory / "username").write_text(USER)
    (directory / "password").write_text(USERS[USER] + "\n")
    return directory


@pytest.fixture
def serve(certificate: Certificate) -> Iterator[Any]:
    with_servers: list[UfmServer] = []

    def start(fabric: Fabric, **kwargs: Any) -> UfmServer:
        server = UfmServer(fabric, certificate, **kwargs).__enter__()
        with_servers.append(server)
        return server

    yield start
    for server in with_servers:
        server.__exit__(None, None, None)


def run(server: UfmServer, credentials: Path, tmp_path: Path, nodes: tuple[Node, ...] = (), **options: Any) -> Discovery:
    given = {"ufm_url": server.url, "ufm_credentials": str(credentials),
             "ufm_ca": str(server.certificate.bundle(tmp_path)), **options}
    return get_source("ufm").discover(SourceContext(nodes=nodes, options=given, origin="--source ufm"))


def groups(found: Discovery, depth: int) -> set[frozenset[str]]:
    return truth_partition({host: path[depth] for host, path in found.paths.items()}, set(found.paths))


@pytest.mark.parametrize("seed", HELD_OUT_SEEDS)
def test_places_a_held_out_fabric_exactly(seed: int, serve, credentials: Path, tmp_path: Path) -> None:
    fabric = build(random_spec(seed))
    found = run(serve(fabric), credentials, tmp_path)
    hosts = fabric.truth.named_hosts()
    assert set(found.paths) == hosts
    assert groups(found, -1) == truth_partition(fabric.truth.leafgroup, hosts)
    if fabric.spec.pods > 1:
        assert found.level_names == ("block", "leafgroup")
        assert groups(found, 0) == truth_partition(fabric.truth.block, hosts)
    else:
        assert found.level_names == ("leafgroup",)


def test_every_unplaceable_node_is_a_problem_of_its_own(serve, credentials: Path, tmp_path: Path) -> None:
    fabric = build(Spec(sus=3, rails=2, hosts=3, spines=2, default_hosts=1, service_hosts=2, seed=4))
    unnamed = sorted(set(fabric.truth.guids) - fabric.truth.named_hosts())
    placed = sorted(fabric.truth.named_hosts())
    nodes = (*(Node(h) for h in placed), Node(unnamed[0]), Node("cpu-only-01"))
    found = run(serve(fabric), credentials, tmp_path, nodes)
    assert set(found.paths) == set(placed)
    per_node = {p.node: p.message for p in found.problems if p.node}
    assert set(per_node) == {unnamed[0], "cpu-only-01"}
    assert all(message.startswith("no HCA in the InfiniBand fabric UFM https://") for message in per_node.values())
    unknown = [p.message for p in found.problems if "host unknown (default description" in p.message]
    assert len(unknown) == len(fabric.truth.guids[unnamed[0]])  # each of its HCAs, with the leaf it is on
    assert any("2 fabric host(s) are not Kubernetes nodes" in p.message and "stor-01" in p.message
               for p in found.problems)  # the service hosts


def test_a_guid_map_places_hosts_ufm_cannot_name(serve, credentials: Path, tmp_path: Path) -> None:
    fabric = build(Spec(sus=2, hosts=3, spines=2, default_hosts=2, seed=5))
    guid_map = tmp_path / "guids.json"
    guid_map.write_text(json.dumps(fabric.guid_map()))
    found = run(serve(fabric), credentials, tmp_path, guid_map=str(guid_map))
    assert set(found.paths) == set(fabric.truth.guids)
    assert groups(found, -1) == truth_partition(fabric.truth.leafgroup, set(fabric.truth.guids))


def test_two_gets_per_discovery_whatever_the_fabric_size(serve, credentials: Path, tmp_path: Path) -> None:
    for spec in (Spec(sus=1, hosts=2), Spec(pods=3, sus=4, rails=4, hosts=4, spines=4, cores=2)):
        server = serve(build(spec))
        run(server, credentials, tmp_path)
        assert [(c.path, c.query) for c in server.calls] == [("/ufmRest/resources/systems", ""),
                                                             ("/ufmRest/resources/ports", "active=true")]


def test_busy_answers_are_retried_a_bounded_number_of_times(serve, credentials: Path, tmp_path: Path) -> None:
    server = serve(build(Spec(sus=2, hosts=2)), fail=[503, 429])
    assert run(server, credentials, tmp_path).paths
    assert server.count() == 4  # systems: 503, 429, 200; ports: 200
    server = serve(build(Spec(sus=2, hosts=2)), fail=[503] * 5)
    with pytest.raises(SourceError, match=r"resources/systems: HTTP 503$"):
        run(server, credentials, tmp_path)
    assert server.count() == 3  # three attempts, then the error


def test_an_access_token_uses_the_v3_api(serve, tmp_path: Path) -> None:
    directory = tmp_path / "token-secret"
    directory.mkdir()
    (directory / "token").write_text(TOKEN)
    server = serve(build(Spec(sus=2, hosts=2)))
    assert run(server, directory, tmp_path).paths
    assert {c.path for c in server.calls} == {"/ufmRestV3/resources/systems", "/ufmRestV3/resources/ports"}
    assert {c.auth for c in server.calls} == {"token"}


def test_credentials_from_the_environment(serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UFM_USERNAME", USER)
    monkeypatch.setenv("UFM_PASSWORD", USERS[USER])
    server = serve(build(Spec(sus=2, hosts=2)))
    given = {"ufm_url": server.url, "ufm_ca": str(server.certificate.bundle(tmp_path))}
    assert get_source("ufm").discover(SourceContext(options=given)).paths
    monkeypatch.delenv("UFM_PASSWORD")
    with pytest.raises(SourceError, match=r"^ufm: no credentials in \$UFM_USERNAME/\$UFM_PASSWORD or \$UFM_TOKEN"):
        get_source("ufm").discover(SourceContext(options=given))


@pytest.mark.parametrize("user, password, status", [(USER, "wrong-pass", 401), ("nobody", USERS["nobody"], 403)])
def test_refused_credentials_say_so_without_the_secret(user: str, password: str, status: int, serve,
                                                       tmp_path: Path) -> None:
    directory = tmp_path / "secret"
    directory.mkdir()
    (directory / "username").write_text(user)
    (directory / "password").write_text(password)
    with pytest.raises(SourceError) as caught:
        run(serve(build(Spec(sus=2, hosts=2))), directory, tmp_path)
    assert f"UFM refused user {user!r} (HTTP {status})" in str(caught.value)
    assert password not in str(caught.value)


def test_tls_is_verified_unless_told_not_to(serve, credentials: Path, tmp_path: Path) -> None:
    server = serve(build(Spec(sus=2, hosts=2)))
    given = {"ufm_url": server.url, "ufm_credentials": str(credentials)}
    with pytest.raises(SourceError, match=r"^ufm: https://127\.0\.0\.1:[0-9]+: TLS failed: .*CERTIFICATE_VERIFY_FAILED"):
        get_source("ufm").discover(SourceContext(options=given))
    found = get_source("ufm").discover(SourceContext(options={**given, "ufm_insecure": True}))
    assert found.paths
    assert any("TLS certificate not verified (--ufm-insecure)" in p.message for p in found.problems)


def test_unreachable_ufm_is_one_line(credentials: Path, tmp_path: Path, certificate: Certificate) -> None:
    given = {"ufm_url": "https://127.0.0.1:9", "ufm_credentials": str(credentials),
             "ufm_ca": str(certificate.bundle(tmp_path))}
    with pytest.raises(SourceError, match=r"^ufm: https://127\.0\.0\.1:9: cannot connect: .*refused"):
        get_source("ufm").discover(SourceContext(options=given))


@pytest.mark.parametrize("given, error", [
    ({}, "give --ufm-url https://<UFM server>"),
    ({"ufm_url": "http://ufm.example.com"}, "UFM is reached over https:// only"),
    ({"ufm_url": "https://ufm", "ufm_ca": "ca.pem", "ufm_insecure": True}, "give one"),
    ({"ufm_url": "https://ufm", "ib_exclude_guids": "0xzz"}, "'0xzz' is not a GUID"),
    ({"ufm_url": "https://ufm", "ufm_timeout": 0}, "ufm_timeout: must be more than 0"),
])
def test_bad_options_are_refused_before_any_call(given: dict[str, Any], error: str) -> None:
    with pytest.raises(SourceError, match=re.escape(error)):
        get_source("ufm").discover(SourceContext(options=given, origin="--source ufm"))


def test_answers_ufm_should_not_give_are_reported(serve, credentials: Path, tmp_path: Path) -> None:
    fabric = build(Spec(sus=2, hosts=2))
    with pytest.raises(SourceError, match=r"resources/ports\?active=true answered dict, not a list of records"):
        run(serve(fabric, answers={"resources/ports": {"ports": []}}), credentials, tmp_path)
    with pytest.raises(SourceError, match=r"UFM lists no cabled port \(0 port records\)"):
        run(serve(fabric, answers={"resources/ports": []}), credentials, tmp_path)
    from testkit.ufm_server import ports

    records = ports(fabric, True)
    records[0] = {**records[0], "guid": "not-a-guid"}  # a bad record; its peer now names a port not listed
    found = run(serve(fabric, answers={"resources/ports": records}), credentials, tmp_path)
    messages = [p.message for p in found.problems]
    assert any("1 port record(s) without a name, GUID, system or number left out" in m for m in messages)
    assert any("1 port(s) name a peer port UFM does not list" in m for m in messages)


def test_cli_discover(serve, credentials: Path, tmp_path: Path) -> None:
    fabric = build(Spec(sus=2, hosts=2))
    server = serve(fabric)
    argv = [sys.executable, "-m", "topolabel.cli", "discover", "--source", "ufm", "--ufm-url", server.url,
            "--ufm-credentials", str(credentials), "--ufm-ca", str(server.certificate.bundle(tmp_path)), "-o", "json"]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=Path(__file__).parent.parent, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)})
    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)["nodes"]) == set(fabric.truth.guids)
    bad = subprocess.run([*argv[:7], "http://ufm.example.com"], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).parent.parent)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "https:// only" in bad.stderr


def comparable(found: Discovery, origin: str) -> tuple[Any, ...]:
    """What a reader of the fabric must give: levels, paths, and each problem (its origin left out)."""
    problems = sorted((p.node or "", p.message.replace(origin, "<origin>")) for p in found.problems)
    return found.level_names, found.paths, problems


SAME_AS_IBNETDISCOVER = {
    "3-level-damaged": Spec(pods=2, sus=3, rails=2, hosts=3, spines=2, cores=2, default_hcas=1, cut_hca_links=1,
                            slow_uplinks=2, cut_uplinks=1, service_hosts=2, seed=7),
    "dual-port-default-names": Spec(sus=3, rails=2, hosts=3, spines=2, ports_per_hca=2, naming="default",
                                    device="HCA-{}", empty_leaves=1, seed=8),
    "rail-optimised-cross-pod": Spec(pods=2, sus=2, rails=4, hosts=2, spines=4, cores=2, cross_pod_cables=1,
                                     default_hosts=1, seed=9),
    "storage-leaves": Spec(sus=3, rails=2, hosts=3, spines=2, storage_leaves=2, seed=10),
}


@needs_ibsim
@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(SAME_AS_IBNETDISCOVER))
def test_gives_what_the_infiniband_source_gives_on_the_same_simulated_fabric(shape: str, ibsim, serve,  # noqa: F811
                                                                            credentials: Path, tmp_path: Path) -> None:
    fabric = build(SAME_AS_IBNETDISCOVER[shape])
    capture = tmp_path / "fabric.ibnetdiscover"
    capture.write_text(ibsim(fabric).discover())
    server = serve(fabric)
    nodes = tuple(Node(h) for h in sorted(fabric.truth.named_hosts())[1:]) + (Node("cpu-only-01"),)
    for options in ({}, {"ib_exclude": "IBSTOR"} if fabric.spec.storage_leaves else {"hca_pattern": "[0-9]$"}):
        ib = get_source("infiniband").discover(SourceContext(nodes, {"ibnetdiscover": str(capture), **options}))
        ufm = run(server, credentials, tmp_path, nodes, **options)
        assert ufm.source == "ufm" and ib.source == "infiniband"
        assert comparable(ufm, f"UFM {server.url}") == comparable(ib, str(capture))
        assert ufm.paths  # a comparison of two empty answers proves nothing
