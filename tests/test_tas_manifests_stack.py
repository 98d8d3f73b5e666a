"""`job check` equals the real Kueue: the manifests of testkit/tas_manifests.py created on a test cluster running
the Kueue v0.19.2 manager and its webhooks (`hack/test-cluster up DIR --with-kueue`).

Each Job and JobSet of the table is created in its own namespace. `rejected` means the API server or Kueue's
webhook refuses it; `accepted` that Kueue makes its Workload; `no-workload` that the object is created and
Kueue never manages to create a Workload for it. (The other kinds need controllers and CRDs the test cluster
does not install; their verdicts rest on Kueue's webhook code, as `job check` does.)
"""

from __future__ import annotations

import copy
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kueue_config.tas.lint import lint
from kueue_config.tas.workloads import workload_of
from testkit.tas_manifests import ACCEPTED, MANIFESTS, NO_WORKLOAD, REJECTED, Manifest, verdict
from testkit.kubecluster import kueue_cluster  # noqa: F401 (a fixture)
from testkit.tas_replay import REPLAYABLE


NO_WORKLOAD_AFTER = 8.0  # seconds an accepted job is given to get its Workload


def _with_images(obj: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    templates = ([obj["spec"]["template"]] if obj["kind"] == "Job"
                 else [r["template"]["spec"]["template"] for r in obj["spec"]["replicatedJobs"]])
    for template in templates:
        template["spec"].setdefault("restartPolicy", "Never")
        for c in template["spec"]["containers"]:
            c.setdefault("image", "pause")
    return obj


def _create(api: client.ApiClient, obj: dict[str, Any]) -> str:
    """POST the object as it is (the typed Job API would refuse a non-string annotation before sending it)."""
    group, _, version = obj["apiVersion"].rpartition("/")
    plural = {"Job": "jobs", "JobSet": "jobsets"}[obj["kind"]]
    created = client.CustomObjectsApi(api).create_namespaced_custom_object(
        group, version, obj["metadata"]["namespace"], plural, obj)
    return created["metadata"]["uid"]


def _has_workload(api: client.ApiClient, namespace: str, owner: str) -> bool:
    items = client.CustomObjectsApi(api).list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", namespace,
                                                                      "workloads")["items"]
    return any(r.get("uid") == owner for w in items for r in w["metadata"].get("ownerReferences") or [])


def kueue_verdict(api: client.ApiClient, manifest: Manifest, namespace: str) -> str:
    """What the cluster does with the manifest: rejected, accepted (a Workload appears) or no-workload."""
    client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
    obj = _with_images(manifest.obj)
    obj["metadata"]["namespace"] = namespace
    try:
        owner = _create(api, obj)
    except ApiException as exc:
        if exc.status in (400, 403, 422):
            return REJECTED
        raise
    deadline = time.monotonic() + NO_WORKLOAD_AFTER
    while time.monotonic() < deadline:
        if _has_workload(api, namespace, owner):
            return ACCEPTED
        time.sleep(0.25)
    return NO_WORKLOAD


def test_job_check_equals_the_real_kueue_on_the_manifest_table(kueue_cluster) -> None:
    api = kueue_cluster.api()
    cases = [(m, f"m{i}") for i, m in enumerate(MANIFESTS) if m.obj["kind"] in REPLAYABLE]
    assert len(cases) >= 30
    with ThreadPoolExecutor(8) as pool:
        got = dict(zip([m.name for m, _ in cases], pool.map(lambda c: kueue_verdict(api, *c), cases)))
    checked = {m.name: verdict(lint([workload_of(m.obj, "test")])) for m, _ in cases}
    assert got == checked
    assert got == {m.name: m.verdict for m, _ in cases}
