"""The pure parts of the aws source: nodes to instances and regions, batches, answers to paths, errors."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

from labeler.errors import TopologyError
from labeler.io.nodes import Node
from labeler.topology.model import Discovery
from labeler.topology.placement import level_keys, to_snapshot
from providers.aws import (MAX_IDS, Placement, RegionAnswer, Target, batches, failure_message, instances_by_region,
                           level_names, locate, parse_provider_id, place, region_of_zone)
from providers.labels import PRESETS


@pytest.mark.parametrize("provider_id, zone, instance", [
    ("aws:///us-east-1a/i-0123456789abcdef0", "us-east-1a", "i-0123456789abcdef0"),
    ("aws:////i-0abc", "", "i-0abc"),
    ("aws://us-west-2b/i-0abc", "us-west-2b", "i-0abc"),
])
def test_provider_ids_of_instances(provider_id: str, zone: str, instance: str) -> None:
    assert parse_provider_id(provider_id) == (zone, instance)


@pytest.mark.parametrize("provider_id", [
    "", "gce://proj/us-central1-a/vm-1", "aws:///us-east-1a/fargate-ip-10-0-0-1", "aws:///us-east-1a/",
    "kind://docker/kind/kind-worker", "aws:///us-east-1a/i-0abc/extra",
])
def test_provider_ids_that_are_not_instances(provider_id: str) -> None:
    with pytest.raises(ValueError, match="is not an EC2 instance"):
        parse_provider_id(provider_id)


@pytest.mark.parametrize("zone, region", [
    ("us-east-1a", "us-east-1"), ("us-west-2-lax-1a", "us-west-2"), ("us-gov-west-1b", "us-gov-west-1"),
    ("ap-southeast-5c", "ap-southeast-5"), ("us-east-1-wl1-bos-wlz-1", "us-east-1"), ("", None), ("nowhere", None),
])
def test_region_of_zone(zone: str, region: str | None) -> None:
    assert region_of_zone(zone) == region


def node(name: str, provider_id: str, **labels: str) -> Node:
    return Node(name=name, provider_id=provider_id, labels=labels)


def test_locate_prefers_the_provider_id_zone_then_labels_then_the_default() -> None:
    found = Discovery("aws", ())
    nodes = [node("zoned", "aws:///eu-west-1a/i-1", **{"topology.kubernetes.io/region": "us-east-1"}),
             node("labelled", "aws:////i-2", **{"topology.kubernetes.io/region": "us-east-2"}),
             node("zone-label", "aws:////i-3", **{"topology.kubernetes.io/zone": "ap-south-1b"}),
             node("bare", "aws:////i-4"),
             node("fargate", "aws:///us-east-1a/fargate-ip-1")]
    targets = locate(nodes, "us-west-1", found)
    assert [(t.node, t.region) for t in targets] == [
        ("zoned", "eu-west-1"), ("labelled", "us-east-2"), ("zone-label", "ap-south-1"), ("bare", "us-west-1")]
    assert [(p.node, "not an EC2 instance" in p.message) for p in found.problems] == [("fargate", True)]


def test_a_node_without_any_region_is_a_problem() -> None:
    found = Discovery("aws", ())
    assert locate([node("bare", "aws:////i-4")], None, found) == []
    assert found.problems[0].node == "bare" and "no region for i-4" in found.problems[0].message


def test_batches_hold_at_most_100_distinct_sorted_ids() -> None:
    targets = [Target(f"n{i}", f"i-{i:04d}", "us-east-1") for i in range(250)]
    targets.append(Target("twin", "i-0007", "us-east-1"))  # two nodes, one instance: asked once
    wanted = instances_by_region(targets)
    assert list(wanted) == ["us-east-1"] and len(wanted["us-east-1"]) == 250
    sizes = [len(b) for b in batches(wanted["us-east-1"])]
    assert sizes == [MAX_IDS, MAX_IDS, 50]
    assert batches([]) == []


def test_level_names_match_the_labels_sources_eks_preset() -> None:
    assert level_names(4) == tuple(level.name for level in PRESETS["eks"].levels)
    assert level_names(3, capacity_block=True) == ("layer-1", "layer-2", "layer-3", "capacity-block")


def placed(targets: list[Target], answers: dict[str, RegionAnswer], capacity_block: bool = False) -> Discovery:
    found = Discovery("aws", ())
    place(found, targets, answers, capacity_block)
    return found


def test_mixed_depths_pad_the_three_layer_nodes_and_say_so() -> None:
    targets = [Target("p5", "i-1", "r"), Target("p6", "i-2", "r")]
    answer = RegionAnswer({"i-1": Placement(("nn-a", "nn-b", "nn-c")),
                           "i-2": Placement(("nn-a", "nn-b", "nn-d", "nn-e"))})
    found = placed(targets, {"r": answer})
    assert found.level_names == ("layer-1", "layer-2", "layer-3", "layer-4")
    assert found.paths == {"p5": ("nn-a", "nn-b", "nn-c", "nn-c"), "p6": ("nn-a", "nn-b", "nn-d", "nn-e")}
    assert [p.node for p in found.problems] == [None]
    assert "fewer than 4 levels" in found.problems[0].message and "p5" in found.problems[0].message


def test_capacity_block_is_the_finest_level_and_missing_ones_are_said() -> None:
    targets = [Target("u1", "i-1", "r"), Target("u2", "i-2", "r"), Target("plain", "i-3", "r")]
    answer = RegionAnswer({"i-1": Placement(("a", "b", "c"), "cr-1"), "i-2": Placement(("a", "b", "c"), "cr-1"),
                           "i-3": Placement(("a", "b", "d"))})
    found = placed(targets, {"r": answer}, capacity_block=True)
    assert found.level_names[-1] == "capacity-block"
    assert found.paths["u1"][-1] == found.paths["u2"][-1] == "cr-1"
    assert found.paths["plain"] == ("a", "b", "d", "d")
    assert any("1 node(s) have no CapacityBlockId" in p.message and "plain" in p.message for p in found.problems)
    snap = to_snapshot(found, level_keys(found.level_names))
    assert snap.nodes["u1"]["capacity-block"] == "cr-1"


def test_every_kind_of_unplaced_instance_is_a_problem_for_its_node() -> None:
    targets = [Target("ok", "i-1", "r", "p5.48xlarge"), Target("omitted", "i-2", "r", "m5.large"),
               Target("empty", "i-3", "r"), Target("gone", "i-4", "r"), Target("far", "i-5", "x")]
    answers = {"r": RegionAnswer({"i-1": Placement(("a", "b", "c")), "i-3": Placement((), None, "p4d.24xlarge")},
                                 not_found={"i-4"}),
               "x": RegionAnswer(unsupported="UnsupportedOperation: not available in this region")}
    found = placed(targets, answers)
    assert list(found.paths) == ["ok"]
    why = {p.node: p.message for p in found.problems}
    assert "i-2 (m5.large) is not in DescribeInstanceTopology's answer" in why["omitted"]
    assert "no network nodes" in why["empty"] and "p4d.24xlarge" in why["empty"]
    assert "does not exist in r" in why["gone"]
    assert "not available in x" in why["far"]


def test_nothing_placed_still_gives_valid_levels() -> None:
    found = placed([Target("a", "i-1", "r")], {"r": RegionAnswer()})
    assert found.level_names == ("layer-1", "layer-2", "layer-3") and not found.paths
    assert to_snapshot(found, level_keys(found.level_names)).problems[0].node == "a"


def client_error(code: str, message: str = "nope") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, "DescribeInstanceTopology")


def test_unauthorized_is_one_error_naming_the_iam_action_and_every_region() -> None:
    text = failure_message({"us-east-1": client_error("UnauthorizedOperation", "You are not authorized"),
                            "us-west-2": client_error("UnauthorizedOperation"),
                            "eu-west-1": client_error("RequestLimitExceeded")})
    assert "ec2:DescribeInstanceTopology" in text
    assert "us-east-1, us-west-2" in text and "You are not authorized" in text


def test_other_failures_are_grouped_by_reason() -> None:
    text = failure_message({"a": NoCredentialsError(), "b": NoCredentialsError(),
                            "c": client_error("RequestLimitExceeded"), "d": client_error("AuthFailure"),
                            "e": EndpointConnectionError(endpoint_url="http://127.0.0.1:1/")})
    assert text.count("no AWS credentials") == 1 and "(a, b)" in text
    assert "still throttled" in text and "AWS_MAX_ATTEMPTS" in text
    assert "rejected the credentials" in text and "cannot reach EC2" in text


def test_a_bug_is_not_dressed_up_as_an_aws_error() -> None:
    with pytest.raises(KeyError):
        failure_message({"a": KeyError("x")})


def test_a_capacity_block_across_network_nodes_is_not_a_tree() -> None:
    targets = [Target("u1", "i-1", "r"), Target("u2", "i-2", "r")]
    answer = RegionAnswer({"i-1": Placement(("a", "b", "c"), "cr-1"), "i-2": Placement(("a", "b", "d"), "cr-1")})
    found = placed(targets, {"r": answer}, capacity_block=True)
    with pytest.raises(TopologyError, match="capacity-block 'cr-1' sits under more than one layer-3"):
        to_snapshot(found, level_keys(found.level_names))
