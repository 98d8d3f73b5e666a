"""The operator as the chart ships it, on the real 1.36 server: `helm install`, then the chart's own Deployment
run in the image (its args, `POD_NAMESPACE` from the downward API, the chart's ServiceAccount token at the
in-cluster path, read-only root as uid 65532; testkit/podrunner.py plays the kubelet). A friendlier local set-up
once hid that no Event ever landed.

One story, in order: a LocalQueue's namespace is missing (ApplyFailed, `kubectl get tl` says so), created 20 s
later, and the LocalQueue is there within 10 s; Events show in `kubectl describe tl default` and
`kubectl get events -A`; a misspelt preset is refused by `helm upgrade`; a spec the server cannot check is
shown as `Ready=False ConfigInvalid` until fixed, observedGeneration never claiming it; `helm test` runs the
chart's test Pod, which reaches the operator through its Service.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from hack.synth import gke_cluster
from testkit.environment import ROOT
from testkit.helmrun import helm  # noqa: F401 (fixture)
from testkit.imagerun import Image, image  # noqa: F401 (fixture)
from testkit.kubecluster import KubeCluster, kube, kube_cluster  # noqa: F401 (fixtures)
from testkit.operatorrun import wait_until
from testkit.podrunner import PodRunner

CHART = ROOT / "charts" / "topolabel"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"

pytestmark = pytest.mark.slow


def labeler(kube: KubeCluster) -> dict[str, Any]:  # noqa: F811
    return json.loads(kube.kubectl("get", "topologylabeler", "default", "-o", "json").stdout)


def condition(kube: KubeCluster, type_: str) -> tuple[str, str] | None:  # noqa: F811
    found = [c for c in (labeler(kube).get("status") or {}).get("conditions", []) if c["type"] == type_]
    return (found[0]["status"], found[0]["reason"]) if found else None


def get_row(kube: KubeCluster) -> dict[str, str]:  # noqa: F811
    """`kubectl get tl default` as a person reads it: each printer column's value under its header."""
    header, row = kube.kubectl("get", "tl", "default").stdout.splitlines()
    spans = [m.span() for m in re.finditer(r"\S+(?: \S+)*", header)]  # "LAST SYNC" is one header
    starts = [a for a, _ in spans] + [None]
    return {header[a:b]: row[starts[i]:starts[i + 1]].strip() for i, (a, b) in enumerate(spans)}


def test_the_chart_as_shipped(helm: Any, image: Image, kube: KubeCluster, tmp_path: Path) -> None:  # noqa: F811
    name = f"tl-{uuid.uuid4().hex[:6]}"
    namespace, team = f"{name}-system", f"{name}-team"
    kube.install_kueue_crds()
    nodes, truth = gke_cluster(2, 2, 3)
    kube.create_nodes(nodes)
    repository, tag = image.ref.rsplit(":", 1)
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({
        "fullnameOverride": name, "image": {"repository": repository, "tag": tag},
        "operator": {"resync": 300},
        "config": {"source": {"type": "labels", "preset": "gke"},
                   "pools": {"label": "cloud.google.com/gke-accelerator"},
                   "kueue": {"topologyName": name, "clusterQueue": name,
                             "localQueues": [{"name": "gpu", "namespaces": [team]}]}}}))
    cluster = ["--kubeconfig", str(kube.kubeconfig), "--namespace", namespace]
    helm("install", name, str(CHART), *cluster, "--create-namespace", "--values", str(values))
    installed = [d for d in yaml.safe_load_all(helm("get", "manifest", name, *cluster).stdout) if d]
    deployment = next(d for d in installed if d["kind"] == "Deployment")
    pod = {"metadata": {"name": f"{name}-0", "namespace": namespace}, "spec": deployment["spec"]["template"]["spec"]}
    runner = PodRunner(image, kube, tmp_path, hosts={f"{name}-metrics.{namespace}.svc": "127.0.0.1"})
    log = tmp_path / "operator.log"
    mark = kube.audit_mark()
    try:
        with runner.running(pod, log):
            def seen() -> str:
                """What a failure should show: the conditions and the operator's last log lines."""
                status = (labeler(kube).get("status") or {}).get("conditions")
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
                return f"the conditions (now {status}); the operator's log ends:\n{tail}"

            # the LocalQueue's namespace does not exist: the write fails and says so where people look
            wait_until(lambda: condition(kube, "KueueInSync") == ("False", "ApplyFailed"), 180, seen)
            failed_at = time.monotonic()
            row = get_row(kube)
            assert (row["READY"], row["REASON"]) == ("False", "ApplyFailed"), row
            assert {"PROBLEMS", "AGE", "LAST SYNC"} <= set(row)
            time.sleep(max(0.0, 20 - (time.monotonic() - failed_at)))
            kube.kubectl("create", "namespace", team)
            created = time.monotonic()
            wait_until(lambda: kube.kubectl("get", "localqueue", "gpu", "-n", team, check=False).returncode == 0,
                       10, "the LocalQueue within 10 s of its namespace")
            healed = time.monotonic() - created
            wait_until(lambda: condition(kube, "Ready") == ("True", "InSync"), 30, seen)
            assert all(kube.node_labels()[n].get("topolabel.dev/block") for n in truth)

            # Events about the cluster-scoped TopologyLabeler land (in default) and describe shows them
            described = kube.kubectl("describe", "tl", "default").stdout
            events = described[described.index("Events:"):]
            assert "ApplyFailed" in events and "KueueUpdated" in events and "Labelled" in events, described
            listed = json.loads(kube.kubectl("get", "events", "-A", "-o", "json").stdout)["items"]
            ours = [e for e in listed if e["involvedObject"].get("kind") == "TopologyLabeler"]
            assert ours and {e["metadata"]["namespace"] for e in ours} == {"default"}

            # a misspelt preset: refused by helm upgrade (the values schema, and the CRD's enum behind it)
            generation = labeler(kube)["metadata"]["generation"]
            refused = helm("upgrade", name, str(CHART), *cluster, "--reuse-values", "--set",
                           "config.source.preset=gpc", check=False)
            assert refused.returncode != 0 and "preset" in refused.stderr, refused.stderr
            assert labeler(kube)["metadata"]["generation"] == generation

            # a spec only the operator can check: Ready=False with the reason until it is fixed
            helm("upgrade", name, str(CHART), *cluster, "--reuse-values", "--set", "config.source.keys={a,b}")
            bad = labeler(kube)["metadata"]["generation"]
            wait_until(lambda: condition(kube, "ConfigValid") == ("False", "ConfigInvalid"), 30, seen)
            row = get_row(kube)
            assert (row["READY"], row["REASON"]) == ("False", "ConfigInvalid"), row
            status = labeler(kube)["status"]
            assert status["observedGeneration"] == generation < bad
            ready = next(c for c in status["conditions"] if c["type"] == "Ready")
            assert "give a preset or keys, not both" in ready["message"]
            assert "still working with the last valid config" in ready["message"]
            # fixed by applying the good values again (with --reuse-values, `--set config.source.keys=null`
            # drops the key from the release's values but Helm's apply leaves it on the object)
            helm("upgrade", name, str(CHART), *cluster, "--values", str(values))
            wait_until(lambda: condition(kube, "Ready") == ("True", "InSync"), 30, seen)
            assert labeler(kube)["status"]["observedGeneration"] == labeler(kube)["metadata"]["generation"] > bad

            # helm test: the chart's test Pod reaches the operator through its Service
            with runner.serving_hook_pods(namespace) as runs:
                tested = helm("test", name, *cluster, "--timeout", "120s", check=False)
            assert tested.returncode == 0, (tested.stderr, runs)
            assert [r["code"] for r in runs] == [0] and "/healthz: 200" in runs[0]["output"], runs
    finally:
        helm("uninstall", name, *cluster, check=False)
        for kind in ("localqueues", "clusterqueues", "resourceflavors", "topologies"):
            kube.kubectl("delete", kind, "-A", "-l", "app.kubernetes.io/managed-by=topolabel", "--wait=false",
                         check=False)
        kube.kubectl("delete", "namespace", team, namespace, "--wait=false", check=False)
    # nothing refused (a 403 or an Event's 422): the only errors are the 404s of things not there yet, the Lease
    # before the first replica takes it, the team's namespace, and the LocalQueue written into it while missing
    operator = f"system:serviceaccount:{namespace}:{name}"
    errors = {(e.verb, e.resource, e.code) for e in kube.requests(since=mark, user=operator) if e.code >= 400}
    assert errors <= {("get", "leases", 404), ("get", "namespaces", 404), ("patch", "localqueues", 404),
                      ("create", "localqueues", 404)}, errors  # a server-side apply that creates is audited so
    assert healed < 10
