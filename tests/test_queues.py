"""Queues for teams: several ClusterQueues with quotas per pool, limits, preemption, fair sharing, Cohorts,
LocalQueues per namespace, each object as Kueue v0.19.2 would accept it (CRD schema, CEL, webhook rules)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from hack.synth import H100, gke_cluster, node_object
from kueue_config.files import KUSTOMIZATION, read_dir, render
from kueue_config.objects import generate
from labeler.errors import InputError, TopologyError
from labeler.io.nodes import parse_nodes
from labeler.settings.config import Config, parse_config
from labeler.settings.queues import Amount
from labeler.topology.model import Level, Snapshot
from labeler.topology.placement import level_keys, to_snapshot
from providers.base import SourceContext
from providers.labels import discover
from testkit.environment import EXAMPLES
from testkit.kueuerules import problems

H100_POOL, B200_POOL = "nvidia-h100-mega-80gb", "nvidia-b200"
POOLS = {"label": "cloud.google.com/gke-accelerator"}
TEAMS = yaml.safe_load((EXAMPLES / "teams.yaml").read_text())


def cluster(blocks: int = 2, extra: list[dict[str, Any]] = ()) -> tuple[Snapshot, list]:
    """2 blocks x 2 subblocks x 8 hosts: block 0 H100 (16 nodes, 128 GPUs), block 1 B200 (the same)."""
    items, _ = gke_cluster(blocks=blocks, subblocks=2, hosts=8)
    nodes = parse_nodes([*items, *extra], "test")
    found = discover(SourceContext(nodes=nodes, options={"preset": "gke"}))
    return to_snapshot(found, level_keys(found.level_names)), nodes


def objects(config: dict[str, Any], blocks: int = 2) -> tuple[list[dict[str, Any]], list[str]]:
    snap, nodes = cluster(blocks)
    result = generate(snap, nodes, parse_config(config, "test"))
    return result.objects, [p.message for p in result.problems]


def queue(objs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(o for o in objs if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == name)


def quotas(cq: dict[str, Any], resource: str = "nvidia.com/gpu") -> dict[str, dict[str, str]]:
    """Pool (flavor name without its hash) -> that resource's quota entry."""
    return {f["name"].rsplit("-", 1)[0]: next(r for r in f["resources"] if r["name"] == resource)
            for g in cq["spec"]["resourceGroups"] for f in g["flavors"]}


def test_the_two_teams_example_is_what_kueue_accepts_and_shares_each_pool() -> None:
    objs, found = objects(TEAMS)
    assert [o["kind"] for o in objs] == ["Topology", "ResourceFlavor", "ResourceFlavor", "Cohort", "ClusterQueue",
                                         "ClusterQueue", "LocalQueue", "LocalQueue"]
    for obj in objs:
        assert problems(obj) == [], (obj["kind"], obj["metadata"]["name"])
    assert found == []
    a, b = queue(objs, "team-a"), queue(objs, "team-b")
    assert a["spec"]["cohortName"] == b["spec"]["cohortName"] == "research"
    # 128 GPUs per pool in this cluster: half is 64, a multiple of the step 32; team-a lends at most a quarter
    assert quotas(a) == {B200_POOL: {"name": "nvidia.com/gpu", "nominalQuota": "64", "lendingLimit": "32"},
                         H100_POOL: {"name": "nvidia.com/gpu", "nominalQuota": "64", "lendingLimit": "32"}}
    assert quotas(b) == {H100_POOL: {"name": "nvidia.com/gpu", "nominalQuota": "64", "borrowingLimit": "64"},
                         B200_POOL: {"name": "nvidia.com/gpu", "nominalQuota": "64", "borrowingLimit": "64"}}
    assert [f["name"].rsplit("-", 1)[0] for f in b["spec"]["resourceGroups"][0]["flavors"]] == [H100_POOL, B200_POOL]
    assert quotas(a, "memory")[H100_POOL]["nominalQuota"] == "8Ti"  # 16 x 1850Gi / 2 = 14800Gi, down to 8Ti steps
    assert quotas(a, "cpu")[H100_POOL]["nominalQuota"] == "1500"  # 16 x 207 / 2 = 1656, down to steps of 500
    assert a["spec"]["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    assert a["spec"]["fairSharing"] == {"weight": "1"}
    assert [(q["metadata"]["namespace"], q["spec"]["clusterQueue"]) for q in objs if q["kind"] == "LocalQueue"] == [
        ("team-a", "team-a"), ("team-b", "team-b")]


@pytest.mark.parametrize("amount, capacity, expected", [
    (64, "128", "64"), ("1850Gi", "0", "1850Gi"), ({"fraction": 0.5}, "207", "103"),
    ({"fraction": 0.5, "step": 32}, "136", "64"), ({"step": 64}, "200", "192"), ({}, "7", "7"),
    ({"fraction": 0.5, "step": "1Ti"}, "14800Gi", "7Ti"), ({"fraction": 0.25, "step": "500m"}, "3", "500m"),
])
def test_an_amount_is_fixed_a_fraction_or_rounded_down_to_a_step(amount: Any, capacity: str, expected: str) -> None:
    from labeler.settings.quantities import format_quantity, parse
    assert format_quantity(Amount.model_validate(amount).of(parse(capacity))) == expected


def test_quotas_come_from_the_flavor_then_the_queue_then_the_section_then_the_capacity() -> None:
    objs, _ = objects({"pools": POOLS, "kueue": {
        "quota": {"nvidia.com/gpu": {"fraction": 0.5}},
        "clusterQueues": [
            {"name": "fixed", "quota": {"nvidia.com/gpu": 10},
             "flavors": [{"pool": B200_POOL, "quota": {"nvidia.com/gpu": 3}}, {"pool": H100_POOL}]},
            {"name": "section"},
        ]}})
    assert {p: q["nominalQuota"] for p, q in quotas(queue(objs, "fixed")).items()} == {B200_POOL: "3", H100_POOL: "10"}
    assert {p: q["nominalQuota"] for p, q in quotas(queue(objs, "section")).items()} == {B200_POOL: "64", H100_POOL: "64"}
    cpu = quotas(queue(objs, "section"), "cpu")  # no default for cpu: the whole capacity
    assert cpu[H100_POOL]["nominalQuota"] == str(16 * int(H100.cpu))


def test_a_node_joining_changes_no_file_under_rounding_and_does_without_it(tmp_path: Path) -> None:
    """The reason for steps: with the rounding quota the files stay byte-identical when a node joins; the
    exact capacity (the old behaviour, still the default) changes, so the comparison can fail."""
    late = node_object("gke-late", {"cloud.google.com/gce-topology-block": "late-block",
                                    "cloud.google.com/gce-topology-subblock": "late-sub",
                                    "cloud.google.com/gce-topology-host": "late-host"}, H100, "us-central1-b")
    for config, same in ((TEAMS, True), ({"pools": POOLS}, False)):
        cfg = parse_config(config, "test")
        before = render(generate(*cluster(), cfg).objects, "kueue")
        snap, nodes = cluster(extra=[late])
        assert "gke-late" in snap.nodes
        after = render(generate(snap, nodes, cfg).objects, "kueue")
        assert (before == after) is same, config


def test_limits_preemption_fair_sharing_and_a_cohort_tree_pass_kueue() -> None:
    objs, found = objects({"pools": POOLS, "kueue": {
        "cohorts": [{"name": "org", "fairSharing": {"weight": "0.5"}},
                    {"name": "research", "parent": "org", "fairSharing": {"weight": 2}}],
        "clusterQueues": [
            {"name": "team-a", "cohort": "research", "queueingStrategy": "StrictFIFO",
             "borrowingLimit": {"nvidia.com/gpu": {"fraction": 0.5}}, "lendingLimit": {"cpu": 100},
             "preemption": {"reclaimWithinCohort": "LowerPriority", "withinClusterQueue": "LowerOrNewerEqualPriority",
                            "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}},
             "fairSharing": {"weight": 0}},
            {"name": "team-b", "cohort": "research", "quota": {"nvidia.com/gpu": 0, "cpu": 0, "memory": 0}}],
        "localQueues": [{"name": "gpu", "namespaces": ["team-a", "shared"], "clusterQueue": "team-a"},
                        {"name": "gpu", "namespaces": ["team-b"], "clusterQueue": "team-b"},
                        {"name": "batch", "namespaces": ["shared"], "clusterQueue": "team-b"}]}})
    for obj in objs:
        assert problems(obj) == [], (obj["kind"], obj["metadata"]["name"])
    cohorts = {o["metadata"]["name"]: o["spec"] for o in objs if o["kind"] == "Cohort"}
    assert cohorts == {"org": {"fairSharing": {"weight": "0.5"}},
                       "research": {"parentName": "org", "fairSharing": {"weight": "2"}}}
    a = queue(objs, "team-a")
    assert a["spec"]["queueingStrategy"] == "StrictFIFO"
    assert quotas(a)[H100_POOL] == {"name": "nvidia.com/gpu", "nominalQuota": "128", "borrowingLimit": "64"}
    assert quotas(a, "cpu")[H100_POOL]["lendingLimit"] == "100"
    assert a["spec"]["preemption"]["borrowWithinCohort"] == {"policy": "LowerPriority", "maxPriorityThreshold": 100}
    lqs = sorted((o["metadata"]["namespace"], o["metadata"]["name"], o["spec"]["clusterQueue"])
                 for o in objs if o["kind"] == "LocalQueue")
    assert lqs == [("shared", "batch", "team-b"), ("shared", "gpu", "team-a"), ("team-a", "gpu", "team-a"),
                   ("team-b", "gpu", "team-b")]
    assert found == []  # all of a pool + nothing: not more than the pool holds


def test_the_rules_do_refuse_what_kueue_refuses() -> None:
    """Guards the tests above: objects broken as Kueue's webhooks and CRDs would refuse them do fail."""
    objs, _ = objects(TEAMS)
    cq = queue(objs, "team-a")
    resources = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    resources[0], resources[1] = resources[1], resources[0]  # same count, other order: only the webhook sees it
    assert any("must match the name in coveredResources" in p for p in problems(cq))
    cq = queue(objects(TEAMS)[0], "team-a")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["lendingLimit"] = "200"
    assert any("less than or equal to the nominalQuota" in p for p in problems(cq))
    cq = queue(objects(TEAMS)[0], "team-b")
    del cq["spec"]["cohortName"]
    assert any("borrowingLimit must be nil when cohort is empty" in p for p in problems(cq))  # the CRD's CEL rule
    cq["spec"]["preemption"] = {"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}
    assert any("reclaimWithinCohort=Never" in p for p in problems(cq))
    cohort = next(o for o in objects(TEAMS)[0] if o["kind"] == "Cohort")
    cohort["spec"] = {"parentName": "Not_A_Name", "fairSharing": {"weight": "1n"}}
    found = problems(cohort)
    assert any("parentName" in p for p in found) and any("weight" in p for p in found)


def test_the_one_clusterqueue_config_keeps_its_output() -> None:
    """Byte for byte what the single-queue config gave before several queues existed (test_kueue.py has more)."""
    objs, _ = objects({"pools": POOLS, "kueue": {"clusterQueue": "gpu", "cohort": "research",
                                                 "localQueues": [{"name": "gpu", "namespaces": ["b", "a"]}]}})
    cq = queue(objs, "gpu")
    assert list(cq["spec"]) == ["cohortName", "namespaceSelector", "resourceGroups"]
    assert [o["kind"] for o in objs].count("Cohort") == 0
    assert [(o["metadata"]["namespace"], o["spec"]) for o in objs if o["kind"] == "LocalQueue"] == [
        ("a", {"clusterQueue": "gpu"}), ("b", {"clusterQueue": "gpu"})]


def test_problems_name_a_missing_pool_a_lending_limit_above_the_quota_an_overcommitted_pool_and_a_zero() -> None:
    _, found = objects({"pools": POOLS, "kueue": {"clusterQueues": [
        {"name": "a", "cohort": "c", "flavors": [{"pool": "nvidia-b20"}, {"pool": H100_POOL}],
         "quota": {"nvidia.com/gpu": 100, "cpu": {"fraction": 0}}, "lendingLimit": {"nvidia.com/gpu": 120}},
        {"name": "b", "flavors": [{"pool": H100_POOL}], "quota": {"nvidia.com/gpu": 64,
                                                                 "memory": {"fraction": 0.5, "step": "16Ti"}}}]}})
    assert any(f"ClusterQueue b, pool {H100_POOL}: its memory quota rounds down to 0 (0.5 of 29600Gi is less than "
               "a step)" in m for m in found)
    assert not any("cpu quota rounds down to 0" in m for m in found)  # a fraction of 0 is meant
    assert any("no node is in pool 'nvidia-b20'" in m and "did you mean 'nvidia-b200'" in m for m in found)
    assert any("lendingLimit 120 is more than the quota 100; lowered to it" in m for m in found)
    assert any(f"pool {H100_POOL}: its ClusterQueues' nvidia.com/gpu quotas add up to 164, more than its 128" in m
               for m in found)


@pytest.mark.parametrize("kueue, fragment", [
    ({"clusterQueues": [{"name": "Team-A"}]}, "kueue.clusterQueues[0].name: 'Team-A' is not a Kubernetes name"),
    ({"clusterQueues": [{"name": "a/../../x"}]}, "kueue.clusterQueues[0].name: 'a/../../x' is not a Kubernetes name"),
    ({"clusterQueue": "../escape"}, "kueue.clusterQueue: '../escape' is not a Kubernetes name"),
    ({"cohorts": [{"name": "x" * 254}]}, "kueue.cohorts[0].name: 'xxxx"),
    ({"localQueues": [{"name": "q" * 64, "namespaces": ["a"]}]}, "kueue.localQueues[0].name: 'qqqq"),
    ({"localQueues": [{"name": "gpu", "namespaces": ["a.b"]}]}, "kueue.localQueues[0].namespaces[0]: 'a.b' is not"),
    ({"localQueues": [{"name": "gpu", "namespaces": ["/etc"]}]}, "kueue.localQueues[0].namespaces[0]: '/etc' is not"),
    ({"clusterQueues": [{"name": "a"}, {"name": "a"}]}, "kueue.clusterQueues[1]: 'a' is listed twice"),
    ({"clusterQueues": [{"name": "a"}, {"name": "b"}], "localQueues": [{"name": "q", "namespaces": ["n"]}]},
     "kueue.localQueues[0].clusterQueue: name its ClusterQueue: there are several (a, b)"),
    ({"clusterQueues": [{"name": "team-a"}], "localQueues": [{"name": "q", "namespaces": ["n"], "clusterQueue": "team-b"}]},
     "kueue.localQueues[0].clusterQueue: no ClusterQueue 'team-b'; did you mean 'team-a'?"),
    ({"clusterQueues": [{"name": "a", "borrowingLimit": {"cpu": 1}}]},
     "kueue.clusterQueues[0].borrowingLimit.cpu: limits need a cohort"),
    ({"clusterQueues": [{"name": "a", "quota": {"nvidia.com/gpus": 8}}]},
     'kueue.clusterQueues[0].quota["nvidia.com/gpus"]: not one of pools.resources; did you mean \'nvidia.com/gpu\'?'),
    ({"clusterQueues": [{"name": "a", "quota": {"cpu": {"fraction": 1.5}}}]},
     "kueue.clusterQueues[0].quota.cpu.fraction: must be at most 1"),
    ({"quota": {"cpu": {"step": 0}}}, "kueue.quota.cpu.step: must be more than 0"),
    ({"quota": {"cpu": "lots"}}, "kueue.quota.cpu: 'lots' is not a Kubernetes quantity"),
    ({"quota": {"cpu": -1}}, "kueue.quota.cpu: -1 is negative"),
    ({"quota": {"cpu": {"value": 3}}}, "kueue.quota.cpu: write a fixed amount as the quantity itself"),
    ({"clusterQueues": [{"name": "a", "fairSharing": {"weight": "1n"}}]},
     "kueue.clusterQueues[0].fairSharing.weight: '1n': a weight is 0 or more than 1e-9"),
    ({"clusterQueues": [{"name": "a", "preemption": {"reclaimWithinCohort": "Never",
                                                     "borrowWithinCohort": {"policy": "LowerPriority"}}}]},
     "kueue.clusterQueues[0].preemption.borrowWithinCohort.policy: must be Never when reclaimWithinCohort is Never"),
    ({"clusterQueues": [{"name": "a", "preemption": {"withinClusterQueue": "Any"}}]},
     "kueue.clusterQueues[0].preemption.withinClusterQueue: must be 'Never', "),
    ({"cohorts": [{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}]},
     "kueue.cohorts[0].parent: cohorts form a cycle: a -> b -> a"),
    ({"clusterQueues": [{"name": "a"}], "cohort": "c"},
     "kueue.cohort: describes the one ClusterQueue; with clusterQueues, give each its name and cohort there"),
    ({"clusterQueues": [{"name": "a", "flavors": [{"pool": "p"}, {"pool": "p"}]}]},
     "kueue.clusterQueues[0].flavors[1]: 'p' is listed twice"),
])
def test_bad_queue_configs_name_the_path(kueue: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InputError) as err:
        parse_config({"kueue": kueue}, "q.yaml")
    assert fragment in str(err.value)


def test_every_generated_file_name_stays_in_the_output_directory(tmp_path: Path) -> None:
    """Names are Kubernetes names (no '/', no '..'), so the files land in the directory and nowhere else."""
    config = {**TEAMS, "kueue": {**TEAMS["kueue"], "localQueues": [
        {"name": "a.b", "namespaces": ["x-1", "y"], "clusterQueue": "team-a"}]}}
    files = render(generate(*cluster(), parse_config(config, "test")).objects, "kueue")
    out = tmp_path / "out"
    read_dir(out, "kueue").write(files)
    assert {p.relative_to(out).as_posix() for p in out.rglob("*")} == {*files, KUSTOMIZATION}
    assert all("/" not in name and not name.startswith(".") for name in files)


def test_up_to_64_pools_fit_one_queue_and_65_are_a_clear_error() -> None:
    def pools(count: int) -> tuple[Snapshot, list]:
        snap = Snapshot((Level("block", "topolabel.dev/block"),), {f"n{i}": {"block": "b"} for i in range(count)})
        items = [{"kind": "Node", "metadata": {"name": f"n{i}", "labels": {"nvidia.com/gpu.product": f"gpu-{i:02}"}},
                  "status": {"allocatable": {"nvidia.com/gpu": "8"}}} for i in range(count)]
        return snap, parse_nodes(items, "t")

    cq = next(o for o in generate(*pools(64), Config()).objects if o["kind"] == "ClusterQueue")
    assert len(cq["spec"]["resourceGroups"][0]["flavors"]) == 64 and problems(cq) == []
    with pytest.raises(TopologyError, match="65 node pools.*at most 64"):
        generate(*pools(65), Config())


def test_a_pool_value_under_two_labels_is_refused_only_where_a_queue_names_it() -> None:
    snap, nodes = cluster()
    accel = "cloud.google.com/gke-accelerator"
    items = [{"kind": "Node", "status": {"allocatable": dict(n.allocatable)}, "metadata": {"name": n.name, "labels": {
        **{k: v for k, v in n.labels.items() if k != accel},
        **({"node.kubernetes.io/instance-type": "x"} if i % 2 else {accel: "x"})}}} for i, n in enumerate(nodes)]
    both = parse_nodes(items, "t")
    cfg = {"pools": {"label": accel, "fallbackLabels": ["node.kubernetes.io/instance-type"]}}
    assert len([o for o in generate(snap, both, parse_config(cfg, "t")).objects if o["kind"] == "ResourceFlavor"]) == 2
    named = {**cfg, "kueue": {"clusterQueues": [{"name": "a", "flavors": [{"pool": "x"}]}]}}
    with pytest.raises(TopologyError, match="pool 'x' is a value of two pool labels"):
        generate(snap, both, parse_config(named, "t"))
