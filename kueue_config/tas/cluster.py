"""Cluster reads for the data-scientist commands: bound pods, and the Kueue TAS objects in force.

Read as raw JSON in pages, like `kube.list_nodes`, because a large cluster has tens of thousands of pods
and the typed models cost far more than the few fields `fit` needs.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from labeler.errors import TopologyError
from labeler.kube import list_objects
from labeler.names import KUEUE_GROUP, KUEUE_VERSION

KUEUE_PLURALS = {"topologies": "Topology", "resourceflavors": "ResourceFlavor",
                 "clusterqueues": "ClusterQueue", "localqueues": "LocalQueue"}
# Finished pods hold no capacity; asking the server to leave them out keeps the lists short.
UNFINISHED = "status.phase!=Succeeded,status.phase!=Failed"


def list_pods(api: client.ApiClient, page: int = 1000) -> list[Any]:
    """Every pod in every namespace that has not finished, as raw objects."""
    core = client.CoreV1Api(api)
    return list_objects(api, lambda token: core.list_pod_for_all_namespaces(
        limit=page, _continue=token, field_selector=UNFINISHED, _preload_content=False), "the pod list", walk=False)


def list_kueue_objects(api: client.ApiClient) -> list[dict[str, Any]]:
    """Topologies, ResourceFlavors, ClusterQueues and LocalQueues (kueue.x-k8s.io/v1beta2)."""
    custom = client.CustomObjectsApi(api)
    out: list[dict[str, Any]] = []
    for plural, kind in KUEUE_PLURALS.items():
        try:
            items = list_objects(api, lambda token: custom.list_cluster_custom_object(  # called here, at once
                KUEUE_GROUP, KUEUE_VERSION, plural, limit=500, _continue=token, _preload_content=False), f"the {plural} list")
        except ApiException as exc:
            if exc.status == 404:
                raise TopologyError(f"the cluster serves no {KUEUE_GROUP}/{KUEUE_VERSION} {plural}; "
                                    "is Kueue v0.15 or newer installed?") from None
            raise
        out.extend({"apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}", "kind": kind, **item} for item in items)
    return out
