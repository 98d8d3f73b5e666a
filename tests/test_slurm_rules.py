"""The Slurm checker itself: it accepts what Slurm loads cleanly and flags what Slurm refuses or warns about."""

from __future__ import annotations

import pytest

from testkit.slurm_rules import aggregate_blocks, check_block_conf, check_topology_yaml, check_tree_conf

NODES = [f"n{i}" for i in range(1, 9)]
GOOD_TREE = """# a comment
SwitchName=s1 Nodes=n[1-4]
switchname=s2 nodes=n[5-8] LinkSpeed=100
SwitchName=top Switches=s[1-2]   # trailing comment
"""


def test_good_tree() -> None:
    checked = check_tree_conf(GOOD_TREE, NODES)
    assert checked.errors == []
    assert checked.members["top"] == set(NODES) and checked.parents == {"s1": "top", "s2": "top"}


@pytest.mark.parametrize("text, message", [
    ("SwitchName=s1 Nodes=n[1-8] Switches=s2\nSwitchName=s2 Nodes=n9", "both child switches and nodes"),
    ("SwitchName=" + "s" * 65 + " Nodes=n[1-8]", "65 characters"),
    ("SwitchName=s1 Nodes=n[1-8]\nSwitchName=s1 Nodes=n[1-8]", "already been defined"),
    ("SwitchName=top Switches=s[1-3]\nSwitchName=s1 Nodes=n[1-4]\nSwitchName=s2 Nodes=n[5-8]", "invalid child s3"),
    ("SwitchName=s1 Nodes=n[1-4]\nSwitchName=s2 Nodes=n[4-8]\nSwitchName=t Switches=s[1-2]", "n4 is on leaf"),
    ("SwitchName=s1 Nodes=n[1-4]\nSwitchName=s2 Nodes=n[5-8]", "no switch can reach all nodes"),
    ("SwitchName=s1 Nodes=n[1-4]\nSwitchName=t Switches=s1", "lack access to 4 nodes"),
    ("SwitchName=s1 Nodes=n[1-9]", "unknown nodes"),
    ("SwitchName=a Switches=b\nSwitchName=b Switches=a\nSwitchName=c Nodes=n[1-8]", "not a tree"),
    ("Nodes=n[1-8]", "unexpected key"),
    ("SwitchName=s1 Nodes=n[1-8] Color=red", "unexpected key"),
    ("SwitchName=s1 Nodes=n[1-", "unbalanced brackets"),
    ("", "no switches configured"),
])
def test_bad_tree(text: str, message: str) -> None:
    errors = check_tree_conf(text, NODES).errors
    assert any(message in e for e in errors), errors


def test_switches_must_resolve_within_twenty_passes() -> None:
    chain = [f"SwitchName=c{i} Switches=c{i + 1}" for i in range(24)] + ["SwitchName=c24 Nodes=n[1-8]"]
    assert any("not a tree" in e for e in check_tree_conf("\n".join(chain), NODES).errors)
    assert check_tree_conf("\n".join(reversed(chain)), NODES).errors == []  # children first: one pass


GOOD_BLOCKS = """BlockName=b1 Nodes=n[1-2]
BlockName=b2 Nodes=n[3-4]
BlockName=b3 Nodes=n[5-6]
BlockName=b4 Nodes=n[7-8]
BlockSizes=2,4,8
"""


def test_good_blocks_and_their_aggregates() -> None:
    checked = check_block_conf(GOOD_BLOCKS, NODES)
    assert checked.errors == [] and checked.sizes == [2, 4, 8]
    assert checked.aggregates == [["b1", "b2"], ["b3", "b4"], ["b1", "b2", "b3", "b4"]]


@pytest.mark.parametrize("sizes, message", [
    ("2,6", "not 2 times a power of two"),
    ("2,3", "not 2 times a power of two"),
    ("4,2", "not 4 times a power of two"),
    ("3,6", "smaller than the base block size 3"),
    ("2,8,4", "must rise"),
    ("2,0", "invalid BlockSizes value 0"),
    (f"1,{2 ** 16}", "more than 1 * 2^15"),
    ("2,x", "invalid BlockSizes value 'x'"),
])
def test_bad_block_sizes(sizes: str, message: str) -> None:
    text = GOOD_BLOCKS.replace("BlockSizes=2,4,8", f"BlockSizes={sizes}")
    errors = check_block_conf(text, NODES).errors
    assert any(message in e for e in errors), errors


@pytest.mark.parametrize("text, message", [
    (GOOD_BLOCKS.replace("b2 Nodes=n[3-4]", "b1 Nodes=n[3-4]"), "already been defined"),
    (GOOD_BLOCKS.replace("n[3-4]", "n[2-4]"), "n2 is in blocks b1 and b2"),
    (GOOD_BLOCKS.replace("BlockName=b4 Nodes=n[7-8]\n", ""), "lack access to 2 nodes"),
    (GOOD_BLOCKS + "BlockSizes=2\n", "more than once"),
    (GOOD_BLOCKS.replace("BlockName=b1", "BlockName=b[1]"), "breaks the hostlist"),
])
def test_bad_blocks(text: str, message: str) -> None:
    errors = check_block_conf(text, NODES).errors
    assert any(message in e for e in errors), errors


def test_aggregation_follows_slurm() -> None:
    names = [f"b{i}" for i in range(6)]
    # without BlockSizes Slurm aggregates 2, 4, 8 and 16 blocks, stopping at the first level holding them all;
    # a trailing run no longer than the level below (b4, b5 at level 4) is not aggregated again
    assert aggregate_blocks(names, [], 1) == [["b0", "b1"], ["b2", "b3"], ["b4", "b5"],
                                              ["b0", "b1", "b2", "b3"], names]
    assert aggregate_blocks(names[:5], [1, 2, 4], 1) == [["b0", "b1"], ["b2", "b3"], ["b0", "b1", "b2", "b3"]]


GOOD_YAML = """---
- topology: topo1
  cluster_default: true
  tree:
    switches:
      - switch: sw_root
        children: s[1-2]
      - switch: s1
        nodes: n[1-4]
      - switch: s2
        nodes: n[5-8]
- topology: topo2
  cluster_default: false
  block:
    block_sizes: [4, 8]
    blocks:
      - block: b1
        nodes: n[1-4]
      - block: b2
        nodes: n[5-8]
- topology: topo3
  flat: true
"""


def test_good_yaml() -> None:
    checked = check_topology_yaml(GOOD_YAML, NODES)
    assert set(checked) == {"", "topo1", "topo2", "topo3"}
    assert all(c.errors == [] for c in checked.values())


@pytest.mark.parametrize("old, new, message", [
    ("- topology: topo3\n  flat: true", "- flat: true\n  topology: topo3", "must be the first attribute"),
    ("  flat: true", "  flat: true\n  tree: {switches: [{switch: x, nodes: n1}]}", "exactly one of"),
    ("topology: topo3", "topology: topo1", "defined twice"),
    ("cluster_default: true", "cluster_default: yes please", "expected a boolean"),
    ("block_sizes: [4, 8]", "block_sizes: [4, 12]", "not 4 times a power of two"),
    ("children: s[1-2]", "children: s[1-3]", "invalid child s3"),
    ("        nodes: n[5-8]\n- topology: topo2", "        nodes: n[5-8]\n        speed: 1\n- topology: topo2",
     "unknown field 'speed'"),
])
def test_bad_yaml(old: str, new: str, message: str) -> None:
    assert old in GOOD_YAML
    checked = check_topology_yaml(GOOD_YAML.replace(old, new, 1), NODES)
    errors = [e for c in checked.values() for e in c.errors]
    assert any(message in e for e in errors), errors
