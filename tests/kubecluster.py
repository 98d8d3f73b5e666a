"""Pytest fixtures around a real kube-apiserver 1.20 + etcd (hack/testcluster.py), one per xdist worker.

`kube_cluster` (session) starts the cluster once per worker and stops it at the end; `kube` (function)
hands the same cluster to a test after deleting every Node, so tests start from an empty cluster.
Use them with `from tests.kubecluster import kube, kube_cluster  # noqa: F401`.

Without a built kube-apiserver the fixtures skip, naming the build command; in CI (CI=true) they fail
instead, so a broken build cannot pass as skipped tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import pytest
import yaml

from hack import testcluster
from labeler.kube import MERGE_PATCH, call_with_retries, connect
from tests.conftest import ROOT, SHARED

KUEUE_CRDS = SHARED / "kueue-crds"
BULK_CONCURRENCY = 16
BUILD_HINT = "run hack/build-kube-apiserver (about 5 minutes, once; the binary is cached)"


@dataclass
class AuditEvent:
    """One request as the API server's audit log records it."""

    verb: str
    user: str
    resource: str
    subresource: str
    name: str
    code: int

    @classmethod
    def from_line(cls, line: str) -> "AuditEvent":
        event = json.loads(line)
        ref = event.get("objectRef") or {}
        return cls(verb=event.get("verb", ""), user=(event.get("user") or {}).get("username", ""),
                   resource=ref.get("resource", ""), subresource=ref.get("subresource", ""),
                   name=ref.get("name", ""), code=(event.get("responseStatus") or {}).get("code", 0))


@dataclass
class KubeCluster:
    """A running test cluster and the helpers tests need to drive it."""

    dir: Path
    state: testcluster.State
    _apis: dict[bool, Any] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def kubeconfig(self) -> Path:
        return self.dir / "kubeconfig"

    @property
    def operator_kubeconfig(self) -> Path:
        return self.dir / "operator.kubeconfig"

    @property
    def server(self) -> str:
        return self.state.server

    @property
    def audit_log(self) -> Path:
        return self.dir / "audit.log"

    def api(self, as_operator: bool = False) -> Any:
        """A kubernetes.client.ApiClient for the admin (or the operator user), sized for bulk work."""
        with self._lock:
            if as_operator not in self._apis:
                api = connect(str(self.operator_kubeconfig if as_operator else self.kubeconfig))
                api.rest_client.pool_manager.connection_pool_kw["maxsize"] = BULK_CONCURRENCY
                self._apis[as_operator] = api
            return self._apis[as_operator]

    def kubectl(self, *args: str, as_operator: bool = False, input: str | None = None,
                check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run the 1.20 kubectl against this cluster; a failure raises with kubectl's stderr."""
        if not self.state.kubectl:
            pytest.skip(f"no kubectl found; {BUILD_HINT}")
        config = self.operator_kubeconfig if as_operator else self.kubeconfig
        result = subprocess.run([self.state.kubectl, f"--kubeconfig={config}", *args], input=input,
                                capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result

    def install_kueue_crds(self) -> None:
        """Kueue's CRDs from ../shared. --validate=false: kubectl 1.20 does not know the schema fields
        newer than it (x-kubernetes-validations); the 1.20 server stores the CRDs and drops CEL rules."""
        files = sorted(KUEUE_CRDS.glob("*.yaml"))
        args = [a for f in files for a in ("-f", str(f))]
        self.kubectl("apply", "--validate=false", *args)
        names = [yaml.safe_load(f.read_text())["metadata"]["name"] for f in files]
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s", *(f"crd/{n}" for n in names))

    def bind_operator(self, source: str | Path = ROOT / "manifests") -> str:
        """Bind the manifests' ClusterRole to user topolabel-operator; returns the role's name.
        `source` is the ClusterRole's YAML file or a directory of manifests holding exactly one."""
        role = find_cluster_role(Path(source))
        self.kubectl("apply", "-f", "-", input=json.dumps(role))
        name = role["metadata"]["name"]
        binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": f"{name}-test-user"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                   "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                 "name": testcluster.OPERATOR}]}
        self.kubectl("apply", "-f", "-", input=json.dumps(binding))
        return name

    def create_nodes(self, nodes: Iterable[dict[str, Any]], concurrency: int = BULK_CONCURRENCY) -> int:
        """Create Node objects `concurrency` at a time; returns the count. Labels, spec and status are
        stored as given: the API server keeps a Node's status on create, as kubelets register that way."""
        from kubernetes import client

        core = client.CoreV1Api(self.api())
        items = list(nodes)
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            list(pool.map(lambda obj: call_with_retries(lambda: core.create_node(obj, _preload_content=False)),
                          items))
        return len(items)

    def set_node_status(self, name: str, status: dict[str, Any]) -> None:
        """Merge `status` into a Node's status through the status subresource, as a kubelet reports."""
        from kubernetes import client

        client.CoreV1Api(self.api()).patch_node_status(name, {"status": status}, _content_type=MERGE_PATCH,
                                                       _preload_content=False)

    def delete_nodes(self) -> None:
        """Every Node, in one deletecollection call."""
        from kubernetes import client

        client.CoreV1Api(self.api()).delete_collection_node(_preload_content=False)

    def node_labels(self) -> dict[str, dict[str, str]]:
        """name -> labels of every Node, read straight from the server."""
        from labeler.kube import list_nodes

        return {n.name: dict(n.labels) for n in list_nodes(self.api())}

    def audit_mark(self) -> int:
        """A position in the audit log; `requests(since=mark)` reads what came after it."""
        try:
            return self.audit_log.stat().st_size
        except FileNotFoundError:
            return 0

    def requests(self, since: int = 0, verb: str | None = None, resource: str | None = None,
                 user: str | None = None) -> list[AuditEvent]:
        """Requests the server completed after `since`, optionally only one verb/resource/user."""
        with open(self.audit_log, "rb") as log:
            log.seek(since)
            events = [AuditEvent.from_line(line) for line in log.read().decode().splitlines() if line.strip()]
        return [e for e in events if (verb is None or e.verb == verb)
                and (resource is None or e.resource == resource) and (user is None or e.user == user)]


def find_cluster_role(source: Path) -> dict[str, Any]:
    """The one ClusterRole in a YAML file, or in the *.yaml/*.yml files of a directory."""
    files = sorted([*source.glob("*.yaml"), *source.glob("*.yml")]) if source.is_dir() else [source]
    roles = [doc for f in files for doc in yaml.safe_load_all(f.read_text())
             if isinstance(doc, dict) and doc.get("kind") == "ClusterRole"]
    if len(roles) != 1:
        raise AssertionError(f"{source}: expected one ClusterRole, found {len(roles)}")
    return roles[0]


def binaries_or_skip() -> testcluster.Binaries:
    """The cluster's programs; skip without them, except in CI, where their absence is a failure."""
    found = testcluster.find_binaries()
    if found is not None:
        return found
    reason = f"no kube-apiserver/etcd binary: {BUILD_HINT} and install etcd-server"
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


@dataclass
class _Shared:
    """The worker's one cluster and how many fixture instances hold it. Each test module that imports
    `kube_cluster` gets its own session-scoped fixture from pytest; without this they would each start
    a cluster."""

    cluster: KubeCluster | None = None
    holders: int = 0


_SHARED = _Shared()


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    """A real API server for this test session (one per xdist worker); stopped at the end."""
    if _SHARED.cluster is None:
        binaries = binaries_or_skip()
        root = tmp_path_factory.mktemp("kube")
        try:
            _SHARED.cluster = KubeCluster(root, testcluster.up(root, binaries))
        except testcluster.ClusterError as exc:
            pytest.fail(str(exc), pytrace=False)
    _SHARED.holders += 1
    try:
        yield _SHARED.cluster
    finally:
        _SHARED.holders -= 1
        if _SHARED.holders == 0:
            testcluster.down(_SHARED.cluster.dir)
            _SHARED.cluster = None


@pytest.fixture
def kube(kube_cluster: KubeCluster) -> KubeCluster:
    """The session's cluster with no Nodes in it."""
    kube_cluster.delete_nodes()
    return kube_cluster
