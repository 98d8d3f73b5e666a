"""A TAS scenario replayed on a real cluster with the Kueue manager: what Kueue decides, read from the API.

`isolate` gives a scenario its own names (nodes, Topologies, flavors, ClusterQueue, namespace), so many share
one cluster without seeing each other: node names and hostnames get a prefix, every flavor selects only the
scenario's nodes by a label, cluster-scoped Kueue objects get a suffix. `replay` creates it all - nodes with
their status (Ready, allocatable) as a kubelet would report it, running pods bound to their nodes, the Kueue
objects, then the job - and waits for the Workload Kueue makes: admitted, with its topology assignment, or
pending, with the QuotaReserved messages it shows meanwhile. `topolabel fit` is given the same isolated
scenario, so its answer can be compared whole.
"""

from __future__ import annotations

import copy
import json
import time
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from testkit.operatorrun import wait_until
from testkit.tas_cluster import HOST
from testkit.kueue_workloads import GROUP, VERSION, admission, pending_message, workload_of
from testkit.tas_scenarios import Scenario

SCENARIO_LABEL = "topolabel.dev/scenario"
KIND_PLURALS = {"Topology": "topologies", "ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues"}
REPLAYABLE = ("Job", "JobSet")  # the frameworks the test cluster's Kueue manages


def isolate(sc: Scenario, tag: str) -> Scenario:
    """The scenario under its own names: `tag-` before node names, `-tag` after cluster-scoped Kueue names."""
    out = copy.deepcopy(sc)
    renamed = {}
    for n in out.nodes:
        old = n["metadata"]["name"]
        renamed[old] = f"{tag}-{old}"
        n["metadata"]["name"] = renamed[old]
        labels = n["metadata"]["labels"]
        labels[HOST] = f"{tag}-{labels.get(HOST, old)}"
        labels[SCENARIO_LABEL] = tag
    for p in out.pods:
        p["metadata"]["namespace"] = tag
        if p["spec"].get("nodeName"):
            p["spec"]["nodeName"] = renamed[p["spec"]["nodeName"]]
    names: dict[str, str] = {}
    for obj in out.kueue:
        if obj["kind"] in KIND_PLURALS:
            names[obj["metadata"]["name"]] = f"{obj['metadata']['name']}-{tag}"
    for obj in out.kueue:
        meta, spec = obj["metadata"], obj["spec"]
        if obj["kind"] in KIND_PLURALS:
            meta["name"] = names[meta["name"]]
        if obj["kind"] == "ResourceFlavor":
            spec["nodeLabels"] = {**(spec.get("nodeLabels") or {}), SCENARIO_LABEL: tag}
            if spec.get("topologyName"):
                spec["topologyName"] = names[spec["topologyName"]]
        elif obj["kind"] == "ClusterQueue":
            for rg in spec.get("resourceGroups") or []:
                for f in rg["flavors"]:
                    f["name"] = names[f["name"]]
        elif obj["kind"] == "LocalQueue":
            meta["namespace"] = tag
            spec["clusterQueue"] = names[spec["clusterQueue"]]
    out.job["metadata"]["namespace"] = tag
    out.name = f"{sc.name} [{tag}]"
    return out


def _create_nodes(core: client.CoreV1Api, nodes: list[dict[str, Any]]) -> None:
    for n in nodes:
        body = {k: v for k, v in n.items() if k != "status"}
        core.create_node(body)
        status = dict(n["status"])
        status["capacity"] = status.get("capacity") or status["allocatable"]
        core.patch_node_status(n["metadata"]["name"], {"status": status})


def create_pods(core: client.CoreV1Api, pods: list[dict[str, Any]]) -> None:
    """Pods as given; those with a nodeName are bound there, and take the phase their status names."""
    for p in pods:
        body = copy.deepcopy({k: v for k, v in p.items() if k != "status"})
        for c in body["spec"]["containers"]:
            c.setdefault("image", "pause")
        if not body["spec"].get("nodeName"):
            body["spec"]["schedulerName"] = "nobody"  # an unbound pod stays unbound: no scheduler takes it
        core.create_namespaced_pod(body["metadata"]["namespace"], body)
        phase = (p.get("status") or {}).get("phase")
        if phase:
            core.patch_namespaced_pod_status(body["metadata"]["name"], body["metadata"]["namespace"],
                                             {"status": {"phase": phase}})


def _create_kueue(custom: client.CustomObjectsApi, objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        if obj["kind"] == "LocalQueue":
            custom.create_namespaced_custom_object(GROUP, VERSION, obj["metadata"]["namespace"], "localqueues", obj)
        else:
            custom.create_cluster_custom_object(GROUP, VERSION, KIND_PLURALS[obj["kind"]], obj)


def cq_active(custom: client.CustomObjectsApi, name: str) -> bool:
    """The ClusterQueue says it can admit workloads (Kueue found its flavors and Topologies)."""
    cq = custom.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", name)
    return any(c["type"] == "Active" and c["status"] == "True" for c in (cq.get("status") or {}).get("conditions") or [])


def _create_job(api: client.ApiClient, job: dict[str, Any]) -> str:
    namespace = job["metadata"]["namespace"]
    if job["kind"] == "Job":
        body = copy.deepcopy(job)
        for c in body["spec"]["template"]["spec"]["containers"]:
            c.setdefault("image", "pause")
        body["spec"]["template"]["spec"].setdefault("restartPolicy", "Never")
        created = client.BatchV1Api(api).create_namespaced_job(namespace, body)
        return created.metadata.uid
    body = copy.deepcopy(job)
    for rjob in body["spec"]["replicatedJobs"]:
        spec = rjob["template"]["spec"]["template"]["spec"]
        spec.setdefault("restartPolicy", "Never")
        for c in spec["containers"]:
            c.setdefault("image", "pause")
    created = client.CustomObjectsApi(api).create_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", body)
    return created["metadata"]["uid"]


def replay(api: client.ApiClient, sc: Scenario, settle: float = 1.0, pending_for: float = 8.0,
           admit_within: float = 0.0) -> dict[str, Any]:
    """Create an isolated scenario (see `isolate`) and return Kueue's decision: admitted, the pods per domain
    of each PodSet, and the QuotaReserved messages seen while it was pending (in the order seen).

    A Workload still pending `pending_for` seconds after its first message counts as pending, unless
    `admit_within` (seconds from the job's creation) is longer: a Workload Kueue admits only on a later
    flavor needs several scheduling cycles, which a busy machine spreads over seconds."""
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    namespace = sc.job["metadata"]["namespace"]
    core.create_namespace({"metadata": {"name": namespace}})
    _create_nodes(core, sc.nodes)
    create_pods(core, sc.pods)
    _create_kueue(custom, sc.kueue)
    cq = next(o["metadata"]["name"] for o in sc.kueue if o["kind"] == "ClusterQueue")
    wait_until(lambda: cq_active(custom, cq), 60, f"ClusterQueue {cq} active")
    time.sleep(settle)  # Kueue's caches follow nodes and pods by watch; give them a moment
    owner = _create_job(api, sc.job)
    messages: list[str] = []
    started = time.monotonic()
    first_message = 0.0
    while True:
        wl = workload_of(api, namespace, owner)
        admitted = admission(wl) if wl else None
        if admitted is not None:
            placed = {name: {"/".join(domain): pods for domain, pods in podset.domains.items()}
                      for name, podset in admitted.items()}
            return {"admitted": True, "placed": placed, "messages": messages}
        message = pending_message(wl) if wl else None
        if message is not None and message not in messages:
            messages.append(message)
            first_message = first_message or time.monotonic()
        now = time.monotonic()
        if messages and now > first_message + pending_for and now > started + admit_within:
            return {"admitted": False, "placed": {}, "messages": messages}
        if now > started + max(admit_within, pending_for) + 60:
            raise TimeoutError(f"{sc.name}: Kueue neither admitted the Workload nor said why: {json.dumps(wl)}")
        time.sleep(0.2)


def cleanup(api: client.ApiClient, sc: Scenario) -> None:
    """Remove what `replay` made, so Kueue's scheduler does not keep retrying old Workloads (best effort:
    a ClusterQueue goes once its namespace's Workloads have)."""
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    deletions = [lambda: core.delete_namespace(sc.job["metadata"]["namespace"])]
    deletions += [lambda n=n: core.delete_node(n["metadata"]["name"]) for n in sc.nodes]
    deletions += [lambda o=o: custom.delete_cluster_custom_object(GROUP, VERSION, KIND_PLURALS[o["kind"]],
                                                                  o["metadata"]["name"])
                  for o in reversed(sc.kueue) if o["kind"] in KIND_PLURALS]
    for delete in deletions:
        try:
            delete()
        except ApiException:
            pass
