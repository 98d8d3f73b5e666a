"""The operator's pure parts: last good topology, write overlay, Kueue change planning, conditions,
settings, and the manifests (CRD schema in step with the config, least-privilege RBAC, hardened Deployment)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporters.registry import option_models as export_models
from labeler.cluster.apply import ApplyResult
from labeler.errors import InputError, TopologyError
from labeler.io.nodes import MANAGED_ANNOTATION, Node
from labeler.settings.config import Config, parse_config
from labeler.topology.model import Discovery, Problem
from labeler.topology.names import camel
from labeler.topology.plan import NodeChange, Plan
from providers import inventory, labels
from providers.base import Options, Source
from providers.registry import get_source, option_models
from testkit.environment import ROOT
from topolabel.cli import parser
from topolabel.operator.backoff import Backoff
from topolabel.operator.kueue import Usage, covers, needs_usage, plan_changes
from topolabel.operator.labelling import PENDING_SECONDS, Labeller
from topolabel.operator.leader import LEASE_NAME
from topolabel.operator.settings import RunOptions, resolve
from topolabel.operator.status import EVENT_NAMESPACE, MAX_PROBLEMS, Conditions, status_body
from topolabel.operator.topology import Topology, carry_over
from topolabel.pipeline import place

MANIFESTS = ROOT / "manifests"
CFG = Config()


def discovery(paths: dict[str, tuple[str, ...]], levels: tuple[str, ...] = ("row", "rack")) -> Discovery:
    return Discovery("inventory", levels, dict(paths))


# --- the last good topology ---

def test_carry_over_keeps_the_last_placement_of_cluster_nodes_the_source_left_out() -> None:
    last = discovery({"a": ("r1", "k1"), "b": ("r1", "k2"), "gone": ("r2", "k3")})
    found = discovery({"a": ("r1", "k1")})
    carried = carry_over(last, found, cluster={"a", "b"})
    assert carried.paths == {"a": ("r1", "k1"), "b": ("r1", "k2")}  # 'gone' left the cluster: not kept
    assert any("keep their last good placement" in p.message for p in carried.problems)
    assert carry_over(last, discovery({"a": ("r1",)}, ("row",)), {"a", "b"}).paths == {"a": ("r1",)}


def test_a_candidate_whose_kept_placements_break_the_tree_uses_the_new_answer_alone() -> None:
    topo = Topology()
    topo.adopt(discovery({"a": ("r1", "k1"), "b": ("r1", "k1")}), place(CFG, discovery({"a": ("r1", "k1")})))
    found = discovery({"a": ("r2", "k1")})  # rack k1 moved to row r2; b is not in this answer
    chosen, snapshot = topo.candidate(CFG, found, {"a": Node("a"), "b": Node("b")})
    assert chosen is found and set(snapshot.nodes) == {"a"}


def test_joining_nodes_get_the_values_a_full_discovery_would_give() -> None:
    # two raw rack names that collide as label values, arriving together: both are hashed
    full = discovery({"a": ("r1", "rack/1"), "b": ("r1", "rack 1")})
    topo = Topology()
    first = discovery({"a": ("r1", "rack/1")})
    topo.adopt(first, place(CFG, first))
    assert topo.join(CFG, discovery({"b": ("r1", "rack 1")}), ["b"], [node("a"), node("b")])
    assert topo.snapshot.nodes == place(CFG, full).nodes


def test_a_joining_domain_whose_name_collides_gets_the_hash_and_the_labelled_one_keeps_its_value() -> None:
    topo = Topology()
    first = discovery({"a": ("r1", "rack/1")})
    topo.adopt(first, place(CFG, first))
    written = place(CFG, first).labels_for("a")
    assert written["topolabel.dev/rack"] == "rack-1"
    labelled = node("a", written, ",".join(sorted(written)))
    assert topo.join(CFG, discovery({"b": ("r1", "rack 1")}), ["b"], [labelled, node("b")])
    assert topo.snapshot.nodes["a"]["rack"] == "rack-1"
    assert topo.snapshot.nodes["b"]["rack"].startswith("rack-1-")


def test_a_join_that_cannot_merge_or_breaks_the_tree_changes_nothing() -> None:
    topo = Topology()
    assert not topo.join(CFG, discovery({"x": ("r1", "k1")}), ["x"], [])  # no last good discovery
    last = discovery({"a": ("r1", "k1")})
    topo.adopt(last, place(CFG, last))
    assert not topo.join(CFG, discovery({"x": ("r1",)}, ("row",)), ["x"], [])  # other levels: a full pass is due
    with pytest.raises(TopologyError):
        topo.join(CFG, discovery({"x": ("r2", "k1")}), ["x"], [])  # k1 under two rows
    assert topo.found is last and set(topo.snapshot.nodes) == {"a"}


# --- the write overlay ---

def node(name: str, labels: dict[str, str] | None = None, managed: str | None = None) -> Node:
    return Node(name, labels or {}, {MANAGED_ANNOTATION: managed} if managed is not None else {})


def test_a_written_change_counts_as_done_until_the_watch_shows_it_or_it_expires() -> None:
    now = [0.0]
    lab = Labeller(clock=lambda: now[0])
    change = NodeChange("n1", {"topolabel.dev/rack": "k1"}, [], ["topolabel.dev/rack"])
    lab.record(Plan([change], 0, [], 1), ApplyResult(written=["n1"]))
    stale = node("n1")  # an event sent before the patch landed
    assert lab.effective(stale).labels == {"topolabel.dev/rack": "k1"}
    assert lab.effective(node("n1", {"topolabel.dev/rack": "k1"}, "topolabel.dev/rack")).name == "n1"
    assert "n1" not in lab.pending  # the watch showed it
    lab.record(Plan([change], 0, [], 1), ApplyResult(written=["n1"]))
    now[0] += PENDING_SECONDS + 1
    assert lab.effective(stale) is stale  # expired: the watched state is trusted again

    # an event that shows the patch ends the overlay, so a later hand edit is seen (and put back)
    lab.record(Plan([change], 0, [], 1), ApplyResult(written=["n1"]))
    lab.observe(node("n1", {"topolabel.dev/rack": "k1"}, "topolabel.dev/rack"))
    edited = node("n1", {}, "topolabel.dev/rack")
    assert lab.effective(edited) is edited


def test_node_states_and_a_plan_for_a_few_nodes() -> None:
    snap = place(CFG, discovery({"a": ("r1", "k1"), "b": ("r1", "k2"), "c": ("r1", "k2")}))
    lab = Labeller()
    nodes = [node("a", snap.labels_for("a"), ",".join(sorted(snap.labels_for("a")))), node("b"), node("c"), node("u")]
    plan = lab.plan_for(snap, nodes, total=4)
    assert [c.node for c in plan.changes] == ["b", "c"] and plan.unchanged == 1
    lab.record(plan, ApplyResult(written=["b"], failed={"c": "500 Internal Server Error"}))
    assert lab.states(snap, nodes) == {"labelled": 2, "failed": 1, "unplaced": 1}
    assert lab.states(None, nodes) == {"unplaced": 4}


# --- Kueue changes ---

MANAGED = {"app.kubernetes.io/managed-by": "topolabel"}


def obj(kind: str, name: str, spec: dict[str, Any], namespace: str | None = None, managed: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(MANAGED) if managed else {}}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind, "metadata": meta, "spec": spec}


def cq(*flavors: str) -> dict[str, Any]:
    return obj("ClusterQueue", "gpu", {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
        {"name": f, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"}]} for f in flavors]}]})


def rf(name: str, topology: str) -> dict[str, Any]:
    return obj("ResourceFlavor", name, {"nodeLabels": {"pool": "h100"}, "topologyName": topology})


def topo(name: str) -> dict[str, Any]:
    return obj("Topology", name, {"levels": [{"nodeLabel": "topolabel.dev/rack"}]})


def names(objs: list[dict[str, Any]]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


def test_covers_ignores_server_defaults_but_not_missing_or_different_values() -> None:
    want = cq("f1")
    have = yaml.safe_load(yaml.safe_dump(want))
    have["spec"]["queueingStrategy"] = "BestEffortFIFO"
    have["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = "0"
    have["status"] = {"admittedWorkloads": 1}
    assert covers(have, want)
    assert not covers(have, cq("f1", "f2"))
    assert not covers(have, cq("f2"))


def test_covers_reads_quotas_as_quantities() -> None:
    """Kueue's webhook stores a created ClusterQueue's quota in canonical form (test_kueue_e2e.py shows it):
    the same amount written otherwise is no change, a different amount is."""
    want = cq("f1")
    quota = want["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    quota["nominalQuota"] = "4000"
    have = yaml.safe_load(yaml.safe_dump(want))
    stored = have["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    stored["nominalQuota"] = "4k"
    assert covers(have, want)
    stored["nominalQuota"] = "4001"
    assert not covers(have, want)
    stored["nominalQuota"] = "not a quantity"
    assert not covers(have, want)
    assert not covers({"name": "4k"}, {"name": "4000"})  # only quotas are read as quantities


def test_a_level_change_creates_new_objects_moves_references_and_deletes_the_unused() -> None:
    existing = [topo("t-old"), rf("h100-old", "t-old"), cq("h100-old"),
                obj("LocalQueue", "gpu", {"clusterQueue": "gpu"}, "ml")]
    desired = [topo("t-new"), rf("h100-new", "t-new"), cq("h100-new"), obj("LocalQueue", "gpu", {"clusterQueue": "gpu"}, "ml")]
    assert needs_usage(desired, existing)
    changes = plan_changes(desired, existing, Usage())
    assert names(changes.apply) == ["t-new", "h100-new", "gpu"]  # the LocalQueue is already right
    assert names(changes.delete) == ["h100-old", "t-old"]  # users before what they use
    assert changes.conflicts == changes.kept == []


def test_superseded_objects_in_use_are_kept_with_the_reason() -> None:
    existing = [topo("t-old"), rf("h100-old", "t-old"), rf("b200-old", "t-old"), cq("h100-old", "b200-old")]
    desired = [topo("t-new"), rf("h100-new", "t-new"), cq("h100-new")]
    usage = Usage.from_workloads([
        {"metadata": {"namespace": "ml"}, "spec": {"queueName": "gpu"},
         "status": {"admission": {"clusterQueue": "gpu", "podSetAssignments": [{"flavors": {"gpu": "h100-old"}}]}}},
        {"metadata": {"namespace": "ml"}, "spec": {"queueName": "gpu"},  # finished: holds nothing
         "status": {"admission": {"clusterQueue": "gpu", "podSetAssignments": [{"flavors": {"gpu": "b200-old"}}]},
                    "conditions": [{"type": "Finished", "status": "True"}]}}])
    changes = plan_changes(desired, existing, usage)
    assert names(changes.delete) == ["b200-old"]
    assert changes.kept == ["superseded ResourceFlavor h100-old is kept: admitted workloads hold quota in it",
                            "superseded Topology t-old is kept: ResourceFlavor h100-old refers to it"]
    unknown = plan_changes(desired, existing, Usage(unknown="403 Forbidden"))
    assert unknown.delete == [] and all("could not be read" in k for k in unknown.kept)


def test_what_topolabel_did_not_make_or_cannot_change_is_reported_not_written() -> None:
    desired = [topo("t1"), rf("f1", "t1"), cq("f1"), obj("LocalQueue", "gpu", {"clusterQueue": "gpu"}, "ml")]
    edited = rf("f1", "t1")
    edited["spec"]["nodeLabels"] = {"pool": "edited"}
    existing = [topo("t1"), edited, obj("ClusterQueue", "gpu", {}, managed=False),
                obj("LocalQueue", "gpu", {"clusterQueue": "other"}, "ml")]
    changes = plan_changes(desired, existing, Usage(local_queues={("ml", "gpu")}))
    assert changes.apply == changes.replace == changes.delete == []
    assert [c.split(" ")[:2] for c in changes.conflicts] == [["ResourceFlavor", "f1"], ["ClusterQueue", "gpu"],
                                                             ["LocalQueue", "ml/gpu"]]
    assert names(plan_changes(desired, existing, Usage()).replace) == ["gpu"]  # no workload queued: replaced


# --- conditions and status ---

def test_conditions_report_transitions_once() -> None:
    conds = Conditions()
    assert conds.set("SourceAvailable", True, "Discovered", "ok") is None  # the first True is no news
    failed = conds.set("SourceAvailable", False, "SourceFailed", "boom")
    assert failed is not None and failed.status == "False"
    assert conds.set("SourceAvailable", False, "SourceFailed", "boom again") is None
    assert conds.items["SourceAvailable"].message == "boom again"
    assert conds.set("SourceAvailable", True, "Discovered", "ok").status == "True"
    ready = conds.to_list()[-1]
    assert ready["type"] == "Ready" and ready["status"] == "False"  # ConfigValid, LabelsInSync ... not true yet
    assert (ready["reason"], ready["message"]) == ("Pending", "ConfigValid not reported yet")


def test_ready_carries_the_reason_and_message_of_the_first_condition_not_true() -> None:
    conds = Conditions()
    conds.set("ConfigValid", True, "Valid", "flags")
    conds.set("SourceAvailable", True, "Discovered", "ok")
    conds.set("LabelsInSync", False, "WriteFailed", "2 node(s) could not be labelled")
    conds.set("KueueInSync", False, "ApplyFailed", "namespaces ml not found")
    ready = conds.to_list()[-1]
    assert (ready["status"], ready["reason"]) == ("False", "WriteFailed")
    assert ready["message"] == "LabelsInSync: 2 node(s) could not be labelled"
    conds.set("LabelsInSync", True, "Synced", "4 node(s)")
    conds.set("KueueInSync", True, "Applied", "5 object(s)")
    assert conds.to_list()[-1]["reason"] == "InSync"


def test_the_status_bounds_its_problem_list() -> None:
    problems = [Problem("labels", f"problem {i}", f"n{i}") for i in range(MAX_PROBLEMS + 7)]
    body = status_body(Conditions(), {"labelled": 3, "unplaced": 1}, None, problems, "labels", 4)
    assert len(body["problems"]) == MAX_PROBLEMS and body["problemCount"] == MAX_PROBLEMS + 7
    assert body["nodes"] == {"total": 4, "labelled": 3, "pending": 0, "unplaced": 1, "failed": 0}


# --- settings ---

def test_which_sources_answer_per_node() -> None:
    assert labels.SOURCE.per_node and inventory.SOURCE.per_node
    assert not get_source("infiniband").per_node and not get_source("lldp").per_node  # a fabric sweep
    assert Source("x", Options, lambda parser: None, labels.discover).per_node


def test_settings_come_from_the_resource_spec_or_the_file_and_flags_override(tmp_path: Path) -> None:
    file = tmp_path / "topolabel.yaml"
    file.write_text("source: {type: labels, preset: gke}\n")
    opts = RunOptions(config_path=str(file), flags={"preset": "eks"})
    assert resolve(opts, None).options == {"preset": "eks"}
    from_spec = resolve(opts, {"source": {"type": "inventory", "inventory": "x.csv"}, "keyPrefix": "example.com/"})
    assert (from_spec.source.name, from_spec.cfg.key_prefix, from_spec.source.per_node) == ("inventory", "example.com/", True)
    with pytest.raises(InputError, match="TopologyLabeler default"):
        resolve(opts, {"plan": {"maxChangeFraction": 2}})


def test_run_rejects_a_nodes_file_and_a_bad_address(capsys: pytest.CaptureFixture[str]) -> None:
    from topolabel.cli import main
    from topolabel.commands.run import _address

    assert main(["run", "--nodes", "nodes.yaml"]) == 2
    assert "--nodes is a file" in capsys.readouterr().err
    assert _address(":9090") == ("0.0.0.0", 9090)
    with pytest.raises(argparse.ArgumentTypeError):
        _address("localhost")


# --- manifests ---

def documents() -> list[dict[str, Any]]:
    return [d for f in sorted(MANIFESTS.glob("*.yaml")) if f.name != "kustomization.yaml"
            for d in yaml.safe_load_all(f.read_text()) if d]


def schema_keys(schema: dict[str, Any]) -> dict[str, Any]:
    """Property names, nested, of an OpenAPI object schema (arrays: their items)."""
    if schema.get("type") == "array":
        return schema_keys(schema["items"])
    return {k: schema_keys(v) for k, v in (schema.get("properties") or {}).items()}


def model_keys(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """The same for a pydantic JSON schema (by alias), following $refs and Optional unions."""
    if "$ref" in schema:
        return model_keys(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    for option in schema.get("anyOf") or []:
        if option.get("type") != "null":
            return model_keys(option, defs)
    if schema.get("type") == "array":
        return model_keys(schema["items"], defs)
    return {k: model_keys(v, defs) for k, v in (schema.get("properties") or {}).items()}


def test_the_crd_spec_schema_has_every_config_key() -> None:
    crd = next(d for d in documents() if d["kind"] == "CustomResourceDefinition")
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    model = Config.model_json_schema(by_alias=True)
    options = {camel(key): {} for declared in option_models().values() for key in declared.model_fields}
    exports = {}
    for name, declared in export_models().items():
        schema = declared.model_json_schema(by_alias=True)
        exports[name] = {camel(k): v for k, v in model_keys(schema, schema.get("$defs", {})).items()}
    assert schema_keys(spec) == {**model_keys(model, model["$defs"]), "source": {"type": {}, **options},
                                 "export": exports}
    assert exports["slurm"]["topologies"]["nodeSelector"] == {}  # a format's nested options are typed too
    example = yaml.safe_load((ROOT / "examples" / "topologylabeler.yaml").read_text())
    parse_config(example["spec"], "examples/topologylabeler.yaml")


def test_rbac_grants_exactly_what_the_operator_uses() -> None:
    role = next(d for d in documents() if d["kind"] == "ClusterRole")
    grants = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
              for v in rule["verbs"]}
    kueue = {("kueue.x-k8s.io", r, v) for r in ("topologies", "resourceflavors", "cohorts", "clusterqueues", "localqueues")
             for v in ("list", "create", "patch", "delete")}
    assert grants == {*(("", "nodes", v) for v in ("get", "list", "watch", "patch")),
                      ("", "nodes/status", "patch"),  # fabric health's FabricHealthy condition
                      ("", "namespaces", "get"),
                      *(("topolabel.dev", "topologylabelers", v) for v in ("get", "list", "watch")),
                      ("topolabel.dev", "topologylabelers/status", "patch"), *kueue,
                      ("kueue.x-k8s.io", "workloads", "list")}


def named(kind: str, name: str) -> dict[str, Any]:
    return next(d for d in documents() if d["kind"] == kind and d["metadata"]["name"] == name)


def assert_bound_to_the_operator(role: dict[str, Any]) -> None:
    deploy = next(d for d in documents() if d["kind"] == "Deployment")
    binding = named("RoleBinding", role["metadata"]["name"])
    assert binding["metadata"]["namespace"] == role["metadata"]["namespace"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    account = deploy["spec"]["template"]["spec"]["serviceAccountName"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account,
                                    "namespace": deploy["metadata"]["namespace"]}]


def test_leader_election_may_touch_its_own_lease_and_nothing_else() -> None:
    role = named("Role", "topolabel-leader-election")
    deploy = next(d for d in documents() if d["kind"] == "Deployment")
    assert role["metadata"]["namespace"] == deploy["metadata"]["namespace"]
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [LEASE_NAME],
         "verbs": ["get", "update"]}]
    assert_bound_to_the_operator(role)


def test_events_may_be_created_in_default_and_nowhere_else() -> None:
    """The only namespace the API server takes Events about a cluster-scoped object in (EVENT_NAMESPACE)."""
    role = named("Role", "topolabel-events")
    assert role["metadata"]["namespace"] == EVENT_NAMESPACE == "default"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]
    assert_bound_to_the_operator(role)


def test_the_deployment_is_two_hardened_replicas_with_leader_election_and_probes() -> None:
    deploy = next(d for d in documents() if d["kind"] == "Deployment")
    spec = deploy["spec"]
    assert spec["replicas"] == 2 and spec["strategy"]["rollingUpdate"] == {"maxUnavailable": 1, "maxSurge": 0}
    args = parser().parse_args(spec["template"]["spec"]["containers"][0]["args"])
    assert args.leader_elect and args.request_timeout == 20
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(f.name for f in MANIFESTS.glob("*.yaml")
                                                        if f.name != "kustomization.yaml")


# --- retries ---

def test_backoff_doubles_from_one_second_to_five_minutes_with_jitter_and_resets() -> None:
    still = Backoff(rng=lambda: 0.0)
    assert [still.next() for _ in range(11)] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]
    stretched = Backoff(rng=lambda: 1.0)
    assert [round(stretched.next(), 6) for _ in range(4)] == [1.1, 2.2, 4.4, 8.8]
    still.reset()
    assert still.next() == 1
