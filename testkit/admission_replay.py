"""An admission scenario (testkit/quota_scenarios.py) replayed on a real cluster with the Kueue manager.

`isolate` gives the scenario its own names so many share one cluster: namespaces and node names get a
prefix, cluster-scoped Kueue objects (Topology, ResourceFlavors, Cohorts, ClusterQueues,
WorkloadPriorityClasses) a suffix, every flavor selects only the scenario's nodes. `Replay` creates it all,
submits the background jobs the oracle admitted one after another, each waited for until Kueue admits it,
reads the cluster as `topolabel fit` does (`inputs`), then submits the job and reports what Kueue decides:
admitted (and where), pending with its QuotaReserved messages (the condition's and its Pending Events'), or
preempting (the messages, and the workloads Kueue marked Preempted).
"""

from __future__ import annotations

import copy
import time
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kueue_config.tas.capacity import parse_pods
from kueue_config.tas.cluster import (list_kueue_objects, list_namespaces, list_pods, list_priority_classes,
                                      list_workloads)
from kueue_config.tas.judge import Inputs
from kueue_config.tas.setup import TASSetup
from labeler.cluster.kube import list_nodes
from testkit.kueue_workloads import (GROUP, VERSION, admission, condition, event_messages, pending_message,
                                   workload_of, workloads)
from testkit.operatorrun import wait_until
from testkit.quota_scenarios import PRIORITY_LABEL, QuotaScenario
from testkit.tas_cluster import HOST
from testkit.tas_replay import SCENARIO_LABEL, _create_job, _create_nodes, create_pods

CLUSTER_KINDS = {"Topology": "topologies", "ResourceFlavor": "resourceflavors", "Cohort": "cohorts",
                 "ClusterQueue": "clusterqueues", "WorkloadPriorityClass": "workloadpriorityclasses"}
CREATE_ORDER = ("WorkloadPriorityClass", "Topology", "ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue")
WAIT = 120


def isolate(sc: QuotaScenario, tag: str) -> QuotaScenario:
    """The scenario under its own names (see the module's doc)."""
    out = copy.deepcopy(sc)
    renamed = {}
    for n in out.nodes:
        old = n["metadata"]["name"]
        renamed[old] = n["metadata"]["name"] = f"{tag}-{old}"
        labels = n["metadata"]["labels"]
        labels[HOST] = f"{tag}-{labels.get(HOST, old)}"
        labels[SCENARIO_LABEL] = tag
    ns = {n["metadata"]["name"]: f"{tag}-{n['metadata']['name']}" for n in out.namespaces}
    for n in out.namespaces:
        n["metadata"]["name"] = ns[n["metadata"]["name"]]
        n["metadata"]["labels"]["kubernetes.io/metadata.name"] = n["metadata"]["name"]
    for p in out.pods:
        p["metadata"]["namespace"] = next(iter(ns.values()))
        if p["spec"].get("nodeName"):
            p["spec"]["nodeName"] = renamed[p["spec"]["nodeName"]]
    names = {o["metadata"]["name"]: f"{o['metadata']['name']}-{tag}" for o in out.kueue if o["kind"] in CLUSTER_KINDS}
    for obj in out.kueue:
        meta, spec = obj["metadata"], obj.get("spec") or {}
        if obj["kind"] in CLUSTER_KINDS:
            meta["name"] = names[meta["name"]]
        if obj["kind"] == "ResourceFlavor":
            spec["nodeLabels"] = {**(spec.get("nodeLabels") or {}), SCENARIO_LABEL: tag}
            spec["topologyName"] = names[spec["topologyName"]]
        elif obj["kind"] in ("ClusterQueue", "Cohort"):
            for rg in spec.get("resourceGroups") or []:
                for f in rg["flavors"]:
                    f["name"] = names[f["name"]]
            for key in ("cohortName", "parentName"):
                if spec.get(key):
                    spec[key] = names.get(spec[key], f"{spec[key]}-{tag}")
        elif obj["kind"] == "LocalQueue":
            meta["namespace"] = ns[meta["namespace"]]
            spec["clusterQueue"] = names[spec["clusterQueue"]]
    for job in [*out.background, out.job]:
        meta = job["metadata"]
        meta["namespace"] = ns[meta["namespace"]]
        if meta["labels"].get(PRIORITY_LABEL):
            meta["labels"][PRIORITY_LABEL] = names[meta["labels"][PRIORITY_LABEL]]
    out.name = f"{sc.name} [{tag}]"
    return out


def _create_kueue(custom: client.CustomObjectsApi, objects: list[dict[str, Any]]) -> None:
    for kind in CREATE_ORDER:
        for obj in (o for o in objects if o["kind"] == kind):
            if kind == "LocalQueue":
                custom.create_namespaced_custom_object(GROUP, VERSION, obj["metadata"]["namespace"], "localqueues", obj)
            else:
                custom.create_cluster_custom_object(GROUP, VERSION, CLUSTER_KINDS[kind], obj)


def _cq_decided(custom: client.CustomObjectsApi, name: str) -> bool:
    """Kueue has judged the ClusterQueue (its Active condition is there, True or not)."""
    cq = custom.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", name)
    return any(c["type"] == "Active" for c in (cq.get("status") or {}).get("conditions") or [])


class Replay:
    """One isolated scenario on the cluster."""

    def __init__(self, api: client.ApiClient, sc: QuotaScenario) -> None:
        self.api, self.sc = api, sc
        self.core, self.custom = client.CoreV1Api(api), client.CustomObjectsApi(api)

    def setup(self, admitted: list[str]) -> list[str]:
        """Everything but the job; the background jobs named in `admitted` (by the oracle), each waited for
        until Kueue admits it. Returns the background jobs Kueue did not admit (an oracle disagreement)."""
        for ns in self.sc.namespaces:
            self.core.create_namespace(ns)
        _create_nodes(self.core, self.sc.nodes)
        create_pods(self.core, self.sc.pods)
        _create_kueue(self.custom, self.sc.kueue)
        for cq in (o["metadata"]["name"] for o in self.sc.kueue if o["kind"] == "ClusterQueue"):
            wait_until(lambda cq=cq: _cq_decided(self.custom, cq), WAIT, f"ClusterQueue {cq} judged")
        time.sleep(1.0)  # Kueue's caches follow nodes and pods by watch
        missed = []
        for job in self.sc.background:
            if job["metadata"]["name"] not in admitted:
                continue
            uid = _create_job(self.api, job)
            ns = job["metadata"]["namespace"]

            def decided() -> Any:
                wl = workload_of(self.api, ns, uid)
                return wl and (admission(wl) is not None or pending_message(wl))
            wait_until(decided, WAIT, f"{job['metadata']['name']} decided")
            if admission(workload_of(self.api, ns, uid) or {}) is None:
                missed.append(job["metadata"]["name"])
        return missed

    def inputs(self, alone: bool = False) -> Inputs:
        """The cluster as `topolabel fit --kubeconfig` reads it; `alone`: as it would read a cluster holding this
        scenario and no other (advice searches the whole cluster, and another scenario's namespace with a
        LocalQueue of the same name is a right answer, but not this scenario's)."""
        tag = self.sc.nodes[0]["metadata"]["labels"][SCENARIO_LABEL]
        mine = (lambda ns: ns.startswith(f"{tag}-")) if alone else (lambda ns: True)
        kueue = [o for o in list_kueue_objects(self.api) if not alone or (
            mine(o["metadata"]["namespace"]) if o["kind"] == "LocalQueue" else o["metadata"]["name"].endswith(f"-{tag}"))]
        nodes = [n for n in list_nodes(self.api) if not alone or n.labels.get(SCENARIO_LABEL) == tag]
        names = {n.name for n in nodes}
        classes, default = list_priority_classes(self.api)
        return Inputs(TASSetup.from_objects(kueue, "cluster"), nodes,
                      [p for p in parse_pods(list_pods(self.api), "cluster") if not alone or p.node in names],
                      [w for w in list_workloads(self.api) if mine(w["metadata"]["namespace"])],
                      {ns: labels for ns, labels in list_namespaces(self.api).items() if mine(ns)}, classes, default)

    def submit(self, expect_admission: bool, pending_for: float = 3.0) -> dict[str, Any]:
        """Submit the job; Kueue's decision: admitted and where, or the QuotaReserved messages it showed
        while pending (and, when it preempts, the workloads it marked Preempted)."""
        ns = self.sc.job["metadata"]["namespace"]
        uid = _create_job(self.api, self.sc.job)
        messages: list[str] = []
        started = time.monotonic()
        first = 0.0
        while True:
            wl = workload_of(self.api, ns, uid)
            placed = admission(wl) if wl else None
            if placed is not None:
                return {"admitted": True, "messages": self.messages(wl, messages), "preempted": self.preempted(),
                        "placed": {name: {"/".join(d): n for d, n in ps.domains.items()} for name, ps in placed.items()}}
            message = pending_message(wl) if wl else None
            if message is not None and message not in messages:
                messages.append(message)
                first = first or time.monotonic()
            now = time.monotonic()
            if messages and now > first + pending_for and (not expect_admission or now > started + 60):
                return {"admitted": False, "messages": self.messages(wl, messages), "preempted": self.preempted(),
                        "placed": {}}
            if now > started + WAIT:
                raise TimeoutError(f"{self.sc.name}: Kueue neither admitted the Workload nor said why: {wl}")
            time.sleep(0.2)

    def messages(self, wl: dict[str, Any], seen: list[str]) -> list[str]:
        """The messages seen on the QuotaReserved condition, then those of Kueue's Pending Events for the
        Workload (a condition polled can be overwritten unseen: while Kueue preempts, the next cycle rewrites
        the first's message within milliseconds). Event notes Kueue cut at 1024 characters are left out."""
        return seen + [m for m in dict.fromkeys(event_messages(self.api, wl)) if len(m) < 1024 and m not in seen]

    def preempted(self) -> list[str]:
        """The workloads Kueue preempted: Preempted True, or, once admitted again elsewhere, reset to False
        with Kueue's "Previously: " before the old message."""
        out = []
        for ns in self.sc.namespaces:
            for wl in workloads(self.api, ns["metadata"]["name"]):
                found = condition(wl, "Preempted")
                if found and (found["status"] == "True" or (found.get("message") or "").startswith("Previously: ")):
                    out.append(f"{wl['metadata']['namespace']}/{wl['metadata']['name']}")
        return sorted(out)

    def cleanup(self) -> None:
        """Remove what was made (best effort), namespaces first so Kueue stops retrying their Workloads."""
        deletions = [lambda n=n: self.core.delete_namespace(n["metadata"]["name"]) for n in self.sc.namespaces]
        deletions += [lambda n=n: self.core.delete_node(n["metadata"]["name"]) for n in self.sc.nodes]
        for kind in reversed(CREATE_ORDER[:-1]):
            deletions += [lambda o=o: self.custom.delete_cluster_custom_object(GROUP, VERSION, CLUSTER_KINDS[o["kind"]],
                                                                               o["metadata"]["name"])
                          for o in self.sc.kueue if o["kind"] == kind]
        for delete in deletions:
            try:
                delete()
            except ApiException:
                pass
