"""testkit/crdschema.py rejects what the API server would reject (schema and CEL) and accepts the rest."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from kueue_config.objects import generate
from labeler.io.nodes import load_nodes_file
from labeler.settings.config import load_config
from testkit.environment import EXAMPLES, SHARED, kueue_crd
from testkit.crdschema import validate
from topolabel.pipeline import discover, source_options

TOPOLOGY, FLAVOR, CLUSTER_QUEUE, LOCAL_QUEUE = "topologies", "resourceflavors", "clusterqueues", "localqueues"
HYPERNODE = SHARED / "scheduler-crds" / "topology.volcano.sh_hypernodes.yaml"
KAI = SHARED / "scheduler-crds" / "kai.scheduler_topologies.yaml"
V1B2 = "kueue.x-k8s.io/v1beta2"


def kueue_validate(obj: dict, plural: str, old: dict | None = None) -> list[str]:
    """`validate` against Kueue's CRD for `plural`, from its Go module."""
    return validate(obj, kueue_crd(plural), old=old)


def _topology(*labels: str) -> dict:
    return {"apiVersion": V1B2, "kind": "Topology", "metadata": {"name": "gke"},
            "spec": {"levels": [{"nodeLabel": k} for k in labels]}}


def _flavor(**spec: object) -> dict:
    return {"apiVersion": V1B2, "kind": "ResourceFlavor", "metadata": {"name": "h100"},
            "spec": {"nodeLabels": {"pool": "h100"}, **spec}}


def _queue(**spec: object) -> dict:
    group = {"coveredResources": ["nvidia.com/gpu"],
             "flavors": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}
    return {"apiVersion": V1B2, "kind": "ClusterQueue", "metadata": {"name": "gpu"},
            "spec": {"namespaceSelector": {}, "resourceGroups": [group], **spec}}


def _has(errors: list[str], *parts: str) -> bool:
    return any(all(p in e for p in parts) for e in errors)


@pytest.fixture(scope="module")
def generated_kueue_objects() -> list[dict]:
    cfg = load_config(str(EXAMPLES / "topolabel.yaml"))
    nodes = load_nodes_file(str(EXAMPLES / "nodes.yaml"))
    source, options = source_options(cfg, {})
    return generate(discover(cfg, source, options, nodes), nodes, cfg).objects


def test_generated_kueue_objects_pass(generated_kueue_objects: list[dict]) -> None:
    crds = {"Topology": TOPOLOGY, "ResourceFlavor": FLAVOR, "ClusterQueue": CLUSTER_QUEUE,
            "LocalQueue": LOCAL_QUEUE}
    kinds = set()
    for obj in generated_kueue_objects:
        assert kueue_validate(obj, crds[obj["kind"]]) == [], obj["metadata"]["name"]
        kinds.add(obj["kind"])
    assert kinds == set(crds)


def test_topology_rules() -> None:
    assert kueue_validate(_topology("example.com/block", "kubernetes.io/hostname"), TOPOLOGY) == []
    assert _has(kueue_validate(_topology("example.com/block", "example.com/block"), TOPOLOGY), "spec.levels", "must be unique")
    errors = kueue_validate(_topology("kubernetes.io/hostname", "example.com/block"), TOPOLOGY)
    assert _has(errors, "spec.levels", "can only be used at the lowest level")
    assert _has(kueue_validate(_topology(), TOPOLOGY), "spec.levels", "non-empty")
    assert _has(kueue_validate(_topology("Bad Key!"), TOPOLOGY), "spec.levels[0].nodeLabel", "does not match")
    assert _has(kueue_validate(_topology(*[f"example.com/l{i}" for i in range(17)]), TOPOLOGY), "spec.levels", "is too long")


def test_transition_rules_need_an_old_object() -> None:
    new, old = _topology("example.com/rack"), _topology("example.com/block")
    assert kueue_validate(new, TOPOLOGY) == []
    assert _has(kueue_validate(new, TOPOLOGY, old=old), "spec.levels", "field is immutable")
    assert kueue_validate(new, TOPOLOGY, old=copy.deepcopy(new)) == []
    flavor = _flavor(topologyName="gke")
    moved = _flavor(topologyName="gke", nodeLabels={"pool": "b200"})
    assert kueue_validate(moved, FLAVOR) == []
    assert _has(kueue_validate(moved, FLAVOR, old=flavor), "nodeLabels are immutable when topologyName is set")
    assert _has(kueue_validate(_flavor(topologyName="other"), FLAVOR, old=flavor), "topologyName is immutable")
    queue = {"apiVersion": V1B2, "kind": "LocalQueue", "metadata": {"name": "gpu", "namespace": "ml"},
             "spec": {"clusterQueue": "gpu"}}
    assert kueue_validate(queue, LOCAL_QUEUE) == []
    assert _has(kueue_validate({**queue, "spec": {"clusterQueue": "other"}}, LOCAL_QUEUE, old=queue),
                "spec.clusterQueue", "field is immutable")


def test_resource_flavor_tolerations() -> None:
    exists = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    assert kueue_validate(_flavor(tolerations=[exists]), FLAVOR) == []
    errors = kueue_validate(_flavor(tolerations=[{**exists, "value": "present"}]), FLAVOR)
    assert _has(errors, "spec.tolerations", "a value must be empty when 'operator' is 'Exists'")
    assert _has(kueue_validate(_flavor(tolerations=[{**exists, "effect": "Sometimes"}]), FLAVOR), "supported taint effect")
    assert _has(kueue_validate(_flavor(tolerations=[{"operator": "Equal", "value": "x"}]), FLAVOR),
                "operator must be Exists when 'key' is empty")
    assert _has(kueue_validate(_flavor(topologyName="gke", nodeLabels={}), FLAVOR), "at least one nodeLabel")


def test_cluster_queue_rules_and_defaults() -> None:
    assert kueue_validate(_queue(), CLUSTER_QUEUE) == []
    limited = _queue()
    limited["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = 4
    assert _has(kueue_validate(limited, CLUSTER_QUEUE), "spec:", "borrowingLimit must be nil when cohort is empty")
    assert kueue_validate({**limited, "spec": {**limited["spec"], "cohortName": "all"}}, CLUSTER_QUEUE) == []
    # whenCanPreempt defaults to TryNextFlavor: the rule holds only because the default was applied first
    fungible = {"preference": "PreemptionOverBorrowing", "whenCanBorrow": "TryNextFlavor"}
    assert kueue_validate(_queue(flavorFungibility=fungible), CLUSTER_QUEUE) == []
    errors = kueue_validate(_queue(flavorFungibility={"preference": "PreemptionOverBorrowing"}), CLUSTER_QUEUE)
    assert _has(errors, "spec.flavorFungibility", "preference can only be set")
    uneven = _queue()
    uneven["spec"]["resourceGroups"][0]["coveredResources"].append("cpu")
    assert _has(kueue_validate(uneven, CLUSTER_QUEUE), "flavors must have the same number of resources")


def test_int_or_string_and_unknown_fields() -> None:
    for quota in (8, "8", "1.5Ki", "500m"):
        queue = _queue()
        queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = quota
        assert kueue_validate(queue, CLUSTER_QUEUE) == [], quota
    queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "eight"
    assert _has(kueue_validate(queue, CLUSTER_QUEUE), "nominalQuota", "does not match")
    assert _has(kueue_validate({**_queue(), "spec": {**_queue()["spec"], "cohort": "x"}}, CLUSTER_QUEUE),
                "Additional properties", "cohort")
    assert _has(kueue_validate(_queue(queueingStrategy="Random"), CLUSTER_QUEUE), "queueingStrategy", "is not one of")


def test_type_meta_and_metadata() -> None:
    topo = _topology("example.com/block")
    assert _has(kueue_validate({**topo, "apiVersion": "kueue.x-k8s.io/v9"}, TOPOLOGY), "not served")
    assert kueue_validate({**topo, "apiVersion": "kueue.x-k8s.io/v1beta1"}, TOPOLOGY) == []
    assert _has(kueue_validate({**topo, "kind": "Topo"}, TOPOLOGY), "kind")
    assert _has(kueue_validate({**topo, "metadata": {"name": "GKE_1"}}, TOPOLOGY), "metadata.name", "DNS-1123")
    assert _has(kueue_validate({**topo, "metadata": {"name": "gke", "namespace": "x"}}, TOPOLOGY), "cluster-scoped")
    assert _has(kueue_validate({**topo, "metadata": {"name": "gke", "labels": {"a": "b c"}}}, TOPOLOGY), "label value")
    assert _has(kueue_validate({**topo, "metadata": {}}, TOPOLOGY), "metadata.name: required")


def _hypernode(selector: dict, tier: int = 1) -> dict:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "leaf-a"},
            "spec": {"tier": tier, "members": [{"type": "Node", "selector": selector}]}}


def test_volcano_selector_rules() -> None:
    exact = {"exactMatch": {"name": "gpu-001"}}
    assert validate(_hypernode(exact), HYPERNODE) == []
    assert _has(validate(_hypernode({}), HYPERNODE), "selector", "Either ExactMatch or RegexMatch")
    both = {**exact, "regexMatch": {"pattern": "gpu-.*"}}
    assert _has(validate(_hypernode(both), HYPERNODE), "spec.members[0].selector", "Only one of")
    assert _has(validate(_hypernode(exact, tier=-1), HYPERNODE), "spec.tier")
    assert _has(validate(_hypernode({"exactMatch": {"name": "GPU_1"}}), HYPERNODE), "exactMatch.name")
    typed = _hypernode(exact)
    typed["spec"]["tier"] = "one"
    assert _has(validate(typed, HYPERNODE), "CEL rules not evaluated")


def test_kai_topology_rules() -> None:
    kai = {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": "fabric"},
           "spec": {"levels": [{"nodeLabel": "example.com/block"}, {"nodeLabel": "kubernetes.io/hostname"}]}}
    assert validate(kai, KAI) == []
    twice = copy.deepcopy(kai)
    twice["spec"]["levels"][1] = {"nodeLabel": "example.com/block"}
    assert _has(validate(twice, KAI), "must be unique")


def _crd(tmp_path: Path, spec_schema: dict, scope: str = "Cluster") -> Path:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": scope,
                    "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                                         "metadata": {"type": "object"}, "spec": spec_schema}}}}]}}
    path = tmp_path / "crd.yaml"
    path.write_text(yaml.safe_dump(crd))
    return path


def _widget(spec: dict) -> dict:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec}


def _rule(rule: str, **extra: object) -> dict:
    return {"rule": rule, "message": "rule failed", **extra}


def test_kubernetes_cel_library_functions(tmp_path: Path) -> None:
    rules = [_rule("self.sizes.isSorted()"), _rule("self.sizes.sum() == 14"), _rule("self.sizes.max() == 8"),
             _rule("self.sizes.min() == 2"), _rule("self.sizes.indexOf(4) == 1"),
             _rule("self.name.lowerAscii().split('-') == ['gpu', 'a']"), _rule("self.name.indexOf('-') == 3"),
             _rule("self.name.substring(0, 3).upperAscii() == 'GPU'"), _rule("self.name.matches('^[A-Za-z-]+$')"),
             _rule("['a', 'b'].join('/') == 'a/b'"), _rule("self.name.find('[A-Z]') == 'A'"),
             _rule("self.name.replace('-', '') == 'gpuA'"), _rule("self.name.charAt(0) == 'g'"),
             _rule("self.sizes.all(s, s % 2 == 0) && self.sizes.exists(s, s == 8)"),
             _rule("self.created > timestamp('2020-01-01T00:00:00Z')")]
    path = _crd(tmp_path, {"type": "object", "x-kubernetes-validations": rules, "properties": {
        "name": {"type": "string"}, "created": {"type": "string", "format": "date-time"},
        "sizes": {"type": "array", "items": {"type": "integer"}}}})
    assert validate(_widget({"name": "gpu-A", "sizes": [2, 4, 8], "created": "2024-05-01T10:00:00Z"}), path) == []
    errors = validate(_widget({"name": "gpu-A", "sizes": [8, 2, 4], "created": "2024-05-01T10:00:00Z"}), path)
    assert _has(errors, "self.sizes.isSorted()") and _has(errors, "self.sizes.indexOf(4) == 1")
    assert _has(validate(_widget({"name": "x", "sizes": [], "created": "yesterday"}), path), "created", "date-time")


def test_rules_that_cannot_run_are_errors_not_passes(tmp_path: Path) -> None:
    path = _crd(tmp_path, {"type": "object", "properties": {"name": {"type": "string"}},
                           "x-kubernetes-validations": [_rule("self.name == 'a'"), _rule("self.?name.orValue('') == 'a'"),
                                                        _rule("self.name"), _rule("self.name == oldSelf.name",
                                                                                  optionalOldSelf=True)]})
    errors = validate(_widget({}), path)
    assert _has(errors, "failed to evaluate", "no such member")
    assert _has(errors, "could not be compiled")
    assert _has(errors, "optionalOldSelf")
    assert _has(validate(_widget({"name": "a"}), path), "returned StringType, not a bool")


def test_list_types_nullable_and_message_expression(tmp_path: Path) -> None:
    path = _crd(tmp_path, {"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                  "items": {"type": "object", "properties": {"name": {"type": "string"},
                                                             "port": {"type": "integer", "format": "int32"}},
                            "x-kubernetes-validations": [
                                _rule("self.port > 1024", messageExpression="'port ' + string(self.port) + ' is low'"),
                                _rule("self.port == oldSelf.port")]}},
        "note": {"type": "string", "nullable": True, "enum": ["a"]},
        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}})
    ok = _widget({"tags": ["a", "b"], "ports": [{"name": "http", "port": 8080}], "note": None, "extra": {"any": 1}})
    assert validate(ok, path) == []
    assert _has(validate(_widget({"tags": ["a", "a"]}), path), "spec.tags", "Duplicate value")
    dupes = _widget({"ports": [{"name": "http", "port": 8080}, {"name": "http", "port": 8081}]})
    assert _has(validate(dupes, path), "spec.ports[1]", "Duplicate value")
    assert _has(validate(_widget({"ports": [{"name": "ssh", "port": 22}]}), path), "spec.ports[0]", "port 22 is low")
    assert _has(validate(_widget({"ports": [{"name": "x", "port": 2**31}]}), path), "is not a 'int32'")
    # transition rules follow list-type map items by key, so a reordered list is still the same item
    old = _widget({"ports": [{"name": "a", "port": 2000}, {"name": "http", "port": 8080}]})
    assert validate(_widget({"ports": [{"name": "http", "port": 8080}, {"name": "a", "port": 2000}]}), path, old) == []
    changed = validate(_widget({"ports": [{"name": "http", "port": 9090}]}), path, old)
    assert _has(changed, "spec.ports[0]", "rule failed")
