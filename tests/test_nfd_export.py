"""`topolabel export nfd`: NodeFeatureGroups and NodeFeatures, checked against the CRDs of NFD v0.18.3's Go
module (deployment/base/nfd-crds, linked by `hack/build-test-stack exporters`), and each group's rule evaluated
over the NodeFeatures as NFD's master evaluates an `In` expression on an attribute feature."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
import yaml

from exporters.domains import domain_forest
from exporters.nfd import FEATURE, NODE_NAME_LABEL, NfdOptions, nfd_objects
from hack.testcluster import stack_path
from labeler.errors import TopologyError
from labeler.topology.model import Discovery
from labeler.topology.placement import level_keys, pad_depths, to_snapshot
from testkit.environment import skip_or_fail
from testkit.crdschema import validate
from topolabel.cli import main

CRDS = "deployment/base/nfd-crds/nfd-api-crds.yaml"


@pytest.fixture(scope="module")
def crd_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """NFD's CRDs, one file per kind (the module ships them in one)."""
    module = stack_path("nfd-module")
    if module is None or not (Path(module) / CRDS).exists():
        skip_or_fail("NFD's module is not linked: run hack/build-test-stack exporters")
    out = tmp_path_factory.mktemp("nfd-crds")
    files = {}
    for crd in yaml.safe_load_all((Path(module) / CRDS).read_text()):
        if crd and crd.get("kind") == "CustomResourceDefinition":
            kind = crd["spec"]["names"]["kind"]
            files[kind] = out / f"{kind}.yaml"
            files[kind].write_text(yaml.safe_dump(crd))
    return files


def fabric():
    """Two spine groups of leaves, 6 nodes a leaf, one leaf short, and a node reporting only two levels."""
    paths = {f"gpu-{i:03d}": ("fabric-a", f"sg{i // 24}", f"leaf-{i // 6:02d}") for i in range(46)}
    paths["gpu-100"] = ("fabric-a", "sg9")
    found = Discovery("infiniband", ("core", "group", "leaf"), paths)
    pad_depths(found, 3)
    return to_snapshot(found, level_keys(found.level_names))


def matches(group: dict, features: list[dict]) -> set[str]:
    """The nodes NFD's master puts in the group's status: those whose features satisfy a rule's every
    matchFeatures term (here `In` on an attribute's element, the only operator the export uses)."""
    nodes = set()
    for feature in features:
        elements = {name: attrs["elements"] for name, attrs in feature["spec"]["features"]["attributes"].items()}
        for rule in group["spec"]["featureGroupRules"]:
            if all(all(e["op"] == "In" and elements.get(term["feature"], {}).get(key) in e["value"]
                       for key, e in term["matchExpressions"].items()) for term in rule["matchFeatures"]):
                nodes.add(feature["metadata"]["labels"][NODE_NAME_LABEL])
    return nodes


def test_a_group_per_domain_per_level_and_a_feature_per_node_pass_nfds_crds(crd_files: dict[str, Path]) -> None:
    snap = fabric()
    objects = nfd_objects(snap)
    groups = [o for o in objects if o["kind"] == "NodeFeatureGroup"]
    features = [o for o in objects if o["kind"] == "NodeFeature"]
    for obj in objects:
        assert validate(obj, crd_files[obj["kind"]]) == [], obj["metadata"]["name"]
    forest = domain_forest(snap, {n: n for n in snap.nodes})
    domains = [d for top in forest for d in top.walk()]
    assert len(groups) == len(domains) == 1 + 3 + 9  # the padded node's domains count once at each level
    assert len(features) == len(snap.nodes) == 47
    # each group selects exactly its domain's nodes
    by_name = {g["metadata"]["name"]: g for g in groups}
    levels = [lv.name for lv in snap.levels]
    for d in domains:
        name = next(n for n, g in by_name.items()
                    if g["spec"]["featureGroupRules"][0]["matchFeatures"][0]["matchExpressions"]
                    == {levels[d.depth]: {"op": "In", "value": [d.value]}})
        assert matches(by_name[name], features) == set(d.nodes)
    assert by_name["topolabel-leaf-leaf-03"]["metadata"]["namespace"] == "node-feature-discovery"
    assert features[0]["spec"]["features"]["attributes"][FEATURE]["elements"] == snap.nodes["gpu-000"]


def test_names_stay_dns_names_and_unique() -> None:
    paths = {"a": ("Fabric_A", "LEAF.1"), "b": ("fabric-a", "leaf-1"), "n" * 250: ("fabric-a", "x" * 60)}
    found = Discovery("inventory", ("fabric", "leaf"), paths)
    snap = to_snapshot(found, level_keys(found.level_names))
    names = [o["metadata"]["name"] for o in nfd_objects(snap)]
    assert len(names) == len(set(names)) and all(len(n) <= 253 and n == n.lower() for n in names)


def test_a_bad_namespace_is_one_error() -> None:
    with pytest.raises(TopologyError, match="nfd: namespace 'NFD' is not a Kubernetes name"):
        nfd_objects(fabric(), NfdOptions(namespace="NFD"))


def test_cli_writes_the_objects(tmp_path: Path) -> None:
    snapshot = tmp_path / "snap.json"
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert main(["discover", "--source", "inventory", "--inventory", str(_inventory(tmp_path)), "-o", "json"]) == 0
    snapshot.write_text(out.getvalue())
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert main(["export", "nfd", "--snapshot", str(snapshot), "--namespace", "nfd"]) == 0
    docs = list(yaml.safe_load_all(out.getvalue()))
    assert {d["kind"] for d in docs} == {"NodeFeatureGroup", "NodeFeature"}
    assert {d["metadata"]["namespace"] for d in docs} == {"nfd"}


def _inventory(tmp_path: Path) -> Path:
    path = tmp_path / "racks.yaml"
    path.write_text("levels: [row, rack]\nhosts:\n" + "".join(
        f"  - {{node: n{i}, row: r{i // 4}, rack: k{i // 2}}}\n" for i in range(8)))
    return path
