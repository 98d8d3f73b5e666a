"""Placement scenarios with Kueue's answer, kept as data: the cluster, the Kueue objects and the job, as applied.

Every scenario is what a test cluster would be given - Node and Pod objects as the API serves them, Kueue
v1beta2 objects, one job manifest - so the same table can be replayed against a real Kueue (issue 12,
part 2) as it is today against hack/tas-oracle (Kueue's scheduler code run in-process). `expect`, where
given, is Kueue's answer worked out by hand from `tas_flavor_snapshot.go` or taken from Kueue's own unit
tests (`tas_cache_test.go`, named in `origin`); the oracle checks those too.

`random_scenario(seed)` makes a valid scenario of random shape: 2-3 levels, uneven nodes, running pods
(some filling the pod slots), tainted, NotReady and cordoned nodes, one or two flavors, and a job of a
random kind, mode, level and slice request.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from testkit.tas_cluster import GPU, GPU_TAINT, GPU_TOLERATION, HOST, node, pod, pod_template

API = "kueue.x-k8s.io/v1beta2"
DC, ZONE, BLOCK, RACK = "example.com/dc", "example.com/zone", "example.com/block", "example.com/rack"
REQ, PREF, UNC = (f"kueue.x-k8s.io/podset-{m}-topology" for m in ("required", "preferred", "unconstrained"))
SLICE_LEVEL, SLICE_SIZE = "kueue.x-k8s.io/podset-slice-required-topology", "kueue.x-k8s.io/podset-slice-size"
LAYERS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
GROUP = "kueue.x-k8s.io/podset-group-name"
QUEUE = "kueue.x-k8s.io/queue-name"
RESOURCES = ["cpu", "memory", GPU]


@dataclass
class Scenario:
    name: str
    nodes: list[dict[str, Any]]
    kueue: list[dict[str, Any]]
    job: dict[str, Any]
    pods: list[dict[str, Any]] = field(default_factory=list)
    expect: list[dict[str, Any]] | None = None  # per Workload: admitted, placed {PodSet: {node: pods}}, message
    origin: str = "worked out from tas_flavor_snapshot.go"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "nodes": self.nodes, "pods": self.pods, "kueue": self.kueue, "job": self.job,
                "expect": self.expect, "origin": self.origin}


# -- Kueue objects ------------------------------------------------------------------------------------------

def topology(name: str, levels: list[str]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": k} for k in levels]}}


def flavor(name: str, topology_name: str | None, labels: dict[str, str] | None = None,
           tolerations: list[dict[str, str]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": labels or {}}
    if tolerations:
        spec["tolerations"] = tolerations
    if topology_name:
        spec["topologyName"] = topology_name
    return {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def queues(flavors: list[str], resources: list[str] = RESOURCES) -> list[dict[str, Any]]:
    """A ClusterQueue `cq` with the flavors in this order (quota far above any scenario) and LocalQueue gpu."""
    return [{"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": "cq"},
             "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": resources, "flavors": [
                 {"name": f, "resources": [{"name": r, "nominalQuota": "100000"} for r in resources]}
                 for f in flavors]}]}},
            {"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": "gpu", "namespace": "team"},
             "spec": {"clusterQueue": "cq"}}]


def one_flavor(levels: list[str], tolerate: bool = True) -> list[dict[str, Any]]:
    return [topology("topo", levels), flavor("gpus", "topo", tolerations=[GPU_TOLERATION] if tolerate else None),
            *queues(["gpus"])]


# -- nodes and jobs -----------------------------------------------------------------------------------------

def cpu_node(name: str, labels: dict[str, str], cpu: int, max_pods: int = 10) -> dict[str, Any]:
    """A node like those of Kueue's unit tests: CPUs and pod slots only."""
    n = node(name, gpus=0, cpu=str(cpu), labels=labels, max_pods=max_pods)
    n["status"]["allocatable"].pop(GPU)
    return n


def main_cluster(**overrides: dict[str, Any]) -> list[dict[str, Any]]:
    """b1: r1 {n1, n2}, r2 {n3, n4}; b2: r3 {n5..n8}; 8 GPUs each, tainted for GPUs."""
    places = {"n1": ("b1", "r1"), "n2": ("b1", "r1"), "n3": ("b1", "r2"), "n4": ("b1", "r2"),
              "n5": ("b2", "r3"), "n6": ("b2", "r3"), "n7": ("b2", "r3"), "n8": ("b2", "r3")}
    return [node(n, b, r, **{"taints": [GPU_TAINT], **overrides.get(n, {})}) for n, (b, r) in places.items()]


def job(pods: int, annotations: dict[str, str] | None = None, gpus: int = 8, cpu: str | None = None,
        extra: dict[str, Any] | None = None) -> dict[str, Any]:
    template = pod_template(gpus, annotations)
    if cpu is not None:
        template["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
        template["spec"].pop("tolerations", None)
    template["spec"].update(extra or {})
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "team", "labels": {QUEUE: "gpu"}},
            "spec": {"parallelism": pods, "completions": pods, "template": template}}


def jobset(groups: list[tuple[str, int, int, dict[str, str]]], gpus: int = 8) -> dict[str, Any]:
    """A JobSet of (name, replicas, pods per Job, pod-template annotations) replicated Jobs."""
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "js", "namespace": "team", "labels": {QUEUE: "gpu"}},
            "spec": {"replicatedJobs": [
                {"name": name, "replicas": replicas, "template": {"spec": {
                    "parallelism": pods, "completions": pods, "template": pod_template(gpus, ann)}}}
                for name, replicas, pods, ann in groups]}}


def lws(replicas: int, size: int, annotations: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "serve", "namespace": "team", "labels": {QUEUE: "gpu"}},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": {
                "size": size, "leaderTemplate": pod_template(annotations=annotations),
                "workerTemplate": pod_template(annotations=annotations)}}}


def pytorchjob(masters: int, workers: int, master_ann: dict[str, str], worker_ann: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "pt", "namespace": "team", "labels": {QUEUE: "gpu"}},
            "spec": {"pytorchReplicaSpecs": {
                "Master": {"replicas": masters, "template": pod_template(annotations=master_ann)},
                "Worker": {"replicas": workers, "template": pod_template(annotations=worker_ann)}}}}


def admitted(placed: dict[str, dict[str, int]]) -> dict[str, Any]:
    return {"admitted": True, "placed": placed, "message": "", "cycles": []}


def pending(message: str) -> dict[str, Any]:
    """Pending with one flavor: one cycle, and its message."""
    return {"admitted": False, "placed": {}, "message": message, "cycles": [message]}


def layers(*pairs: tuple[str, int]) -> str:
    return json.dumps([{"topology": t, "size": s} for t, s in pairs])


KEYS = [BLOCK, RACK, HOST]


def _multi_layer() -> list[Scenario]:
    """Kueue's own multi-layer cases (tas_cache_test.go), nodes with CPUs only."""
    def rack_cluster(cpus: dict[str, tuple[str, str, int]]) -> list[dict[str, Any]]:
        return [cpu_node(f"b1-{r}-{x}", {BLOCK: b, RACK: r, HOST: x}, c) for x, (b, r, c) in cpus.items()]
    cpu_queue = one_flavor(KEYS, tolerate=False)
    test = "tas_cache_test.go: 'multi-layer topology: "
    return [
        Scenario("multi-layer: block required, rack slices of 4, host slices of 2",
                 rack_cluster({"x1": ("b1", "r1", 1), "x2": ("b1", "r1", 4), "x3": ("b1", "r2", 3),
                               "x4": ("b1", "r2", 4)}), cpu_queue,
                 job(8, {REQ: BLOCK, LAYERS: layers((RACK, 4), (HOST, 2))}, cpu="1"),
                 expect=[admitted({"main": {"x2": 4, "x3": 2, "x4": 2}})],
                 origin=test + "block required; rack slices of 4; host slices of 2; TASMultiLayerTopology'"),
        Scenario("multi-layer: host slice rounding makes the rack slice impossible",
                 rack_cluster({"x1": ("b1", "r1", 3), "x2": ("b1", "r1", 3), "x3": ("b1", "r1", 0)}), cpu_queue,
                 job(6, {REQ: BLOCK, LAYERS: layers((RACK, 6), (HOST, 2))}, cpu="1"),
                 expect=[pending('couldn\'t assign flavors to pod set main: topology "topo" doesn\'t allow to fit; '
                                 f'0/1 slice(s) fit on level {RACK}; 2/3 slice(s) fit on level {HOST}. Total nodes: 3;'
                                 ' excluded: resource "cpu": 1')],
                 origin=test + "host slice rounding makes rack slice impossible'"),
        Scenario("multi-layer: a small host kills rack slices despite enough capacity",
                 rack_cluster({"x1": ("b1", "r1", 7), "x2": ("b1", "r1", 4), "x3": ("b1", "r2", 7),
                               "x4": ("b1", "r2", 3)}), cpu_queue,
                 job(16, {REQ: BLOCK, LAYERS: layers((RACK, 8), (HOST, 4))}, cpu="1"),
                 expect=[pending('couldn\'t assign flavors to pod set main: topology "topo" doesn\'t allow to fit; '
                                 f'1/2 slice(s) fit on level {RACK}; 3/4 slice(s) fit on level {HOST}')],
                 origin=test + "small host kills rack slices despite enough total capacity'"),
        Scenario("multi-layer: enough host slices, not enough rack slices",
                 rack_cluster({"x1": ("b1", "r1", 4), "x2": ("b1", "r2", 4), "x3": ("b1", "r3", 4)}), cpu_queue,
                 job(12, {REQ: BLOCK, LAYERS: layers((RACK, 6), (HOST, 2))}, cpu="1"),
                 expect=[pending('couldn\'t assign flavors to pod set main: topology "topo" doesn\'t allow to fit; '
                                 f'0/2 slice(s) fit on level {RACK}; 6/6 slice(s) fit on level {HOST}')],
                 origin=test + "enough hostname slices but not enough rack slices'"),
        Scenario("multi-layer: three layers, small hosts cascading up",
                 [cpu_node(f"dc1-{b}-{r}-{x}", {DC: "dc1", BLOCK: b, RACK: r, HOST: x}, c) for x, (b, r, c) in {
                     "x1": ("b1", "r1", 4), "x2": ("b1", "r1", 4), "x3": ("b1", "r2", 4), "x4": ("b1", "r2", 4),
                     "x5": ("b2", "r3", 4), "x6": ("b2", "r3", 4), "x7": ("b2", "r4", 1),
                     "x8": ("b2", "r4", 1)}.items()],
                 one_flavor([DC, BLOCK, RACK, HOST], tolerate=False),
                 job(24, {REQ: DC, LAYERS: layers((BLOCK, 12), (RACK, 6), (HOST, 3))}, cpu="1"),
                 expect=[pending('couldn\'t assign flavors to pod set main: topology "topo" doesn\'t allow to fit; '
                                 f'1/2 slice(s) fit on level {BLOCK}; 3/4 slice(s) fit on level {RACK}; '
                                 f'6/8 slice(s) fit on level {HOST}')],
                 origin=test + "3-layer negative case with small hosts cascading up'"),
        Scenario("multi-layer: GB200-like racks, zone slices of 48, rack slices of 16",
                 [cpu_node(f"{z}-{b}-{r}-n{i}", {DC: "dc0", ZONE: z, BLOCK: b, RACK: r}, 0, 110)
                  | {"status": {"allocatable": {GPU: "2", "pods": "110"},
                                "conditions": [{"type": "Ready", "status": "True"}]}}
                  for z, b, r in [("aizone0", "block0", "r0"), ("aizone0", "block0", "r1"),
                                  ("aizone0", "block1", "r2"), ("aizone0", "block1", "r3"),
                                  ("aizone1", "block2", "r4"), ("aizone1", "block2", "r5"),
                                  ("aizone1", "block3", "r6"), ("aizone1", "block3", "r7")] for i in range(18)],
                 one_flavor([DC, ZONE, BLOCK, RACK], tolerate=False),
                 job(96, {REQ: DC, LAYERS: layers((ZONE, 48), (RACK, 16))}, gpus=2, extra={"tolerations": []}),
                 expect=[admitted({"main": {f"dc0/{z}/{b}/{r}": 16 for z, b, r in [
                     ("aizone0", "block0", "r0"), ("aizone0", "block0", "r1"), ("aizone0", "block1", "r2"),
                     ("aizone1", "block2", "r4"), ("aizone1", "block2", "r5"), ("aizone1", "block3", "r6")]}})],
                 origin=test + "mimic a real-world GB200 cluster ...'"),
    ]


def table() -> list[Scenario]:
    """The fixed table: every class of issue 12, part 2."""
    base = one_flavor(KEYS)
    drained = main_cluster(n5={"ready": False}, n6={"taints": [GPU_TAINT, {"key": "maintenance", "value": "drain",
                                                                           "effect": "NoSchedule"}]})
    two_pools = main_cluster(**{n: {"labels": {"pool": "small" if n in ("n1", "n2") else "big"}} for n in
                                ("n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8")})
    return [
        Scenario("required block: both hold 4, the first by name; inside it, 2 per rack", main_cluster(), base,
                 job(4, {REQ: BLOCK}), expect=[admitted({"main": {"n1": 1, "n2": 1, "n3": 1, "n4": 1}})]),
        Scenario("required block: 5 pods, no block holds them", main_cluster(), base, job(5, {REQ: BLOCK}),
                 expect=[pending('couldn\'t assign flavors to pod set main: topology "topo" allows to fit only 4 out '
                                 'of 5 pod(s)')]),
        Scenario("preferred block spreads over both blocks", main_cluster(), base, job(5, {PREF: BLOCK}),
                 expect=[admitted({"main": {"n1": 1, "n2": 1, "n5": 1, "n6": 1, "n7": 1}})]),
        Scenario("preferred rack climbs to block past a NotReady and a tainted node", drained, base,
                 job(3, {PREF: RACK}), expect=[admitted({"main": {"n1": 1, "n2": 1, "n3": 1}})]),
        Scenario("required rack fails on a tainted node, with Kueue's exclusion counts", drained, base,
                 job(3, {REQ: RACK}),
                 expect=[pending('couldn\'t assign flavors to pod set main: topology "topo" allows to fit only 2 out '
                                 'of 3 pod(s). Total nodes: 7; excluded: taint "maintenance=drain:NoSchedule": 1')]),
        Scenario("cordoned nodes are left out", main_cluster(n7={"unschedulable": True}, n8={"unschedulable": True}),
                 base, job(3, {REQ: RACK}),
                 expect=[pending('couldn\'t assign flavors to pod set main: topology "topo" allows to fit only 2 out '
                                 'of 3 pod(s)')]),
        Scenario("unconstrained fills the fullest nodes first", main_cluster(), base, job(3, {UNC: "true"}, gpus=4),
                 pods=[pod("a", "n2", 4), pod("b", "n6", 6)]),
        Scenario("no annotations in a TAS-only queue: implied TAS", main_cluster(), base, job(3, gpus=4),
                 pods=[pod("a", "n3", 4)]),
        Scenario("running pods hold GPUs; finished and unbound ones do not", main_cluster(), base,
                 job(4, {REQ: RACK}),
                 pods=[pod("d", "n5", 8), pod("done", "n6", 8, phase="Succeeded"), pod("p", None, 8),
                       pod("half", "n7", 4)]),
        Scenario("pod slots: DaemonSet pods fill a node's allocatable pods", main_cluster(
            **{n: {"max_pods": 3} for n in ("n1", "n2", "n3", "n4")}), base, job(2, {REQ: RACK}, gpus=1),
                 pods=[pod(f"ds-{n}-{i}", n, 0) for n in ("n1", "n2", "n3") for i in range(3)]),
        Scenario("slices of 4 pods within a rack", main_cluster(), base,
                 job(8, {REQ: BLOCK, SLICE_LEVEL: RACK, SLICE_SIZE: "4"}, gpus=4), pods=[pod("o", "n4", 4)],
                 expect=[admitted({"main": {"n5": 2, "n6": 2, "n7": 2, "n8": 2}})]),
        Scenario("slices only (no mode): placed from the top level, fullest first", main_cluster(), base,
                 job(4, {SLICE_LEVEL: RACK, SLICE_SIZE: "2"}, gpus=4), pods=[pod("o", "n1", 4)]),
        Scenario("JobSet: leader and workers grouped in one rack", main_cluster(), base,
                 jobset([("leader", 1, 1, {REQ: RACK, GROUP: "lw"}), ("workers", 1, 3, {REQ: RACK, GROUP: "lw"})])),
        Scenario("JobSet: two replicated Jobs, each placed after the other", main_cluster(), base,
                 jobset([("a", 2, 2, {REQ: BLOCK}), ("b", 1, 3, {PREF: RACK})])),
        Scenario("LeaderWorkerSet: the second replica queues behind the first", main_cluster(), base,
                 lws(2, 4, {REQ: RACK, GROUP: "lw"})),
        Scenario("PyTorchJob: master and workers grouped in one block", main_cluster(), base,
                 pytorchjob(1, 3, {REQ: BLOCK, GROUP: "g"}, {REQ: BLOCK, GROUP: "g"})),
        Scenario("PyTorchJob group of 2 and 3 pods: Kueue places one of the smaller", main_cluster(), base,
                 pytorchjob(2, 3, {REQ: BLOCK, GROUP: "g"}, {REQ: BLOCK, GROUP: "g"})),
        Scenario("nodeSelector leaves nodes out, with Kueue's count", main_cluster(
            n5={"labels": {"disk": "ssd"}}, n6={"labels": {"disk": "ssd"}}), base,
                 job(3, {REQ: BLOCK}, extra={"nodeSelector": {"disk": "ssd"}})),
        Scenario("required node affinity", main_cluster(n1={"labels": {"gen": "2"}}, n2={"labels": {"gen": "3"}}),
                 base, job(1, {REQ: RACK}, extra={"affinity": {"nodeAffinity": {
                     "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "gen", "operator": "Gt", "values": ["2"]}]}]}}}})),
        Scenario("two flavors: the first is too small, Kueue admits on the second", two_pools,
                 [topology("topo", KEYS), flavor("small", "topo", {"pool": "small"}, [GPU_TOLERATION]),
                  flavor("big", "topo", {"pool": "big"}, [GPU_TOLERATION]), *queues(["small", "big"])],
                 job(4, {REQ: BLOCK})),
        Scenario("two flavors, two Topologies: the second has the level", two_pools,
                 [topology("blocks", [BLOCK, HOST]), topology("racks", [RACK, HOST]),
                  flavor("small", "blocks", {"pool": "small"}, [GPU_TOLERATION]),
                  flavor("big", "racks", {"pool": "big"}, [GPU_TOLERATION]), *queues(["small", "big"])],
                 job(3, {REQ: RACK})),
        Scenario("a job without TAS in a queue with a non-TAS flavor: admitted, kube-scheduler places it",
                 main_cluster(), [topology("topo", KEYS), flavor("plain", None), flavor("gpus", "topo"),
                                  *queues(["plain", "gpus"])], job(20)),
        Scenario("unconstrained: \"false\" asks for no level: no flavor has it", main_cluster(), base,
                 job(2, {UNC: "false"})),
        Scenario("a taint the flavor does not tolerate", main_cluster(), one_flavor(KEYS, tolerate=False),
                 job(1, {REQ: RACK}, extra={"tolerations": []})),
        *_multi_layer(),
    ]


# -- seeded random scenarios --------------------------------------------------------------------------------

def _random_nodes(rng: random.Random, levels: list[str], pools: list[str]) -> list[dict[str, Any]]:
    nodes = []
    for b in range(rng.randint(1, 4)):
        for r in range(rng.randint(1, 3)):
            for h in range(rng.randint(1, 4)):
                name = f"b{b}-r{r}-h{h}"
                values = {BLOCK: f"b{b}", RACK: f"b{b}-r{r}", ZONE: f"z{b % 2}"}
                labels = {k: values[k] for k in levels if k != HOST}
                labels["pool"] = rng.choice(pools)
                kwargs: dict[str, Any] = {"gpus": rng.choice([4, 8, 8, 8]), "labels": labels,
                                          "max_pods": rng.choice([110, 110, 6, 3]), "taints": [GPU_TAINT]}
                roll = rng.random()
                if roll < 0.05:
                    kwargs["ready"] = False
                elif roll < 0.1:
                    kwargs["unschedulable"] = True
                elif roll < 0.15:
                    kwargs["taints"] = [GPU_TAINT, {"key": "maintenance", "value": "x", "effect": "NoSchedule"}]
                nodes.append(node(name, **kwargs))
    return nodes


def _random_pods(rng: random.Random, nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pods here and there, and on some nodes small pods up to every pod slot (DaemonSets on a tight node)."""
    pods = []
    for i in range(rng.randint(0, 2 * len(nodes))):
        target = rng.choice(nodes)["metadata"]["name"]
        phase = "Succeeded" if rng.random() < 0.1 else "Running"
        pods.append(pod(f"p{i}", target, rng.choice([0, 0, 1, 2, 4, 8]), phase=phase))
    for n in nodes:
        slots = int(n["status"]["allocatable"]["pods"])
        if slots < 10 and rng.random() < 0.5:
            name = n["metadata"]["name"]
            pods += [pod(f"ds-{name}-{i}", name, 0) for i in range(slots - rng.choice([0, 0, 1]))]
    return pods


def _random_annotations(rng: random.Random, levels: list[str], count: int) -> dict[str, str]:
    ann: dict[str, str] = {}
    mode = rng.choice(["required", "preferred", "unconstrained", "implied", "slices-only"])
    level = rng.choice(levels)
    if mode == "required":
        ann[REQ] = level
    elif mode == "preferred":
        ann[PREF] = level
    elif mode == "unconstrained":
        ann[UNC] = "true"
    below = levels[levels.index(level):] if mode in ("required", "preferred") else levels
    divisors = [d for d in range(2, count + 1) if count % d == 0]
    if mode == "slices-only" or (divisors and rng.random() < 0.45):
        if not divisors:
            return {REQ: level}
        size = rng.choice(divisors)
        slice_level = rng.choice(below)
        inner = [d for d in range(1, size) if size % d == 0 and d > 1]
        deeper = below[below.index(slice_level) + 1:]
        if inner and deeper and rng.random() < 0.7:
            ann[LAYERS] = layers((slice_level, size), (rng.choice(deeper), rng.choice(inner)))
        else:
            ann[SLICE_LEVEL], ann[SLICE_SIZE] = slice_level, str(size)
    return ann


def random_scenario(seed: int) -> Scenario:
    """A valid scenario of random shape (the same seed gives the same scenario)."""
    rng = random.Random(seed)
    levels = rng.choice([[BLOCK, RACK, HOST], [BLOCK, RACK, HOST], [ZONE, BLOCK, HOST], [BLOCK, RACK]])
    pools = ["a"] if rng.random() < 0.6 else ["a", "b"]
    nodes = _random_nodes(rng, levels, pools)
    kueue: list[dict[str, Any]] = [topology("topo", levels)]
    names = []
    for p in pools:
        kueue.append(flavor(f"pool-{p}", "topo", {"pool": p}, [GPU_TOLERATION]))
        names.append(f"pool-{p}")
    kueue += queues(names)
    count = rng.choice([1, 2, 3, 4, 4, 6, 8, 8, 12, 16])
    gpus = rng.choice([1, 2, 4, 8])
    kind = rng.choice(["job", "job", "jobset", "lws"])
    if kind == "job":
        manifest = job(count, _random_annotations(rng, levels, count), gpus=gpus)
    elif kind == "jobset":
        ann = _random_annotations(rng, levels, count)
        manifest = jobset([("w", 1, count, ann), ("x", 1, rng.randint(1, 3), _random_annotations(rng, levels, 1))],
                          gpus=gpus)
    else:
        mode = rng.choice([REQ, PREF])
        manifest = lws(rng.randint(1, 2), rng.randint(2, 4), {mode: rng.choice(levels), GROUP: "g"})
    return Scenario(f"random {seed}", nodes, kueue, manifest, _random_pods(rng, nodes), origin="random")
