"""Running the chart's Pods as a kubelet would, in the topolabel image with podman, against the test cluster.

The test cluster has no kubelet, so a Pod the chart makes never runs by itself. `PodRunner` plays the kubelet
for the few that tests need to see run: it starts a container with exactly what the Pod spec says (command,
args, env with the downward API, user, read-only root, dropped capabilities, emptyDir volumes as tmpfs) and,
unless the spec opts out, the ServiceAccount's token, CA and namespace at the in-cluster path with
KUBERNETES_SERVICE_HOST/PORT pointing at the API server: the program finds its identity as in a cluster, with
no kubeconfig. Containers share the host's network; Service DNS names given in `hosts` resolve to 127.0.0.1,
where the containers listen. `serve_hook_pods` runs `helm test`'s hook Pods to completion and writes their
phase, as a kubelet reports it.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from labeler.cluster.kube import request_json
from testkit.imagerun import Image, run_options
from testkit.kubecluster import KubeCluster

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_SECONDS = 3600
FIELDS = {"metadata.namespace": lambda pod: pod["metadata"]["namespace"],
          "metadata.name": lambda pod: pod["metadata"]["name"],
          "spec.nodeName": lambda pod: pod["spec"].get("nodeName", "")}


@dataclass
class PodRunner:
    image: Image
    kube: KubeCluster
    workdir: Path
    hosts: dict[str, str] = field(default_factory=dict)

    def options(self, pod: dict[str, Any], container: dict[str, Any]) -> list[str]:
        """podman options making the container what `pod`'s spec says it is."""
        spec = pod["spec"]
        security = {**spec.get("securityContext", {}), **container.get("securityContext", {})}
        options = ["--network", "host", *(a for host, ip in self.hosts.items() for a in ("--add-host", f"{host}:{ip}"))]
        if "runAsUser" in security:
            options += ["--user", f"{security['runAsUser']}:{security.get('runAsGroup', security['runAsUser'])}"]
        if security.get("readOnlyRootFilesystem"):
            options += ["--read-only", "--read-only-tmpfs=false"]
        if security.get("allowPrivilegeEscalation") is False:
            options += ["--security-opt", "no-new-privileges"]
        options += [f"--cap-drop={c}" for c in security.get("capabilities", {}).get("drop", [])]
        options += [f"--cap-add={c}" for c in security.get("capabilities", {}).get("add", [])]
        empty = {v["name"] for v in spec.get("volumes", []) if "emptyDir" in v}
        for mount in container.get("volumeMounts", []):
            assert mount["name"] in empty, f"volume {mount['name']}: only emptyDir is played here"
            options += ["--tmpfs", mount["mountPath"]]
        for env in container.get("env", []):
            value = env["value"] if "value" in env else FIELDS[env["valueFrom"]["fieldRef"]["fieldPath"]](pod)
            options += ["--env", f"{env['name']}={value}"]
        if spec.get("automountServiceAccountToken", True):
            account = self.service_account(pod["metadata"]["namespace"], spec.get("serviceAccountName", "default"))
            server = urlsplit(self.kube.server)
            options += ["-v", f"{account}:{SERVICE_ACCOUNT}:ro", "--env", f"KUBERNETES_SERVICE_HOST={server.hostname}",
                        "--env", f"KUBERNETES_SERVICE_PORT={server.port}"]
        if container.get("command"):
            options += ["--entrypoint", json.dumps(container["command"])]
        assert container["image"] == self.image.ref, f"the Pod runs {container['image']}, not {self.image.ref}"
        return options

    def service_account(self, namespace: str, name: str) -> Path:
        """A directory as the kubelet projects it: a token of the ServiceAccount (TokenRequest), the cluster's
        CA and the namespace, readable by the container's user."""
        answer = request_json(self.kube.api(), "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
                              body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                    "spec": {"expirationSeconds": TOKEN_SECONDS}})
        directory = self.workdir / f"sa-{namespace}-{name}-{uuid.uuid4().hex[:6]}"
        directory.mkdir(parents=True)
        (directory / "token").write_text(answer["status"]["token"])
        (directory / "ca.crt").write_bytes((self.kube.dir / "pki" / "ca.crt").read_bytes())
        (directory / "namespace").write_text(namespace)
        for path in (directory, *directory.iterdir()):
            path.chmod(0o755 if path.is_dir() else 0o644)
        return directory

    @contextmanager
    def running(self, pod: dict[str, Any], log: Path) -> Iterator[str]:
        """The Pod's one container in the background, output to `log`; removed on exit."""
        [container] = pod["spec"]["containers"]
        with self.image.running(container.get("args", []), self.options(pod, container), log) as name:
            yield name

    def run_to_completion(self, pod: dict[str, Any], timeout: float = 120) -> subprocess.CompletedProcess[str]:
        [container] = pod["spec"]["containers"]
        return subprocess.run(self.image.podman("run", *run_options(), *self.options(pod, container), self.image.ref,
                                                *container.get("args", [])),
                              capture_output=True, text=True, timeout=timeout)

    @contextmanager
    def serving_hook_pods(self, namespace: str) -> Iterator[list[dict[str, Any]]]:
        """While inside, every `helm test` hook Pod created in `namespace` is run once, to completion, and its
        phase written (Succeeded or Failed, with the container's exit code); yields the runs as they finish."""
        done: list[dict[str, Any]] = []
        stop = threading.Event()
        thread = threading.Thread(target=self._serve, args=(namespace, stop, done), daemon=True)
        thread.start()
        try:
            yield done
        finally:
            stop.set()
            thread.join(150)

    def _serve(self, namespace: str, stop: threading.Event, done: list[dict[str, Any]]) -> None:
        seen: set[str] = set()
        while not stop.is_set():
            pods = request_json(self.kube.api(), "GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
            for pod in pods:
                annotations = pod["metadata"].get("annotations") or {}
                if annotations.get("helm.sh/hook") != "test" or pod["metadata"]["uid"] in seen:
                    continue
                seen.add(pod["metadata"]["uid"])
                result = self.run_to_completion(pod)
                self._report(pod, result.returncode)
                done.append({"name": pod["metadata"]["name"], "code": result.returncode,
                             "output": result.stdout + result.stderr})
            time.sleep(0.5)

    def _report(self, pod: dict[str, Any], code: int) -> None:
        """The phase and the container's termination, as a kubelet writes them."""
        meta = pod["metadata"]
        [container] = pod["spec"]["containers"]
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = {"phase": "Succeeded" if code == 0 else "Failed", "containerStatuses": [{
            "name": container["name"], "image": container["image"], "imageID": "", "ready": False,
            "restartCount": 0, "started": False,
            "state": {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                     "startedAt": now, "finishedAt": now}}}]}
        request_json(self.kube.api(), "PATCH", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status",
                     body={"status": status}, content_type="application/merge-patch+json")
