"""`topolabel export slinky`: the ConfigMap with topology.yaml for Slinky's slurm-operator, full and skeleton.

topology.yaml is checked with Slurm's rules (testkit/slurm_rules.py); the ConfigMap's key against the file names
slurm-operator's Controller webhook knows, and a Controller naming the ConfigMap in `configFileRefs` against
the Controller CRD, both read from slurm-operator's Go module (v1.0.0, the version the module proxy serves;
linked by `hack/build-test-stack exporters`). Skeleton mode: the annotations put back into the skeleton must
give exactly the full topology, and node churn inside existing domains must not change the ConfigMap.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from exporters.slinky import ANNOTATION, CONFIG_KEY, SlinkyOptions, export_slinky
from exporters.slurm import SlurmOptions, TopologySpec
from hack.testcluster import stack_path
from labeler.errors import TopologyError
from labeler.topology.model import Discovery, Snapshot
from labeler.topology.placement import level_keys, pad_depths, to_snapshot
from testkit.environment import skip_or_fail
from testkit.crdschema import validate
from testkit.kmockcluster import MockCluster
from testkit.slurm_rules import check_topology_yaml
from topolabel.cli import main

SIZED = SlurmOptions(format="yaml", block_sizes=(4, 8))
NVL = SlurmOptions(format="yaml", block_level="nvlink", block_sizes=(4,),
                   topologies=(TopologySpec("ib", "tree", default=True),
                               TopologySpec("nvl", "block", block_level="nvlink", block_sizes=(4,))))


@pytest.fixture(scope="module")
def operator_module() -> Path:
    module = stack_path("slurm-operator-module")
    if module is None:
        skip_or_fail("slurm-operator's module is not linked: run hack/build-test-stack exporters")
    return Path(module)


def cluster(drop: set[int] = frozenset(), extra: int = 0) -> Snapshot:
    """Two spines of 4-node racks (NVLink domains) under leaves: spine-i > leaf > nvlink rack."""
    paths = {f"gb-{i:02d}": (f"spine-{i // 16}", f"leaf-{i // 8}", f"rack-{i // 4}")
             for i in range(32 + extra) if i not in drop}
    found = Discovery("combined", ("spine", "leaf", "nvlink"), paths)
    pad_depths(found, 3)
    return to_snapshot(found, level_keys(found.level_names))


def configmap(result) -> dict:
    [cm] = result.objects
    return cm


def membership(checked) -> dict[str, set[str]]:
    return {name: set(nodes) for name, nodes in checked.members.items() if nodes}


def fill(skeleton_text: str, annotations: dict[str, dict[str, str]]) -> str:
    """The skeleton with each node put where its dynamic-topology line says, as Slurm does on registration."""
    entries = yaml.safe_load(skeleton_text)
    placed: dict[tuple[str, str], list[str]] = {}
    for node, values in annotations.items():
        for part in values[ANNOTATION].split(","):
            topology, unit = part.split(":", 1)
            placed.setdefault((topology, unit.split(":")[-1]), []).append(node)
    for entry in entries:
        for switch in entry.get("tree", {}).get("switches", []):
            if "children" not in switch:
                switch["nodes"] = ",".join(sorted(placed.pop((entry["topology"], switch["switch"]), [])))
        for block in entry.get("block", {}).get("blocks", []):
            block["nodes"] = ",".join(sorted(placed.pop((entry["topology"], block["block"]), [])))
    assert not placed, f"units the skeleton does not define: {sorted(placed)[:3]}"
    return yaml.safe_dump(entries, sort_keys=False)


def test_full_mode_passes_slurm_and_the_operator(operator_module: Path) -> None:
    snap = cluster(drop={5})
    result = export_slinky(snap, SlinkyOptions("slurm-topology", "slurm"))
    cm = configmap(result)
    assert cm["metadata"] == {"name": "slurm-topology", "namespace": "slurm",
                              "labels": {"app.kubernetes.io/managed-by": "topolabel"}}
    checked = check_topology_yaml(cm["data"][CONFIG_KEY], snap.nodes)
    assert [e for c in checked.values() for e in c.errors] == []
    assert not result.annotations
    # the operator's webhook knows the file name; a Controller naming the ConfigMap passes its CRD
    webhook = (operator_module / "internal/webhook/controller_webhook.go").read_text()
    assert f'"{CONFIG_KEY}"' in re.search(r"knownConfigFiles := \[\]string\{(.*?)\}", webhook, re.S).group(1)
    controller = {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "Controller",
                  "metadata": {"name": "slurm", "namespace": "slurm"},
                  "spec": {"slurmKeyRef": {"name": "slurm-key", "key": "slurm.key"},
                           "jwtHs256KeyRef": {"name": "jwt-key", "key": "jwt.key"},
                           "configFileRefs": [{"name": cm["metadata"]["name"]}]}}
    crd = operator_module / "config/crd/bases/slinky.slurm.net_controllers.yaml"
    assert validate(controller, crd) == []


@pytest.mark.parametrize("drop", [set(), {5, 30}], ids=["whole", "nodes-down"])
@pytest.mark.parametrize("options", [SIZED, NVL], ids=["tree-and-block", "named"])
def test_skeleton_plus_annotations_is_the_full_topology(options: SlurmOptions, drop: set[int]) -> None:
    snap = cluster(drop=drop)
    skeleton = export_slinky(snap, SlinkyOptions(skeleton=True, slurm=options))
    full = export_slinky(snap, SlinkyOptions(slurm=replace(options, stable=True)))
    text = configmap(skeleton)["data"][CONFIG_KEY]
    assert "nodes:" not in text
    assert set(skeleton.annotations) == set(snap.nodes)
    rebuilt = check_topology_yaml(fill(text, skeleton.annotations), snap.nodes)
    reference = check_topology_yaml(configmap(full)["data"][CONFIG_KEY], snap.nodes)
    assert {k: c.errors for k, c in rebuilt.items()} == {k: c.errors for k, c in reference.items()}
    if not drop:  # with nodes down, Slurm warns of racks below the base size either way
        assert [e for c in rebuilt.values() for e in c.errors] == []
    assert {k: membership(c) for k, c in rebuilt.items()} == {k: membership(c) for k, c in reference.items()}


def test_a_tree_unit_is_the_switch_path_from_the_top(options: SlurmOptions = SIZED) -> None:
    result = export_slinky(cluster(), SlinkyOptions(skeleton=True, slurm=options))
    # the block level is the NVLink one: Slurm's block is an NVLink rack
    assert result.annotations["gb-09"] == {ANNOTATION: "tree:root:spine-spine-0:leaf-leaf-1:nvlink-rack-2,block:rack-2"}


def test_node_churn_inside_domains_leaves_the_skeleton_as_it_is() -> None:
    base = export_slinky(cluster(), SlinkyOptions(skeleton=True, slurm=NVL))
    churned = export_slinky(cluster(drop={1, 2, 17}), SlinkyOptions(skeleton=True, slurm=NVL))
    assert configmap(churned) == configmap(base)
    assert {n: a for n, a in base.annotations.items() if n not in {"gb-01", "gb-02", "gb-17"}} == churned.annotations
    full = export_slinky(cluster(), SlinkyOptions())  # a full topology.yaml changes with every node
    assert configmap(export_slinky(cluster(drop={1}), SlinkyOptions())) != configmap(full)
    grown = export_slinky(cluster(extra=4), SlinkyOptions(skeleton=True, slurm=NVL))  # a new rack is structure
    assert configmap(grown) != configmap(base)


def test_a_skeleton_needs_block_sizes() -> None:
    with pytest.raises(TopologyError, match="block topology block needs its block sizes given"):
        export_slinky(cluster(), SlinkyOptions(skeleton=True))


def test_a_bad_configmap_name_is_one_error() -> None:
    with pytest.raises(TopologyError, match="slinky: ConfigMap name 'Slurm_Topology' is not a Kubernetes name"):
        export_slinky(cluster(), SlinkyOptions("Slurm_Topology", slurm=SIZED))


def test_annotate_nodes_writes_only_what_differs(tmp_path: Path) -> None:
    snap = cluster()
    (tmp_path / "snap.json").write_text(json.dumps(snap.to_dict()))
    argv = ["export", "slinky", "--snapshot", str(tmp_path / "snap.json"), "--skeleton", "--block-sizes", "4,8",
            "--annotate-nodes"]
    with MockCluster(kueue=False, labeler_crd=False) as kube:
        kube.create_nodes({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}} for n in list(snap.nodes)[:30])
        kube.patch_node("gb-00", {"metadata": {"annotations": {ANNOTATION: "stale", "other": "kept"}}})
        config = kube.kubeconfig(tmp_path)
        for expected in (30, 0):
            before = len(kube.seen())
            err = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(err):
                assert main(argv + ["--kubeconfig", str(config)]) == 0
            assert len(kube.writes(before)) == expected, err.getvalue()
            assert f"{expected} node(s) written" in err.getvalue() and "2 not in the cluster" in err.getvalue()
        nodes = {n["metadata"]["name"]: n["metadata"].get("annotations", {}) for n in kube.items("/api/v1/nodes")}
    assert nodes["gb-00"] == {ANNOTATION: "tree:root:spine-spine-0:leaf-leaf-0:nvlink-rack-0,block:rack-0",
                              "other": "kept"}
    assert set(nodes) == {f"gb-{i:02d}" for i in range(30)}  # no node made for the two not in the cluster
    assert yaml.safe_load(out.getvalue())["data"][CONFIG_KEY].count("nodes:") == 0


def test_annotate_nodes_needs_a_cluster_not_a_file(tmp_path: Path) -> None:
    (tmp_path / "snap.json").write_text(json.dumps(cluster().to_dict()))
    (tmp_path / "nodes.json").write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": []}))
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["export", "slinky", "--snapshot", str(tmp_path / "snap.json"), "--skeleton", "--block-sizes",
                     "4", "--annotate-nodes", "--nodes", str(tmp_path / "nodes.json")])
    assert code == 2 and "--annotate-nodes writes to a cluster" in err.getvalue()


def test_the_config_section_gives_the_options_and_flags_override_it(tmp_path: Path) -> None:
    """`export.slinky` holds its own flags and the Slurm ones (camelCase), named topologies included."""
    (tmp_path / "snap.json").write_text(json.dumps(cluster().to_dict()))
    (tmp_path / "topolabel.yaml").write_text(yaml.safe_dump({"export": {"slinky": {
        "configmap": "topo", "namespace": "slurm-a", "skeleton": True, "blockSizes": [4],
        "topologies": [{"name": "nvl", "plugin": "block", "blockLevel": "nvlink", "clusterDefault": True}]}}}))

    def configmap(*flags: str) -> dict:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            assert main(["export", "slinky", "--snapshot", str(tmp_path / "snap.json"), "--config",
                         str(tmp_path / "topolabel.yaml"), *flags]) == 0
        return yaml.safe_load(out.getvalue())

    got = configmap()
    assert (got["metadata"]["name"], got["metadata"]["namespace"]) == ("topo", "slurm-a")
    entries = yaml.safe_load(got["data"][CONFIG_KEY])
    assert [e["topology"] for e in entries] == ["nvl"] and "nodes" not in entries[0]["block"]["blocks"][0]
    assert configmap("--namespace", "slurm-b")["metadata"]["namespace"] == "slurm-b"
