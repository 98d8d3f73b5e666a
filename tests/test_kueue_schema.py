"""Every generated Kueue object passes the v1beta2 CRD schema from Kueue v0.19.2, CEL rules included,
and a regeneration never asks the API server for an edit its immutability rules refuse."""

from __future__ import annotations

import pytest

from hack.synth import gke_cluster
from kueue_config.objects import generate
from labeler.io.nodes import parse_nodes
from labeler.settings.config import parse_config
from labeler.topology.model import Snapshot
from labeler.topology.placement import level_keys, to_snapshot
from providers.base import SourceContext
from providers.labels import discover
from testkit.environment import SHARED, kueue_crd, kueue_crds
from testkit.crdschema import validate

CRD_OF = {"Topology": "topologies", "ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues",
          "LocalQueue": "localqueues"}
CONFIGS = [
    {},
    {"pools": {"label": "cloud.google.com/gke-accelerator"}, "kueue": {
        "topologyName": "gke", "cohort": "research", "localQueues": [{"name": "gpu", "namespaces": ["a", "b"]}]}},
    {"kueue": {"hostnameLevel": False}, "pools": {"resources": ["nvidia.com/gpu", "pods", "ephemeral-storage"]}},
]


def crd(kind: str) -> str:
    return str(kueue_crd(CRD_OF[kind]))


@pytest.fixture(scope="module")
def cluster():
    items, _ = gke_cluster(blocks=3, subblocks=2, hosts=3)
    nodes = parse_nodes(items, "test")
    found = discover(SourceContext(nodes=nodes, options={"preset": "gke"}))
    return to_snapshot(found, level_keys(found.level_names)), nodes


@pytest.mark.parametrize("config", CONFIGS)
def test_generated_objects_pass_the_crds(cluster, config) -> None:
    snap, nodes = cluster
    objects = generate(snap, nodes, parse_config(config, "test")).objects
    assert {o["kind"] for o in objects} >= {"Topology", "ResourceFlavor", "ClusterQueue"}
    for obj in objects:
        assert validate(obj, crd(obj["kind"])) == [], obj["metadata"]["name"]


def test_the_validator_does_reject_what_the_server_rejects(cluster) -> None:
    """Guards the test above: the same objects, broken as users break them by hand, fail."""
    snap, nodes = cluster
    objects = generate(snap, nodes, parse_config({}, "test")).objects
    topo = next(o for o in objects if o["kind"] == "Topology")
    levels = topo["spec"]["levels"]
    levels.insert(0, levels.pop())  # kubernetes.io/hostname first instead of last
    assert any("lowest level" in e for e in validate(topo, crd("Topology")))
    levels.append(dict(levels[1]))
    assert any("must be unique" in e for e in validate(topo, crd("Topology")))
    flavor = next(o for o in objects if o["kind"] == "ResourceFlavor")
    flavor["spec"]["nodeLabels"] = {}
    assert validate(flavor, crd("ResourceFlavor"))


def test_regeneration_is_never_an_immutable_edit(cluster) -> None:
    """Objects that keep their name across a change of levels, pools or taints pass the transition rules."""
    snap, nodes = cluster
    cfg = parse_config({}, "test")
    before = {(o["kind"], o["metadata"]["name"]): o for o in generate(snap, nodes, cfg).objects}
    fewer = Snapshot(snap.levels[:2], {n: {k: v[k] for k in ("block", "subblock")} for n, v in snap.nodes.items()})
    tainted = parse_nodes([{**n, "spec": {**n["spec"], "taints": [{"key": "nvidia.com/gpu", "effect": "NoExecute"}]}}
                           for n in gke_cluster(blocks=3, subblocks=2, hosts=3)[0]], "t")
    for snap2, nodes2 in ((fewer, nodes), (snap, tainted), (snap, nodes[:5])):
        after = generate(snap2, nodes2, cfg).objects
        kept = [(o, before[(o["kind"], o["metadata"]["name"])]) for o in after
                if (o["kind"], o["metadata"]["name"]) in before]
        assert any(o["kind"] == "ClusterQueue" for o, _ in kept)
        for new, old in kept:
            assert validate(new, crd(new["kind"]), old=old) == [], new["metadata"]["name"]
    renamed = next(o for o in generate(fewer, nodes, cfg).objects if o["kind"] == "ResourceFlavor")
    old_flavor = next(o for o in before.values() if o["kind"] == "ResourceFlavor"
                      and o["spec"]["nodeLabels"] == renamed["spec"]["nodeLabels"])
    assert renamed["metadata"]["name"] != old_flavor["metadata"]["name"]
    # the same change made in place is what the server refuses:
    in_place = {**renamed, "metadata": old_flavor["metadata"]}
    assert any("immutable" in e or "topologyName" in e for e in validate(in_place, crd("ResourceFlavor"), old=old_flavor))


def test_the_reference_copies_in_shared_are_kueues_release() -> None:
    """../shared/kueue-crds, which people read, holds the same v0.19.2 files as Kueue's module, which tests read."""
    copies = sorted((SHARED / "kueue-crds").glob("*.yaml"))
    assert copies
    for copy in copies:
        assert copy.read_bytes() == (kueue_crds() / copy.name).read_bytes(), copy.name
