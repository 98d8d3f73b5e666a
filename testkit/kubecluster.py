"""Pytest fixtures around a real Kubernetes 1.36 control plane (hack/testcluster.py), one per xdist worker.

`kube_cluster` (session) starts etcd, kube-apiserver, kube-controller-manager and kube-scheduler once per
worker and stops them at the end; `kube` (function) hands the same cluster to a test after deleting every
Node, so tests start from an empty cluster. `kueue_cluster` and `kueue_kube` are the same with the Kueue
manager running (its CRDs, RBAC and webhooks installed): a second cluster, started only in workers that run
a test asking for it, since Kueue costs start-up time and changes what happens to Jobs and Workloads.
`kwok_kueue_cluster` and `kwok_kueue_kube` add the KWOK controller in place of kubelets (Nodes heartbeat,
pods run and finish, the node lifecycle controller is on): a third cluster, in workers that ask for it.
Use them with `from testkit.kubecluster import kube, kube_cluster  # noqa: F401` (or the kueue or kwok pair).

Without the built binaries the fixtures skip, naming the build command; in CI (CI=true) they fail
instead, so a broken build cannot pass as skipped tests.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import pytest
import yaml
from urllib3.util.retry import Retry

from hack import testcluster
from labeler.cluster.kube import MERGE_PATCH, call_with_retries, connect
from testkit.environment import ROOT, kueue_crds, skip_or_fail

BULK_CONCURRENCY = 16
# What client-go does and the Python client does not: a 429 (the API server's "storage is (re)initializing"
# while a CRD's watch cache starts, or priority-and-fairness shedding load) is retried after its Retry-After.
# A 429 means the server did not act, so every method may be retried.
THROTTLED = Retry(total=10, connect=0, read=0, redirect=0, other=0, status=10, status_forcelist=(429,),
                  allowed_methods=None, respect_retry_after_header=True, raise_on_status=False)
NODES_READY_TIMEOUT = 120.0  # with KWOK: created Nodes Ready and untainted (seconds on a quiet machine)
BUILD_HINT = "run hack/build-test-stack (once; the binaries are cached)"


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
        """A kubernetes.client.ApiClient for the admin (or the operator user), sized for bulk work, retrying
        429s as client-go does."""
        with self._lock:
            if as_operator not in self._apis:
                api = connect(str(self.operator_kubeconfig if as_operator else self.kubeconfig))
                api.rest_client.pool_manager.connection_pool_kw["maxsize"] = BULK_CONCURRENCY
                api.rest_client.pool_manager.connection_pool_kw["retries"] = THROTTLED
                self._apis[as_operator] = api
            return self._apis[as_operator]

    @property
    def with_kueue(self) -> bool:
        return self.state.kueue

    @property
    def with_kwok(self) -> bool:
        return self.state.kwok

    def kubectl(self, *args: str, as_operator: bool = False, input: str | None = None,
                check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run the stack's kubectl against this cluster; a failure raises with kubectl's stderr."""
        config = self.operator_kubeconfig if as_operator else self.kubeconfig
        result = subprocess.run([self.state.kubectl, f"--kubeconfig={config}", *args], input=input,
                                capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result

    def install_kueue_crds(self) -> None:
        """Kueue's CRDs as released (config/components/crd/bases in its Go module), applied server-side:
        the server checks them and enforces their schemas and CEL rules. A cluster running Kueue has them
        already (with their conversion webhooks)."""
        if self.with_kueue:
            return
        files = sorted(kueue_crds().glob("*.yaml"))
        self.kubectl("apply", "--server-side", "--field-manager=tests", *(a for f in files for a in ("-f", str(f))))
        self.wait_established(*(yaml.safe_load(f.read_text())["metadata"]["name"] for f in files))

    def wait_established(self, *crds: str) -> None:
        """Until the CRDs just applied are Established (hack/testcluster.py says why not `kubectl wait`)."""
        testcluster.wait_established(self.state, self.dir, list(crds))

    def apply_kueue_dir(self, directory: Path, dry_run: bool = False) -> tuple[list[dict[str, Any]], str]:
        """Apply what `topolabel kueue --output-dir` wrote, through its kustomization and server-side as field
        manager `topolabel`, after creating the LocalQueues' namespaces; the objects and kubectl's output."""
        objects = [doc for f in sorted(directory.glob("*.yaml")) if f.name != "kustomization.yaml"
                   for doc in yaml.safe_load_all(f.read_text()) if doc]
        for namespace in sorted({o["metadata"].get("namespace") for o in objects} - {None}):
            self.kubectl("create", "namespace", namespace, check=False)
        out = self.kubectl("apply", "--server-side", "--field-manager=topolabel", "-k", str(directory),
                           *(["--dry-run=server"] if dry_run else [])).stdout
        return objects, out

    def bind_operator(self, source: str | Path = ROOT / "manifests") -> str:
        """Bind the manifests' ClusterRole, and their Roles in their namespaces (made when missing: the Lease's,
        `default` for Events), to user topolabel-operator; returns the ClusterRole's name. `source` is a YAML
        file or a directory of manifests holding exactly one ClusterRole."""
        documents = rbac_documents(Path(source))
        roles = [d for d in documents if d["kind"] == "ClusterRole"]
        if len(roles) != 1:
            raise AssertionError(f"{source}: expected one ClusterRole, found {len(roles)}")
        subject = {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": testcluster.OPERATOR}
        items: list[dict[str, Any]] = []
        for role in (d for d in documents if d["kind"] in ("ClusterRole", "Role")):
            meta = role["metadata"]
            binding_meta = {"name": f"{meta['name']}-test-user", **({"namespace": meta["namespace"]}
                                                                   if "namespace" in meta else {})}
            items += [role, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": f"{role['kind']}Binding",
                             "metadata": binding_meta, "subjects": [subject],
                             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role["kind"],
                                         "name": meta["name"]}}]
            if "namespace" in meta:
                self.kubectl("create", "namespace", meta["namespace"], check=False)
        self.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        return roles[0]["metadata"]["name"]

    def type_check_warnings(self, policy: str, timeout: float = 30) -> list[dict[str, Any]]:
        """The warnings of the controller-manager's type check of a ValidatingAdmissionPolicy (every expression
        against the schemas of the kinds it matches), once it has checked the policy's current generation."""
        deadline = time.monotonic() + timeout
        while True:
            found = json.loads(self.kubectl("get", "validatingadmissionpolicy", policy, "-o", "json").stdout)
            status = found.get("status") or {}
            if status.get("observedGeneration") == found["metadata"]["generation"] and "typeChecking" in status:
                return status["typeChecking"].get("expressionWarnings") or []
            assert time.monotonic() < deadline, f"the type check of {policy} never reported"
            time.sleep(0.2)

    def create_nodes(self, nodes: Iterable[dict[str, Any]], concurrency: int = BULK_CONCURRENCY,
                     ready_timeout: float = NODES_READY_TIMEOUT) -> int:
        """Create Node objects `concurrency` at a time; returns the count. Labels, spec and status are
        stored as given: the API server keeps a Node's status on create, as kubelets register that way.
        With KWOK, conditions are left to it (a kubelet posts them), and this returns once every Node is
        Ready and rid of the not-ready taint, as kube-scheduler and Kueue then see it."""
        from kubernetes import client

        core = client.CoreV1Api(self.api())
        items = [without_conditions(n) for n in nodes] if self.with_kwok else list(nodes)
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            list(pool.map(lambda obj: call_with_retries(lambda: core.create_node(obj, _preload_content=False)),
                          items))
        if self.with_kwok:
            self.wait_nodes_ready({n["metadata"]["name"] for n in items}, ready_timeout)
        return len(items)

    def not_ready_nodes(self, names: set[str]) -> set[str]:
        """Those of `names` that are missing, not Ready, or carry a node.kubernetes.io/ taint (not-ready,
        unreachable: what the node lifecycle controller adds until a node reports)."""
        from kubernetes import client

        resp = client.CoreV1Api(self.api()).list_node(_preload_content=False)
        ready = {n["metadata"]["name"] for n in json.loads(resp.data)["items"] if node_ready(n)}
        return names - ready

    def wait_nodes_ready(self, names: set[str], timeout: float = NODES_READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while waiting := self.not_ready_nodes(names):
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(waiting)} node(s) not Ready after {timeout:.0f}s, e.g. "
                                     f"{sorted(waiting)[:3]}; see {self.dir / 'kwok.log'}")
            time.sleep(0.2 if len(names) < 1000 else 2.0)  # listing thousands of Nodes costs the server

    def stop_kubelet(self, name: str) -> None:
        """KWOK stops acting as the Node's kubelet (no more Lease renewals, status or pod updates), as when the
        machine dies: the node lifecycle controller then marks it NotReady and taints it unreachable."""
        self.kubectl("label", "node", name, f"{testcluster.KWOK_STOPPED_LABEL}=true")

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
        from labeler.cluster.kube import list_nodes

        return {n.name: dict(n.labels) for n in list_nodes(self.api())}

    def kueue_metric(self, name: str, **labels: str) -> float | None:
        """A sample of the Kueue manager's Prometheus metrics (served over HTTPS, to the admin's token)
        whose labels include `labels`; None when there is none."""
        from prometheus_client.parser import text_string_to_metric_families

        url = f"https://127.0.0.1:{self.state.ports['kueue-metrics']}/metrics"
        status, body = testcluster.request(url, self.dir / "pki" / "ca.crt", self.state.tokens[testcluster.ADMIN],
                                           timeout=10)
        if status != 200:
            raise AssertionError(f"{url}: {status} {body[:300]}")
        return next((s.value for family in text_string_to_metric_families(body) for s in family.samples
                     if s.name == name and s.labels.items() >= labels.items()), None)

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


def without_conditions(node: dict[str, Any]) -> dict[str, Any]:
    status = {k: v for k, v in (node.get("status") or {}).items() if k != "conditions"}
    return {**node, "status": status}


def node_ready(node: dict[str, Any]) -> bool:
    """Ready, and none of the taints the node lifecycle controller keeps on a node that is not."""
    conditions = (node.get("status") or {}).get("conditions") or []
    taints = (node.get("spec") or {}).get("taints") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) and \
        not any(t["key"].startswith("node.kubernetes.io/") for t in taints)


def rbac_documents(source: Path) -> list[dict[str, Any]]:
    """The ClusterRoles and Roles in a YAML file, or in the *.yaml/*.yml files of a directory."""
    files = sorted([*source.glob("*.yaml"), *source.glob("*.yml")]) if source.is_dir() else [source]
    return [doc for f in files for doc in yaml.safe_load_all(f.read_text())
            if isinstance(doc, dict) and doc.get("kind") in ("ClusterRole", "Role")]


def binaries_or_skip(kueue: bool = False, kwok: bool = False) -> testcluster.Binaries:
    """The cluster's programs (with Kueue's and KWOK's, if asked); skip without them, fail in CI."""
    found = testcluster.find_binaries()
    if found is None:
        skip_or_fail(f"no kube-apiserver/etcd/kubectl in the test stack: {BUILD_HINT}")
    if kueue and not found.has_kueue:
        skip_or_fail(f"no Kueue manager in the test stack: {BUILD_HINT}")
    if kwok and not found.has_kwok:
        skip_or_fail(f"no KWOK controller in the test stack: {BUILD_HINT}")
    return found


# kube-apiserver 1.36.2 stops the informer a built-in paramKind's params come from once no policy binding names
# that kind, and never starts it again (kubernetes/kubernetes#130887): after a test deletes the collectors'
# lease-holder binding (a `helm uninstall`), a later one's would see a frozen copy of the Leases. A binding that
# matches nothing keeps the Lease informer running for the cluster's life.
LEASE_PARAMS_KEEPER = [
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
     "metadata": {"name": "test-keeps-the-lease-param-informer"},
     "spec": {"paramKind": {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"}, "failurePolicy": "Ignore",
              "matchConstraints": {"resourceRules": [{"apiGroups": ["coordination.k8s.io"], "apiVersions": ["v1"],
                                                      "operations": ["DELETE"], "resources": ["leases"]}]},
              "matchConditions": [{"name": "never", "expression": "false"}],
              "validations": [{"expression": "true"}]}},
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
     "metadata": {"name": "test-keeps-the-lease-param-informer"},
     "spec": {"policyName": "test-keeps-the-lease-param-informer", "validationActions": ["Deny"],
              "paramRef": {"selector": {}, "parameterNotFoundAction": "Allow"}}}]


@dataclass
class _Shared:
    """The worker's one cluster of a kind and how many fixture instances hold it. Each test module that
    imports a session fixture gets its own instance from pytest; without this they would each start one."""

    cluster: KubeCluster | None = None
    holders: int = 0


_SHARED = {(False, False): _Shared(), (True, False): _Shared(), (True, True): _Shared()}  # (Kueue, KWOK)


def shared_cluster(factory: pytest.TempPathFactory, kueue: bool, kwok: bool = False) -> Iterator[KubeCluster]:
    shared = _SHARED[kueue, kwok]
    if shared.cluster is None:
        binaries = binaries_or_skip(kueue, kwok)
        root = factory.mktemp("kwok" if kwok else "kueue" if kueue else "kube")
        try:
            shared.cluster = KubeCluster(root, testcluster.up(root, binaries, kueue=kueue, kwok=kwok))
        except testcluster.ClusterError as exc:
            pytest.fail(str(exc), pytrace=False)
        shared.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(LEASE_PARAMS_KEEPER))
    shared.holders += 1
    try:
        yield shared.cluster
    finally:
        shared.holders -= 1
        if shared.holders == 0:
            testcluster.down(shared.cluster.dir)
            shared.cluster = None


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    """A real control plane for this test session (one per xdist worker), no Kueue; stopped at the end."""
    yield from shared_cluster(tmp_path_factory, kueue=False)


@pytest.fixture
def kube(kube_cluster: KubeCluster) -> KubeCluster:
    """The session's cluster with no Nodes in it."""
    kube_cluster.delete_nodes()
    return kube_cluster


@pytest.fixture(scope="session")
def kueue_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    """A real control plane with the Kueue manager running (one per xdist worker that asks for it)."""
    yield from shared_cluster(tmp_path_factory, kueue=True)


@pytest.fixture
def kueue_kube(kueue_cluster: KubeCluster) -> KubeCluster:
    """The session's Kueue cluster with no Nodes in it."""
    kueue_cluster.delete_nodes()
    return kueue_cluster


@pytest.fixture(scope="session")
def kwok_kueue_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    """A real control plane with the Kueue manager and KWOK: Nodes heartbeat, bound pods run and pods that do
    not restart finish, the node lifecycle controller marks silent Nodes NotReady (one per worker asking)."""
    yield from shared_cluster(tmp_path_factory, kueue=True, kwok=True)


@pytest.fixture
def kwok_kueue_kube(kwok_kueue_cluster: KubeCluster) -> KubeCluster:
    """The session's KWOK cluster with no Nodes in it."""
    kwok_kueue_cluster.delete_nodes()
    return kwok_kueue_cluster
