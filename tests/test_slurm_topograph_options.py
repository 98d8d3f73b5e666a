"""Slurm export as Topograph users expect it: trimmed top tiers, nodes without topology under `no-topology`, and
topology.yaml with several named topologies chosen by node selectors. Every file is checked against Slurm's
own rules (testkit/slurm_rules.py)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import yaml

from exporters.slurm import SlurmOptions, TopologySpec, export_slurm
from labeler.errors import TopologyError
from labeler.io.nodes import Node
from labeler.topology.model import Discovery, Snapshot
from labeler.topology.placement import level_keys, to_snapshot
from testkit.slurm_rules import check_block_conf, check_topology_yaml, check_tree_conf
from topolabel.cli import main


def snapshot(levels: tuple[str, ...], paths: dict[str, tuple[str, ...]], unplaced: tuple[str, ...] = ()) -> Snapshot:
    found = Discovery("test", levels, dict(paths))
    for node in unplaced:
        found.problem("no topology label", node)
    return to_snapshot(found, level_keys(levels))


def aws_like() -> Snapshot:
    """Topograph's AWS simulation shape: core > spine > tor1/tor2, node13 and node23 without topology."""
    paths = {f"node{r}{i}": ("core", "spine", f"tor{r}") for r in (1, 2) for i in (1, 2)}
    return snapshot(("core", "spine", "tor"), paths, unplaced=("node13", "node23"))


def members(checked) -> set[str]:
    return set().union(*checked.members.values()) if checked.members else set()


# ---------------------------------------------------------------------------------------------------------
# --trim-tiers


def test_trim_tiers_drops_the_coarsest_levels() -> None:
    paths = {f"n{p}{i}": ("fabric", f"pod{p}", f"leaf{p}{i % 2}") for p in (1, 2) for i in range(4)}
    snap = snapshot(("fabric", "pod", "leaf"), paths)
    full = export_slurm(snap).text
    assert "SwitchName=fabric " in full
    trimmed = export_slurm(snap, SlurmOptions(trim_tiers=1)).text
    assert "fabric" not in trimmed and "(levels: pod > leaf)" in trimmed
    assert "SwitchName=root Switches=pod[1-2]" in trimmed  # two top domains now: the root joins them
    apart = export_slurm(snap, SlurmOptions(trim_tiers=1, root=None)).text  # as Topograph writes it: no root
    assert "root" not in apart and check_tree_conf(apart, list(paths)).errors != []  # Slurm warns: nothing spans
    assert check_tree_conf(trimmed, list(paths)).errors == []
    block = export_slurm(snap, SlurmOptions(format="block", trim_tiers=2)).text
    assert check_block_conf(block, list(paths)).errors == [] and "BlockName=leaf10 " in block
    with pytest.raises(TopologyError, match="--trim-tiers 3: the snapshot has 3 level"):
        export_slurm(snap, SlurmOptions(trim_tiers=3))


# ---------------------------------------------------------------------------------------------------------
# --no-topology


def test_nodes_without_topology_stay_out_unless_asked() -> None:
    snap = aws_like()
    placed = list(snap.nodes)
    default = export_slurm(snap).text
    assert "no-topology" not in default and "node13" not in default
    assert check_tree_conf(default, placed).errors == []

    result = export_slurm(snap, SlurmOptions(no_topology=True), nodes=[Node("node31"), *map(Node, placed)])
    assert "SwitchName=no-topology Nodes=node[13,23,31]\n" in result.text
    everyone = placed + ["node13", "node23", "node31"]
    checked = check_tree_conf(result.text, everyone)
    assert checked.errors == [] and checked.members["root"] == set(everyone)
    assert "# 3 node(s) without topology are under the switch no-topology." in result.text


def test_no_topology_is_for_trees() -> None:
    snap = aws_like()
    with pytest.raises(TopologyError, match="--no-topology puts nodes under a switch of topology/tree"):
        export_slurm(snap, SlurmOptions(format="block", no_topology=True))
    text = export_slurm(snap, SlurmOptions(format="yaml", no_topology=True)).text
    entries = {e["topology"]: e for e in yaml.safe_load(text)}
    assert {"switch": "no-topology", "nodes": "node[13,23]"} in entries["tree"]["tree"]["switches"]
    assert "node13" not in json.dumps(entries["block"])
    assert [e for c in check_topology_yaml(text).values() for e in c.errors] == []


# ---------------------------------------------------------------------------------------------------------
# named topologies


def cluster() -> tuple[Snapshot, list[Node]]:
    """Two node pools: h100 nodes under leaves, gb200 nodes in NVLink domains; a CPU pool without topology."""
    paths = {f"h100-{i}": ("spine-a", f"leaf-{i // 4}", f"h100-{i}") for i in range(8)}
    paths.update({f"gb200-{i}": ("spine-b", f"leaf-b{i // 8}", f"nvl-{i // 4}") for i in range(16)})
    snap = snapshot(("spine", "leaf", "nvlink"), paths, unplaced=("cpu-1", "cpu-2"))
    pool = "cloud.example.com/pool"
    nodes = [Node(n, labels={pool: n.split("-")[0]}) for n in [*paths, "cpu-1", "cpu-2"]]
    return snap, nodes


def test_named_topologies_each_cover_the_nodes_their_selector_picks() -> None:
    snap, nodes = cluster()
    pool = "cloud.example.com/pool"
    specs = (TopologySpec("h100", "tree", {pool: "h100"}),
             TopologySpec("gb200", "block", {pool: "gb200"}, block_level="nvlink"),
             TopologySpec("cpu", "tree", {pool: "cpu"}),
             TopologySpec("default", "flat", default=True))
    text = export_slurm(snap, SlurmOptions(format="yaml", topologies=specs, no_topology=True), nodes).text
    checked = check_topology_yaml(text)
    assert [e for c in checked.values() for e in c.errors] == []
    entries = yaml.safe_load(text)
    assert [(e["topology"], e["cluster_default"]) for e in entries] == [
        ("h100", False), ("gb200", False), ("cpu", False), ("default", True)]
    assert members(checked["h100"]) == {f"h100-{i}" for i in range(8)}
    assert members(checked["gb200"]) == {f"gb200-{i}" for i in range(16)}
    assert [b["nodes"] for b in entries[1]["block"]["blocks"]] == [f"gb200-[{4 * k}-{4 * k + 3}]" for k in range(4)]
    assert entries[2]["tree"] == {"switches": [{"switch": "no-topology", "nodes": "cpu-[1-2]"}]}
    assert entries[3] == {"topology": "default", "cluster_default": True, "flat": True}


def test_selectors_can_use_the_snapshots_own_labels_without_a_cluster() -> None:
    snap, _ = cluster()
    specs = (TopologySpec("b", "tree", {"topolabel.dev/spine": "spine-b"}),)
    text = export_slurm(snap, SlurmOptions(format="yaml", topologies=specs)).text
    assert members(check_topology_yaml(text)["b"]) == {f"gb200-{i}" for i in range(16)}
    assert yaml.safe_load(text)[0]["cluster_default"] is True  # the only topology is the default
    with pytest.raises(TopologyError, match="selects no node \\(without --nodes or --kubeconfig"):
        export_slurm(snap, SlurmOptions(format="yaml", topologies=(TopologySpec("x", selector={"pool": "h100"}),)))


@pytest.mark.parametrize("specs, fragment", [
    ((TopologySpec("a"), TopologySpec("a")), "topology 'a' is defined twice"),
    ((TopologySpec("a", default=True), TopologySpec("b", default=True)), "more than one topology has clusterDefault"),
    ((TopologySpec("a b"),), "must be non-empty, without whitespace"),
    ((TopologySpec("a", "torus"),), "plugin 'torus'; choose tree, block, flat"),
    ((TopologySpec("a", "tree", block_level="nvlink"),), "blockLevel and blockSizes are for plugin block"),
])
def test_bad_topology_lists_are_refused(specs, fragment: str) -> None:
    with pytest.raises(TopologyError, match=fragment):
        export_slurm(cluster()[0], SlurmOptions(format="yaml", topologies=specs))


def test_topologies_apply_to_yaml_only_and_say_so() -> None:
    result = export_slurm(cluster()[0], SlurmOptions(topologies=(TopologySpec("a"),)))
    assert any("written only with --format yaml" in p.message for p in result.problems)
    assert result.text.count("SwitchName=root") == 1


# ---------------------------------------------------------------------------------------------------------
# the command line, with the config section


def test_cli_named_topologies_from_the_config(tmp_path: Path) -> None:
    snap, nodes = cluster()
    (tmp_path / "snap.json").write_text(json.dumps(snap.to_dict()))
    (tmp_path / "nodes.json").write_text(json.dumps({"items": [
        {"metadata": {"name": n.name, "labels": dict(n.labels)}} for n in nodes]}))
    (tmp_path / "topolabel.yaml").write_text(yaml.safe_dump({"export": {"slurm": {"topologies": [
        {"name": "gpu-a", "nodeSelector": {"cloud.example.com/pool": "h100"}, "clusterDefault": True},
        {"name": "gpu-b", "plugin": "block", "nodeSelector": {"cloud.example.com/pool": "gb200"},
         "blockLevel": "nvlink", "blockSizes": [4, 8]}]}}}))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(["export", "slurm", "--snapshot", str(tmp_path / "snap.json"), "--nodes",
                     str(tmp_path / "nodes.json"), "--config", str(tmp_path / "topolabel.yaml"), "--format", "yaml",
                     "--trim-tiers", "1"]) == 0
    entries = yaml.safe_load(out.getvalue())
    assert [(e["topology"], e["cluster_default"]) for e in entries] == [("gpu-a", True), ("gpu-b", False)]
    assert entries[1]["block"]["block_sizes"] == [4, 8]
    assert not any(s["switch"].startswith("spine") for s in entries[0]["tree"]["switches"])  # trimmed

    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"export": {"slurm": {"topologies": [{"nam": "x"}]}}}))
    with contextlib.redirect_stderr(err):
        assert main(["export", "slurm", "--snapshot", str(tmp_path / "snap.json"), "--config",
                     str(tmp_path / "bad.yaml")]) == 2
    assert "export.slurm.topologies[0].nam: unknown key; did you mean 'name'?" in err.getvalue().splitlines()[-1]



def test_cli_options_come_from_the_config_and_flags_given_override_them(tmp_path: Path) -> None:
    """`export.slurm` takes every flag's option (camelCase); a flag given wins, one not given leaves the file's."""
    snap, _ = cluster()
    (tmp_path / "snap.json").write_text(json.dumps(snap.to_dict()))
    (tmp_path / "topolabel.yaml").write_text(yaml.safe_dump({"export": {"slurm": {
        "format": "block", "trimTiers": 1, "stripDomain": True}}}))

    def export(*flags: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["export", "slurm", "--snapshot", str(tmp_path / "snap.json"), *flags])
        return code, out.getvalue(), err.getvalue()

    plain, from_file = export()[1], export("--config", str(tmp_path / "topolabel.yaml"))[1]
    assert "SwitchName=" in plain and "BlockName=" not in plain  # the model's default: tree
    assert "BlockName=" in from_file and "SwitchName=" not in from_file
    overridden = export("--config", str(tmp_path / "topolabel.yaml"), "--format", "tree", "--trim-tiers", "0")[1]
    assert overridden == plain

    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"export": {"slurm": {"formt": "yaml", "trimTiers": "x"},
                                                                  "slrum": {}}}))
    code, _, err = export("--config", str(tmp_path / "bad.yaml"))
    assert code == 2
    assert "export.slurm.formt: unknown key; did you mean 'format'?" in err
    assert "export.slurm.trimTiers: must be a whole number" in err
    assert "export.slrum: unknown output format; did you mean 'slurm'?" in err
