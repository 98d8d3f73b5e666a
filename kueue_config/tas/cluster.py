"""Cluster reads for the data-scientist commands: bound pods, the Kueue objects in force, Workloads, namespaces.

Read as raw JSON in pages, like `kube.list_nodes`, because a large cluster has tens of thousands of pods
and the typed models cost far more than the few fields `fit` needs.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from labeler.cluster.kube import list_objects, request_json
from labeler.errors import InputError, TopologyError
from labeler.io.documents import kind_of, mapping, string_map, text
from labeler.topology.names import KUEUE_GROUP, KUEUE_VERSION

KUEUE_PLURALS = {"topologies": "Topology", "resourceflavors": "ResourceFlavor",
                 "clusterqueues": "ClusterQueue", "localqueues": "LocalQueue"}
OPTIONAL_PLURALS = {"cohorts": "Cohort", "workloadpriorityclasses": "WorkloadPriorityClass"}
# Finished pods hold no capacity; asking the server to leave them out keeps the lists short.
UNFINISHED = "status.phase!=Succeeded,status.phase!=Failed"


def list_pods(api: client.ApiClient, page: int = 1000) -> list[Any]:
    """Every pod in every namespace that has not finished, as raw objects."""
    core = client.CoreV1Api(api)
    return list_objects(api, lambda token: core.list_pod_for_all_namespaces(
        limit=page, _continue=token, field_selector=UNFINISHED, _preload_content=False), "the pod list", walk=False)


def _custom(api: client.ApiClient, plural: str, kind: str, group: str = KUEUE_GROUP,
            version: str = KUEUE_VERSION) -> list[dict[str, Any]]:
    custom = client.CustomObjectsApi(api)
    items = list_objects(api, lambda token: custom.list_cluster_custom_object(
        group, version, plural, limit=500, _continue=token, _preload_content=False), f"the {plural} list")
    return [{"apiVersion": f"{group}/{version}", "kind": kind, **item} for item in items]


def list_kueue_objects(api: client.ApiClient) -> list[dict[str, Any]]:
    """Topologies, ResourceFlavors, ClusterQueues and LocalQueues, and Cohorts and WorkloadPriorityClasses
    where served (kueue.x-k8s.io/v1beta2)."""
    out: list[dict[str, Any]] = []
    for plural, kind in {**KUEUE_PLURALS, **OPTIONAL_PLURALS}.items():
        try:
            out += _custom(api, plural, kind)
        except ApiException as exc:
            if exc.status != 404:
                raise
            if plural in KUEUE_PLURALS:
                raise TopologyError(f"the cluster serves no {KUEUE_GROUP}/{KUEUE_VERSION} {plural}; "
                                    "is Kueue v0.15 or newer installed?") from None
    return out


def list_workloads(api: client.ApiClient) -> list[dict[str, Any]]:
    """Every Kueue Workload, in every namespace."""
    return _custom(api, "workloads", "Workload")


def get_workload(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    try:
        found = request_json(api, "GET", f"/apis/{KUEUE_GROUP}/{KUEUE_VERSION}/namespaces/{namespace}/workloads/{name}")
    except ApiException as exc:
        if exc.status == 404:
            raise TopologyError(f"no Workload {namespace}/{name} (`kubectl get workloads -n {namespace}` lists "
                                "them; a job's Workload is named after it)") from None
        raise
    return {"apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}", "kind": "Workload", **found}


def _named(item: Any, where: str) -> tuple[str, dict[Any, Any]]:
    """An item of a list the server sent: its name and its metadata, each checked (an answer is untrusted)."""
    meta = mapping(mapping(item, where).get("metadata"), f"{where}: metadata")
    return text(meta.get("name"), f"{where}: metadata.name"), meta


def list_namespaces(api: client.ApiClient) -> dict[str, dict[str, str]]:
    """Namespace name -> labels (ClusterQueues select namespaces by label)."""
    items = list_objects(api, lambda token: client.CoreV1Api(api).list_namespace(
        limit=500, _continue=token, _preload_content=False), "the namespace list")
    named = [_named(i, "a namespace in the namespace list") for i in items]
    return {name: string_map(meta.get("labels"), f"namespace {name}: labels") for name, meta in named}


def _priority(item: dict[str, Any], name: str) -> int:
    value = item.get("value", 0)
    if type(value) is not int:
        raise InputError(f"PriorityClass {name}: value must be an integer, not {kind_of(value)}")
    return value


def list_priority_classes(api: client.ApiClient) -> tuple[dict[str, int], int]:
    """PriorityClass name -> value, and the value of the global default (0 without one)."""
    items = list_objects(api, lambda token: client.SchedulingV1Api(api).list_priority_class(
        limit=500, _continue=token, _preload_content=False), "the PriorityClass list")
    values: dict[str, int] = {}
    defaults: list[int] = []
    for item in items:
        name, _ = _named(item, "a PriorityClass in the PriorityClass list")
        values[name] = _priority(item, name)
        if item.get("globalDefault") is True:
            defaults.append(values[name])
    return values, (defaults or [0])[0]
