"""Kueue's rules as the real kube-apiserver 1.36 enforces them, with Kueue v0.19.2's CRDs from its Go module.

The CEL rules in the CRDs are what refuse a Topology with kubernetes.io/hostname above the lowest level, any
edit of a Topology's levels, and edits of a ResourceFlavor's nodeLabels, tolerations or topologyName once
topologyName is set: they are checked here on a cluster with the CRDs and no Kueue manager, so no webhook
can be the one refusing. Every object topolabel generates for the bundled examples (one queue: topolabel.yaml;
two teams in a cohort: teams.yaml) is then accepted by a cluster running Kueue (CEL and Kueue's webhooks).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from labeler.cluster.kube import MERGE_PATCH
from testkit.environment import EXAMPLES
from testkit.kubecluster import KubeCluster, kube_cluster, kueue_cluster  # noqa: F401
from topolabel.cli import main

pytestmark = pytest.mark.slow
GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
HOSTNAME = "kubernetes.io/hostname"


@pytest.fixture(scope="module")
def crds(kube_cluster: KubeCluster) -> KubeCluster:  # noqa: F811
    kube_cluster.install_kueue_crds()
    return kube_cluster


@pytest.fixture
def objects(crds: KubeCluster) -> Iterator[client.CustomObjectsApi]:
    """The custom-objects API as admin; the Topologies and ResourceFlavors a test made are deleted after it."""
    api = client.CustomObjectsApi(crds.api())
    yield api
    for plural in ("topologies", "resourceflavors"):
        for item in api.list_cluster_custom_object(GROUP, VERSION, plural)["items"]:
            if item["metadata"]["name"].startswith("cel-"):
                api.delete_cluster_custom_object(GROUP, VERSION, plural, item["metadata"]["name"])


def refusal(call: Any) -> str:
    """The server's message for a call it must refuse as invalid (422)."""
    with pytest.raises(ApiException) as refused:
        call()
    assert refused.value.status == 422, refused.value.body
    return json.loads(refused.value.body)["message"]


def topology(name: str, *keys: str) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": k} for k in keys]}}


def flavor(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor", "metadata": {"name": name},
            "spec": {"nodeLabels": {"cloud.google.com/gke-accelerator": "nvidia-h100-mega-80gb"}, **spec}}


def create(api: client.CustomObjectsApi, plural: str, obj: dict[str, Any]) -> Any:
    return lambda: api.create_cluster_custom_object(GROUP, VERSION, plural, obj)


def patch(api: client.CustomObjectsApi, plural: str, name: str, body: dict[str, Any]) -> Any:
    return lambda: api.patch_cluster_custom_object(GROUP, VERSION, plural, name, body, _content_type=MERGE_PATCH)


def test_the_crds_carry_cel_rules_the_server_accepted(crds: KubeCluster) -> None:
    crd = json.loads(crds.kubectl("get", "crd", "topologies.kueue.x-k8s.io", "-o", "json").stdout)
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == VERSION]
    levels = served["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["levels"]
    assert {r["message"] for r in levels["x-kubernetes-validations"]} >= {"field is immutable", "must be unique"}
    assert {c["type"]: c["status"] for c in crd["status"]["conditions"]}["Established"] == "True"


def test_hostname_above_the_lowest_level_is_refused(objects: client.CustomObjectsApi) -> None:
    message = refusal(create(objects, "topologies", topology("cel-hostname-first", HOSTNAME, "topolabel.dev/block")))
    assert "the kubernetes.io/hostname label can only be used at the lowest level of topology" in message
    assert "must be unique" in refusal(create(objects, "topologies", topology(
        "cel-twice", "topolabel.dev/block", "topolabel.dev/block")))
    create(objects, "topologies", topology("cel-hostname-last", "topolabel.dev/block", HOSTNAME))()


def test_a_topology_edit_is_refused(objects: client.CustomObjectsApi) -> None:
    create(objects, "topologies", topology("cel-edit", "topolabel.dev/block", HOSTNAME))()
    for levels in (["topolabel.dev/block", "topolabel.dev/rack", HOSTNAME], ["topolabel.dev/block"]):
        message = refusal(patch(objects, "topologies", "cel-edit", {"spec": {"levels": [
            {"nodeLabel": k} for k in levels]}}))
        assert "spec.levels: Invalid value" in message and "field is immutable" in message
    stored = objects.get_cluster_custom_object(GROUP, VERSION, "topologies", "cel-edit")
    assert [lv["nodeLabel"] for lv in stored["spec"]["levels"]] == ["topolabel.dev/block", HOSTNAME]


@pytest.mark.parametrize("change, message", [
    ({"nodeLabels": {"cloud.google.com/gke-accelerator": "nvidia-b200"}},
     "nodeLabels are immutable when topologyName is set"),
    ({"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
     "tolerations are immutable when topologyName is set"),
    ({"topologyName": "other"}, "topologyName is immutable when topologyName is set"),
])
def test_an_immutable_flavor_field_edit_is_refused(objects: client.CustomObjectsApi, change: dict,
                                                   message: str) -> None:
    create(objects, "resourceflavors", flavor("cel-tas", topologyName="gke"))()
    assert message in refusal(patch(objects, "resourceflavors", "cel-tas", {"spec": change}))
    # without topologyName the same edits are allowed: the rules are about TAS flavors only
    create(objects, "resourceflavors", flavor("cel-plain"))()
    if "topologyName" not in change:
        patch(objects, "resourceflavors", "cel-plain", {"spec": change})()


@pytest.mark.parametrize("config, kinds", [
    ("topolabel.yaml", {"Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue"}),
    ("teams.yaml", {"Topology", "ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue"}),
])
def test_every_object_topolabel_generates_for_an_example_is_accepted(
        kueue_cluster: KubeCluster, tmp_path: Path, capsys, config: str, kinds: set[str]) -> None:  # noqa: F811
    """Server-side dry run on a cluster running Kueue: schemas, CEL and Kueue's own webhooks all pass, for the
    one-queue example and for two teams' queues (a Cohort, limits, preemption, fair sharing)."""
    out = tmp_path / "kueue"
    assert main(["kueue", "--config", str(EXAMPLES / config), "--nodes", str(EXAMPLES / "nodes.yaml"),
                 "--output-dir", str(out)]) == 0
    capsys.readouterr()
    generated, applied = kueue_cluster.apply_kueue_dir(out, dry_run=True)
    assert {o["kind"] for o in generated} == kinds
    for obj in generated:
        assert f"{obj['kind'].lower()}.kueue.x-k8s.io/{obj['metadata']['name']} serverside-applied (server dry run)" \
            in applied, applied
