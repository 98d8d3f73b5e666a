"""`topolabel export`: Slurm files pass Slurm's rules and keep the fabric's grouping; Volcano and KAI objects
pass their CRDs (CEL included). Snapshots: an InfiniBand-like fat tree, an AWS-like 3-layer cloud cluster
(with a node whose type reports only 2 layers) and the bundled labels example."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import yaml

from exporters.domains import domain_forest
from exporters.kai import kai_topology
from exporters.slurm import NameRule, SlurmOptions, block_sizes_problem, export_slurm
from exporters.volcano import hypernodes
from labeler.errors import TopologyError
from labeler.settings.config import KueueConfig
from labeler.topology.model import Discovery, Level, Snapshot
from labeler.topology.placement import level_keys, pad_depths, snapshot_from_dict, to_snapshot
from testkit.environment import EXAMPLES, SHARED
from testkit.crdschema import validate
from testkit.slurm_rules import check_block_conf, check_topology_yaml, check_tree_conf
from topolabel.cli import main

HYPERNODE_CRD = SHARED / "scheduler-crds" / "topology.volcano.sh_hypernodes.yaml"
KAI_CRD = SHARED / "scheduler-crds" / "kai.scheduler_topologies.yaml"


def _snapshot(source: str, levels: tuple[str, ...], paths: dict[str, tuple[str, ...]]) -> Snapshot:
    found = Discovery(source, levels, dict(paths))
    pad_depths(found, len(levels))
    return to_snapshot(found, level_keys(levels))


def ib_snapshot() -> Snapshot:
    """One fabric: 4 spine groups of 4 leaf switches, 8 nodes a leaf; a few nodes down (gaps, a short leaf)."""
    down = {7, 100, 101, 102, 103, 104}
    paths = {}
    for i in range(1, 129):
        if i not in down:
            leaf = (i - 1) // 8 + 1
            paths[f"gpu{i:03d}"] = ("fabric-a", f"sg{(leaf - 1) // 4 + 1}", f"leaf{leaf:02d}")
    return _snapshot("infiniband", ("core", "group", "leaf"), paths)


def aws_snapshot() -> Snapshot:
    """Two nn1 domains, uneven nn2/nn3 below; one node type reports only two layers (padded by placement)."""
    layout = {"nn-0a1b2c3d4e5f60001": {"nn-1a00000000000000a": ["nn-2a0000000000000a1", "nn-2a0000000000000a2"],
                                        "nn-1a00000000000000b": ["nn-2a0000000000000b1"]},
              "nn-0a1b2c3d4e5f60002": {"nn-1a00000000000000c": ["nn-2a0000000000000c1", "nn-2a0000000000000c2",
                                                                 "nn-2a0000000000000c3"]}}
    paths, k = {}, 0
    for nn1, below in layout.items():
        for nn2, nn3s in below.items():
            for nn3 in nn3s:
                for _ in range(4):
                    k += 1
                    paths[f"ip-10-1-{k // 10}-{k % 10 + 10}.ec2.internal"] = (nn1, nn2, nn3)
    paths["ip-10-1-9-99.ec2.internal"] = ("nn-0a1b2c3d4e5f60001", "nn-1a00000000000000a")  # a 2-layer type
    return _snapshot("aws", ("nn1", "nn2", "nn3"), paths)


@pytest.fixture(scope="module")
def labels_snapshot() -> Snapshot:
    """What `topolabel discover --config examples/topolabel.yaml --nodes examples/nodes.yaml -o json` prints."""
    out = _cli(["discover", "--config", str(EXAMPLES / "topolabel.yaml"), "--nodes", str(EXAMPLES / "nodes.yaml"),
                "-o", "json"])
    return snapshot_from_dict(json.loads(out))


def _cli(argv: list[str]) -> str:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(argv) == 0
    return buffer.getvalue()


def _snapshots(labels: Snapshot) -> dict[str, tuple[Snapshot, NameRule]]:
    return {"ib": (ib_snapshot(), NameRule()), "aws": (aws_snapshot(), NameRule(strip_domain=True)),
            "labels": (labels, NameRule())}


def _domain_sets(snap: Snapshot, rule: NameRule) -> list[set[str]]:
    forest = domain_forest(snap, {n: rule.apply(n) for n in snap.nodes})
    return [set(d.nodes) for top in forest for d in top.walk()]


# ---------------------------------------------------------------------------------------------------------
# Slurm


@pytest.mark.parametrize("case", ["ib", "aws", "labels"])
def test_tree_passes_slurm_and_keeps_every_group(case: str, labels_snapshot: Snapshot) -> None:
    snap, rule = _snapshots(labels_snapshot)[case]
    names = [rule.apply(n) for n in snap.nodes]
    result = export_slurm(snap, SlurmOptions(format="tree", names=rule))
    checked = check_tree_conf(result.text, names)
    assert checked.errors == [] and result.problems == []
    switch_sets = {frozenset(m) for m in checked.members.values()}
    groups = {frozenset(s) for s in _domain_sets(snap, rule)}
    assert switch_sets - groups <= {frozenset(names)}  # every switch is a domain (or the root)
    assert {g for g in groups if len(g) > 1} <= switch_sets  # every domain of 2+ nodes is a switch
    lines = result.text.splitlines()
    assert all(("Switches=" in line) != ("Nodes=" in line) for line in lines if line.startswith("SwitchName="))
    if case == "labels":  # one-node hosts add no switch: 8 subblocks, 4 blocks, the root
        assert len(checked.members) == 13


def test_tree_shapes() -> None:
    ib = export_slurm(ib_snapshot()).text
    assert "SwitchName=leaf01 Nodes=gpu[001-006,008]\n" in ib
    assert "SwitchName=leaf13 Nodes=gpu[097-099]\n" in ib  # the short leaf
    assert "SwitchName=sg1 Switches=leaf[01-04]\n" in ib
    assert "SwitchName=fabric-a Switches=sg[1-4]\n" in ib and "root" not in ib  # one fabric: its own root
    lines = [line for line in ib.splitlines() if line.startswith("SwitchName=")]
    assert lines.index("SwitchName=sg1 Switches=leaf[01-04]") > lines.index("SwitchName=leaf01 Nodes=gpu[001-006,008]")
    aws = export_slurm(aws_snapshot(), SlurmOptions(names=NameRule(strip_domain=True))).text
    # the padded node repeats nn2's value at nn3, so both switches are named with their level
    assert "SwitchName=nn3-nn-1a00000000000000a Nodes=ip-10-1-9-99\n" in aws
    assert "SwitchName=nn2-nn-1a00000000000000a Switches=nn-2a0000000000000a[1-2],nn3-nn-1a00000000000000a\n" in aws
    # a domain with one child domain is one group of nodes: the two merge under the coarser name
    assert "SwitchName=nn-1a00000000000000b Nodes=ip-10-1-0-19,ip-10-1-1-[10-12]\n" in aws
    assert "SwitchName=nn-0a1b2c3d4e5f60002 Switches=nn-2a0000000000000c[1-3]\n" in aws
    assert "SwitchName=root Switches=nn-0a1b2c3d4e5f[60001-60002]\n" in aws


def test_separate_fabrics_without_a_root_switch() -> None:
    snap = aws_snapshot()
    names = [n.split(".")[0] for n in snap.nodes]
    text = export_slurm(snap, SlurmOptions(names=NameRule(strip_domain=True), root=None)).text
    assert "root" not in text
    assert check_tree_conf(text, names).errors == ["no switch can reach all nodes through its descendants"]
    with pytest.raises(TopologyError, match="root switch name"):
        export_slurm(snap, SlurmOptions(names=NameRule(strip_domain=True), root="a b"))


@pytest.mark.parametrize("case, level, count", [("ib", "group", 4), ("aws", "nn1", 2), ("labels", "block", 4)])
def test_block_passes_slurm_default_level(case: str, level: str, count: int, labels_snapshot: Snapshot) -> None:
    snap, rule = _snapshots(labels_snapshot)[case]
    names = [rule.apply(n) for n in snap.nodes]
    result = export_slurm(snap, SlurmOptions(format="block", names=rule))
    checked = check_block_conf(result.text, names)
    assert checked.errors == []
    assert f"# Blocks are {level} domains" in result.text and len(checked.members) == count
    depth = [lv.name for lv in snap.levels].index(level)
    forest = domain_forest(snap, {n: rule.apply(n) for n in snap.nodes})
    expected = sorted(sorted(d.nodes) for top in forest for d in top.walk() if d.depth == depth)
    assert sorted(sorted(m) for m in checked.members.values()) == expected
    assert checked.sizes[0] == min(len(m) for m in checked.members.values())


def test_nvlink_domain_is_the_default_block() -> None:
    """GB200 NVL72 racks under IB leaves: the NVLink domain (18 trays) is the unit Slurm keeps a job in."""
    paths = {f"gb{r:02d}-t{t:02d}": ("spine-a", f"leaf-{r // 2}", f"nvl-{r}") for r in range(4) for t in range(18)}
    snap = _snapshot("combined", ("block", "leafgroup", "nvlink"), paths)
    result = export_slurm(snap, SlurmOptions(format="block"))
    checked = check_block_conf(result.text, list(snap.nodes))
    assert checked.errors == [] and "# Blocks are nvlink domains" in result.text
    assert sorted(len(m) for m in checked.members.values()) == [18, 18, 18, 18]
    assert checked.sizes[0] == 18


def test_consecutive_blocks_form_the_coarser_domains() -> None:
    snap = ib_snapshot()
    result = export_slurm(snap, SlurmOptions(format="block", block_level="leaf"))
    checked = check_block_conf(result.text, [n for n in snap.nodes])
    assert checked.errors == [] and checked.sizes == [3, 6, 12, 24, 48]
    group_of = {f"leaf{i:02d}": f"sg{(i - 1) // 4 + 1}" for i in range(1, 17)}
    for aggregate in checked.aggregates:
        groups = {group_of[b] for b in aggregate}
        assert len(groups) == 1 or len(aggregate) == 4 * len(groups), aggregate  # inside one group, or whole ones
    assert [p.message for p in result.problems if "aggregates" in p.message] == []
    assert any("blocks hold 3 to 8 nodes" in p.message for p in result.problems)


def test_aggregates_cutting_a_domain_are_reported() -> None:
    result = export_slurm(aws_snapshot(), SlurmOptions(format="block", block_level="nn3",
                                                        names=NameRule(strip_domain=True)))
    notes = [p.message for p in result.problems]
    assert any(m.startswith("BlockSizes 2: ") and "take part of a nn2 domain" in m for m in notes), notes
    assert check_block_conf(result.text, [n.split(".")[0] for n in aws_snapshot().nodes]).errors == []


def test_block_sizes_given() -> None:
    snap = ib_snapshot()
    text = export_slurm(snap, SlurmOptions(format="block", block_level="leaf", block_sizes=(2, 8))).text
    assert "BlockSizes=2,8\n" in text and check_block_conf(text, list(snap.nodes)).errors == []
    for sizes, message in (((4, 8), "larger than the smallest block"), ((2, 6), "not the base 2 times"),
                           ((2, 2), "must rise"), ((2, 2 ** 17), r"at most the base times 2\^15")):
        with pytest.raises(TopologyError, match=message):
            export_slurm(snap, SlurmOptions(format="block", block_level="leaf", block_sizes=sizes))
    assert block_sizes_problem([3, 6, 24], 3) is None


@pytest.mark.parametrize("case", ["ib", "aws", "labels"])
@pytest.mark.parametrize("default", ["tree", "block"])
def test_topology_yaml_passes_slurm(case: str, default: str, labels_snapshot: Snapshot) -> None:
    snap, rule = _snapshots(labels_snapshot)[case]
    text = export_slurm(snap, SlurmOptions(format="yaml", names=rule, yaml_default=default)).text
    checked = check_topology_yaml(text, [rule.apply(n) for n in snap.nodes])
    assert set(checked) == {"", "tree", "block"}
    assert [e for c in checked.values() for e in c.errors] == []
    entries = yaml.safe_load(text)
    assert [list(e)[:2] for e in entries] == [["topology", "cluster_default"]] * 2
    assert [e["cluster_default"] for e in entries] == [default == "tree", default == "block"]


def test_slurm_names() -> None:
    snap = aws_snapshot()
    rule = NameRule.parse(r"^ip-(\d+)-(\d+)-(\d+)-(\d+)\.ec2\.internal$=gpu-\3-\4")
    text = export_slurm(snap, SlurmOptions(names=rule)).text
    assert "Nodes=gpu-0-[11-14]" in text and "ip-" not in text
    with pytest.raises(TopologyError, match="both become Slurm node 'x'"):
        export_slurm(snap, SlurmOptions(names=NameRule.parse(".*=x")))
    with pytest.raises(TopologyError, match="bad regular expression"):
        NameRule.parse("(=x")
    with pytest.raises(TopologyError, match="expected REGEX=REPLACEMENT"):
        NameRule.parse("no-separator")
    result = export_slurm(snap, SlurmOptions(names=NameRule.parse(r"^ip-10-1-9-99\..*$=bad name")))
    assert [(p.node, "is left out" in p.message) for p in result.problems] == [("ip-10-1-9-99.ec2.internal", True)]
    kept = [n for n in snap.nodes if not n.startswith("ip-10-1-9-99")]
    assert check_tree_conf(result.text, kept).errors == []


def test_long_names_stay_within_slurm_limits() -> None:
    value = "x" * 63
    snap = _snapshot("inventory", ("row", "rack"), {f"n{i}": (value, value if i < 2 else f"r{i}") for i in range(4)})
    text = export_slurm(snap).text
    checked = check_tree_conf(text, [f"n{i}" for i in range(4)])
    assert checked.errors == [] and all(len(name) <= 64 for name in checked.members)


def test_bad_snapshots_are_refused() -> None:
    snap = Snapshot((Level("a", "x/a"), Level("b", "x/b")), {"n1": {"a": "p", "b": "q"}, "n2": {"a": "r", "b": "q"}})
    with pytest.raises(TopologyError, match="not a tree"):
        export_slurm(snap)
    with pytest.raises(TopologyError, match="--block-level 'rack' is not a level"):
        export_slurm(ib_snapshot(), SlurmOptions(block_level="rack"))
    two = _snapshot("inventory", ("row", "rack"), {"n1": ("root", "r1"), "n2": ("root", "r2"), "n3": ("row2", "r3")})
    with pytest.raises(TopologyError, match="root would be defined twice"):
        export_slurm(two)
    assert check_tree_conf(export_slurm(two, SlurmOptions(root="top")).text, ["n1", "n2", "n3"]).errors == []
    with pytest.raises(TopologyError, match="no node"):
        export_slurm(Snapshot((Level("a", "x/a"),)))


# ---------------------------------------------------------------------------------------------------------
# Volcano and KAI


@pytest.mark.parametrize("case", ["ib", "aws", "labels"])
def test_hypernodes_pass_the_crd_and_mirror_the_tree(case: str, labels_snapshot: Snapshot) -> None:
    snap, _ = _snapshots(labels_snapshot)[case]
    objects = hypernodes(snap)
    for obj in objects:
        assert validate(obj, HYPERNODE_CRD) == [], obj["metadata"]["name"]
    by_name = {o["metadata"]["name"]: o for o in objects}
    assert len(by_name) == len(objects) == sum(1 for _ in _domain_sets(snap, NameRule()))
    levels = [lv.name for lv in snap.levels]
    tier1 = [o for o in objects if o["spec"]["tier"] == 1]
    placed = [m["selector"]["exactMatch"]["name"] for o in tier1 for m in o["spec"]["members"]]
    assert sorted(placed) == sorted(snap.nodes)  # every node in exactly one tier-1 HyperNode
    parents: dict[str, str] = {}
    for obj in objects:
        spec = obj["spec"]
        assert spec["tierName"] == levels[len(levels) - spec["tier"]]
        for member in spec["members"]:
            assert member["type"] == ("Node" if spec["tier"] == 1 else "HyperNode")
            if member["type"] == "HyperNode":
                child = by_name[member["selector"]["exactMatch"]["name"]]
                assert child["spec"]["tier"] == spec["tier"] - 1
                assert parents.setdefault(child["metadata"]["name"], obj["metadata"]["name"]) == obj["metadata"]["name"]
    assert len(parents) == sum(1 for o in objects if o["spec"]["tier"] < len(levels))


def test_hypernode_names_are_dns_labels_and_unique() -> None:
    value = "Rack_A"
    snap = _snapshot("inventory", ("row", "rack"), {"n1": ("Row-1", value), "n2": ("Row-1", "rack-a"),
                                                    "n3": ("Row-1", "y" * 60)})
    objects = hypernodes(snap)
    names = sorted(o["metadata"]["name"] for o in objects)
    assert len(set(names)) == 4 and all(len(n) <= 63 for n in names)
    assert "row-row-1" in names and not any(n == "rack-rack-a" for n in names)  # the two racks clash: hashed
    assert all(validate(o, HYPERNODE_CRD) == [] for o in objects)


@pytest.mark.parametrize("case", ["ib", "aws", "labels"])
def test_kai_topology_passes_the_crd(case: str, labels_snapshot: Snapshot) -> None:
    snap, _ = _snapshots(labels_snapshot)[case]
    obj = kai_topology(snap, KueueConfig(topologyName="fabric"))
    assert validate(obj, KAI_CRD) == []
    assert [lv["nodeLabel"] for lv in obj["spec"]["levels"]] == [lv.label for lv in snap.levels] + [
        "kubernetes.io/hostname"]
    assert obj["metadata"]["name"].startswith("fabric-")
    without = kai_topology(snap, KueueConfig(hostnameLevel=False))
    assert validate(without, KAI_CRD) == [] and len(without["spec"]["levels"]) == len(snap.levels)
    # levels are immutable: a different set of levels is a different object, never an edit
    assert validate(without, KAI_CRD, old=obj) != [] and without["metadata"]["name"] != obj["metadata"]["name"]


# ---------------------------------------------------------------------------------------------------------
# The command line


@pytest.fixture
def snapshot_file(tmp_path: Path, labels_snapshot: Snapshot) -> Path:
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(labels_snapshot.to_dict()))
    return path


def test_cli_slurm(snapshot_file: Path, labels_snapshot: Snapshot) -> None:
    text = _cli(["export", "slurm", "--snapshot", str(snapshot_file), "--format", "block", "--block-level", "subblock"])
    assert check_block_conf(text, list(labels_snapshot.nodes)).errors == []
    assert "BlockSizes=8,16,32,64\n" in text
    text = _cli(["export", "slurm", "--snapshot", str(snapshot_file), "--slurm-name", "^gke-=", "--no-root-switch"])
    assert "Nodes=a3-b00-s00-n[000-007]" in text and "root" not in text


def test_cli_errors_are_one_line(snapshot_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "slurm", "--snapshot", str(snapshot_file), "--block-level", "rack"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("topolabel export slurm: error: --block-level 'rack'") and err.count("\n") == 1
    with pytest.raises(SystemExit):
        main(["export", "slurm", "--snapshot", str(snapshot_file), "--block-sizes", "8,x"])


def test_cli_objects(snapshot_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stream = _cli(["export", "volcano", "--snapshot", str(snapshot_file)])
    docs = [d for d in yaml.safe_load_all(stream) if d]
    assert len(docs) == 76 and all(validate(d, HYPERNODE_CRD) == [] for d in docs)
    out = tmp_path / "kai"
    config = EXAMPLES / "topolabel.yaml"
    for _ in range(2):  # a second run finds the same files
        assert main(["export", "kai", "--snapshot", str(snapshot_file), "--config", str(config),
                     "--output-dir", str(out)]) == 0
    files = sorted(p.name for p in out.iterdir())
    assert len(files) == 2 and files[0].startswith("kai-topology-gke-") and files[1] == "kustomization.yaml"
    assert validate(yaml.safe_load((out / files[0]).read_text()), KAI_CRD) == []
    assert capsys.readouterr().err.splitlines()[-1] == f"{out}: 1 object(s), unchanged (2 files)"
