"""The InfiniBand collector's pieces on the test API server: its namespace and RBAC from manifests/agent,
kubeconfigs that authenticate as a real ServiceAccount, and collector processes to start and kill.

The server mints ServiceAccount tokens through the TokenRequest API (it has the signing key; no controller
is needed), so the collector and the agent run with exactly their manifests' permissions.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubernetes.client.exceptions import ApiException

from labeler.cluster.kube import request_json
from testkit.environment import ROOT
from testkit.ibsim import PRELOAD
from testkit.kubecluster import KubeCluster

AGENT = ROOT / "manifests" / "agent"
COLLECTOR = ROOT / "manifests" / "ib-collector"
NAMESPACE = "topolabel-agent"


@pytest.fixture(scope="module")
def scratch_api(kube_cluster: KubeCluster, request: pytest.FixtureRequest) -> Any:
    """An admin API client, with the test module's namespace `NS` created."""
    kube_cluster.kubectl("create", "namespace", request.module.NS, check=False)
    return kube_cluster.api()


@pytest.fixture
def name() -> str:
    """A fresh object name, so tests sharing the server never meet each other's objects."""
    return f"t-{uuid.uuid4().hex[:8]}"


def lease_holder(cluster: KubeCluster, lease: str) -> str | None:
    """The Lease's holder in the collector's namespace; None when it has none or does not exist yet."""
    try:
        found = request_json(cluster.api(), "GET", f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{lease}")
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return (found.get("spec") or {}).get("holderIdentity")


def manifest_docs(*paths: Path) -> list[dict[str, Any]]:
    return [doc for path in paths for doc in yaml.safe_load_all(path.read_text()) if doc]


def apply_docs(cluster: KubeCluster, docs: list[dict[str, Any]]) -> None:
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))


def sa_kubeconfig(cluster: KubeCluster, namespace: str, name: str, path: Path, pod: str | None = None) -> Path:
    """A kubeconfig for ServiceAccount namespace/name, with a token the server minted for it (1 hour). With
    `pod`, the token is bound to a Pod of that name running as the ServiceAccount (made here, if missing), as a
    kubelet mounts it: the server then names the pod in the user's extra
    (`authentication.kubernetes.io/pod-name`), which the collectors' admission policies check."""
    body: dict[str, Any] = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                            "spec": {"expirationSeconds": 3600}}
    if pod is not None:
        found = pod_of(cluster, namespace, name, pod)
        body["spec"]["boundObjectRef"] = {"apiVersion": "v1", "kind": "Pod", "name": pod,
                                          "uid": found["metadata"]["uid"]}
    token = request_json(cluster.api(), "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
                         body=body)["status"]["token"]
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    config["users"] = [{"name": name, "user": {"token": token}}]
    config["contexts"][0]["context"]["user"] = name
    path.write_text(json.dumps(config))
    return path


def pod_of(cluster: KubeCluster, namespace: str, account: str, name: str) -> dict[str, Any]:
    """The Pod `name` running as ServiceAccount `account` (created when missing; no kubelet runs it)."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    try:
        return request_json(cluster.api(), "GET", f"{path}/{name}")
    except ApiException as exc:
        if exc.status != 404:
            raise
    return request_json(cluster.api(), "POST", path, body={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"topolabel.test/pod": "collector"}},
        "spec": {"serviceAccountName": account, "containers": [{"name": "c", "image": "topolabel:0.1.0"}]}})


def ibnetdiscover_wrapper(path: Path, hcas: dict[str, tuple[Any, str]], tool: str = "ibnetdiscover") -> Path:
    """A stand-in for one node's `ibnetdiscover` (or another infiniband-diags `tool`): the HCA given with -C
    decides which simulator (fabric) the real tool talks to through umad2sim, and where it attaches (SIM_HOST,
    that HCA's node in the net file); -C and -P are dropped, as umad2sim shows one simulated HCA. `hcas` maps a
    device-name glob to (a `testkit.ibsim.Simulator`, the simulated HCA's node id)."""
    cases = "".join(f'  {glob}) export IBSIM_SOCKNAME={sim.sockname} SIM_HOST="{host}";;\n'
                    for glob, (sim, host) in hcas.items())
    path.write_text(f"""#!/bin/sh
dev=""; set -- "$@" --end
while [ "$1" != --end ]; do
  case "$1" in -C) dev="$2"; shift 2;; -P) shift 2;; *) set -- "$@" "$1"; shift;; esac
done
shift
case "$dev" in
{cases}  *) echo "no simulated fabric for HCA $dev" >&2; exit 1;;
esac
LD_PRELOAD={PRELOAD} exec {tool} "$@"
""")
    path.chmod(0o755)
    return path


class CollectorProcess:
    """`topolabel agent --ib-collector` as its own process (session), to be stopped or killed outright."""

    def __init__(self, name: str, kubeconfig: Path, sysfs: Path, workdir: Path, *args: str) -> None:
        workdir.mkdir(parents=True, exist_ok=True)  # umad2sim writes ./sys-PID beside the tool
        self.name, self.log = name, workdir / f"{name}.log"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "NODE_NAME": name, "POD_NAME": f"collector-{name}",
               "POD_NAMESPACE": NAMESPACE}
        env.pop("LD_PRELOAD", None)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "topolabel.cli", "agent", "--ib-collector", "--kubeconfig", str(kubeconfig),
                 "--sysfs", str(sysfs), *args], cwd=workdir, stdout=out, stderr=subprocess.STDOUT, env=env,
                start_new_session=True)

    @property
    def identity(self) -> str:
        return f"collector-{self.name}"

    def output(self) -> str:
        return self.log.read_text()

    def kill(self) -> None:
        """SIGKILL to the whole group: nothing is released, as when the node dies."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        """SIGTERM: a clean stop that hands the leases over."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
