"""Topology from EC2 `DescribeInstanceTopology`: each instance's network node set, coarsest first.

A node maps to an instance through `spec.providerID` (`aws:///<zone>/i-...` or `aws:////i-...`) and to a
region through that zone, its `topology.kubernetes.io/region` label, or `--region`. Each region is asked
for its instances in batches of at most 100 ids (the API's limit; `MaxResults` may not be combined with
ids), following `NextToken`, regions in parallel, with botocore's adaptive retries for throttling.

Levels are `layer-1` .. `layer-N`, layer 1 furthest from the instance: the level names of the labels
source's `eks` preset, with the raw `nn-...` ids EKS writes as `topology.k8s.aws/network-node-layer-N`,
so switching between the two sources keeps every label. Nodes of a type with fewer layers than the
deepest in the cluster repeat their finest network node for the missing layers (`pad_depths`).
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from labeler.errors import InputError, SourceError
from labeler.io.nodes import Node
from labeler.progress import Progress, quiet
from labeler.topology.model import Discovery
from labeler.topology.placement import pad_depths

from .base import Options, Source, SourceContext, parse_options
from .fanout import each

if TYPE_CHECKING:  # EC2's client types (mypy-boto3-ec2, a test extra); botocore loads only when the source runs
    from mypy_boto3_ec2 import EC2Client

NAME = "aws"
MAX_IDS = 100  # DescribeInstanceTopology accepts at most 100 explicit instance ids
MAX_REGIONS_IN_FLIGHT = 16
DEFAULT_DEPTH = 3  # the common depth, used for the level names when no instance answered at all
DEFAULT_ATTEMPTS = 10  # unless AWS_MAX_ATTEMPTS or the profile's max_attempts says otherwise
CAPACITY_BLOCK = "capacity-block"
IAM_ACTION = "ec2:DescribeInstanceTopology"
REGION_LABEL = "topology.kubernetes.io/region"
ZONE_LABEL = "topology.kubernetes.io/zone"
TYPE_LABEL = "node.kubernetes.io/instance-type"

_INSTANCE_ID = re.compile(r"^i-[0-9A-Za-z]+$")
# A region is the zone name up to its first number: us-east-1a, us-west-2-lax-1a, us-gov-west-1b.
_REGION = re.compile(r"^([a-z]{2}(?:-[a-z]+)+-[0-9]+)")
_UNAUTHORIZED = {"UnauthorizedOperation", "AccessDenied", "AccessDeniedException"}
_BAD_CREDENTIALS = {"AuthFailure", "InvalidClientTokenId", "UnrecognizedClientException",
                    "SignatureDoesNotMatch", "ExpiredToken", "RequestExpired"}
_THROTTLED = {"RequestLimitExceeded", "Throttling", "ThrottlingException"}
_NOT_FOUND = {"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"}


class AwsOptions(Options):
    endpoint_url: str | None = None
    region: str | None = None
    capacity_block_level: bool = False


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("aws source (EC2 DescribeInstanceTopology)")
    group.add_argument("--endpoint-url", metavar="URL",
                       help="EC2 endpoint for every region (an emulator or a VPC endpoint); default: AWS's")
    group.add_argument("--region", help="region of nodes whose providerID has no zone and that have no "
                                        f"{REGION_LABEL} label (default: the AWS profile's region)")
    group.add_argument("--capacity-block-level", action="store_true", default=None,
                       help=f"add a finest level '{CAPACITY_BLOCK}' from CapacityBlockId (UltraServers)")


@dataclass(frozen=True)
class Target:
    """A node and the instance behind it."""

    node: str
    instance: str
    region: str
    instance_type: str = ""


@dataclass(frozen=True)
class Placement:
    """What DescribeInstanceTopology says of one instance."""

    network_nodes: tuple[str, ...]
    capacity_block: str | None = None
    instance_type: str | None = None


@dataclass
class RegionAnswer:
    """One region's answer: placements by instance id, ids the region does not know, or why it cannot answer."""

    placements: dict[str, Placement] = field(default_factory=dict)
    not_found: set[str] = field(default_factory=set)
    unsupported: str | None = None


def discover(ctx: SourceContext) -> Discovery:
    opts = parse_options(AwsOptions, ctx)
    session, profile_region, attempts = _session()
    discovery = Discovery(NAME, ())
    targets = locate(ctx.nodes, opts.region or profile_region, discovery)
    wanted = instances_by_region(targets)
    clients = {region: _client(session, region, opts.endpoint_url, attempts) for region in wanted}
    answers, failures = per_region(lambda region: read_region(clients[region], wanted[region]), wanted,
                                   ctx.progress)
    if failures:
        raise SourceError(failure_message(failures))
    place(discovery, targets, answers, opts.capacity_block_level)
    return discovery


# --- pure parts: nodes to instances, answers to paths ---------------------------------------------------

def parse_provider_id(provider_id: str) -> tuple[str, str]:
    """`(zone, instance id)` from `aws:///<zone>/i-...` (zone may be empty: `aws:////i-...`).

    Raises ValueError naming what is wrong, for a providerID that is not an EC2 instance.
    """
    parts = provider_id.removeprefix("aws://").split("/")
    if not provider_id.startswith("aws://") or not _INSTANCE_ID.fullmatch(parts[-1]):
        shown = repr(provider_id) if provider_id else "no spec.providerID"
        raise InputError(f"{shown} is not an EC2 instance (expected aws:///<zone>/i-...)")
    zone = next((p for p in reversed(parts[:-1]) if p), "")
    return zone, parts[-1]


def region_of_zone(zone: str) -> str | None:
    """The region a zone (or Local/Wavelength Zone) is in: `us-west-2-lax-1a` -> `us-west-2`."""
    match = _REGION.match(zone)
    return match.group(1) if match else None


def node_region(node: Node, zone: str, default: str | None) -> str | None:
    """The providerID's zone decides; then the region label, the zone label, and the default region."""
    return (region_of_zone(zone) or node.labels.get(REGION_LABEL) or
            region_of_zone(node.labels.get(ZONE_LABEL, "")) or default)


def locate(nodes: Sequence[Node], default_region: str | None, discovery: Discovery) -> list[Target]:
    """Each node's instance and region; nodes without either become problems."""
    targets = []
    for node in nodes:
        try:
            zone, instance = parse_provider_id(node.provider_id)
        except InputError as exc:
            discovery.problem(f"{exc}; cannot ask EC2 for its topology", node.name)
            continue
        region = node_region(node, zone, default_region)
        if not region:
            discovery.problem(f"no region for {instance}: no zone in its providerID, no {REGION_LABEL} label, "
                              "and no --region or AWS profile region", node.name)
            continue
        targets.append(Target(node.name, instance, region, node.labels.get(TYPE_LABEL, "")))
    return targets


def batches(ids: Sequence[str]) -> list[list[str]]:
    """Consecutive batches of at most MAX_IDS ids, one request (plus its extra pages) each."""
    return [list(ids[i:i + MAX_IDS]) for i in range(0, len(ids), MAX_IDS)]


def instances_by_region(targets: Sequence[Target]) -> dict[str, list[str]]:
    """Distinct instance ids per region, sorted so batches are stable from run to run."""
    wanted: dict[str, set[str]] = {}
    for target in targets:
        wanted.setdefault(target.region, set()).add(target.instance)
    return {region: sorted(ids) for region, ids in sorted(wanted.items())}


def level_names(depth: int, capacity_block: bool = False) -> tuple[str, ...]:
    """`layer-1` .. `layer-<depth>` (the labels source's eks preset names), then the capacity block."""
    return tuple(f"layer-{i}" for i in range(1, depth + 1)) + ((CAPACITY_BLOCK,) if capacity_block else ())


def place(discovery: Discovery, targets: Sequence[Target], answers: Mapping[str, RegionAnswer],
          capacity_block: bool) -> None:
    """Fill the discovery's paths from the answers; every target without a placement becomes a problem."""
    blocks: dict[str, str | None] = {}
    for target in targets:
        answer = answers[target.region]
        found = answer.placements.get(target.instance)
        if found and found.network_nodes:
            discovery.paths[target.node] = found.network_nodes
            blocks[target.node] = found.capacity_block
        else:
            discovery.problem(_unplaced_reason(target, answer, found), target.node)
    depth = max((len(p) for p in discovery.paths.values()), default=DEFAULT_DEPTH)
    discovery.level_names = level_names(depth, capacity_block)
    pad_depths(discovery, depth)
    if capacity_block:
        add_capacity_blocks(discovery, blocks)


def _unplaced_reason(target: Target, answer: RegionAnswer, found: Placement | None) -> str:
    what = f"instance {target.instance}" + (f" ({target.instance_type})" if target.instance_type else "")
    if answer.unsupported is not None:
        return f"DescribeInstanceTopology is not available in {target.region}: {answer.unsupported}"
    if target.instance in answer.not_found:
        return f"{what} does not exist in {target.region} (terminated, or in another region or account)"
    if found is None:
        return (f"{what} is not in DescribeInstanceTopology's answer for {target.region}: it answers only for "
                "running instances of types with topology support")
    kind = found.instance_type or target.instance_type
    return (f"{what} has no network nodes in DescribeInstanceTopology's answer: stopped, or "
            f"{kind or 'a type'} without topology support")


def add_capacity_blocks(discovery: Discovery, blocks: Mapping[str, str | None]) -> None:
    """Append the capacity block as the finest level; instances outside one keep their finest network node."""
    outside = sorted(node for node in discovery.paths if not blocks.get(node))
    for node, path in discovery.paths.items():
        discovery.paths[node] = path + (blocks.get(node) or path[-1],)
    if outside:
        discovery.problem(
            f"{len(outside)} node(s) have no CapacityBlockId (not in an UltraServer capacity block, or not yet "
            f"propagated); their finest network node stands in for '{CAPACITY_BLOCK}' (e.g. {', '.join(outside[:3])})")


def failure_message(failures: Mapping[str, Exception]) -> str:
    """One error for every region that could not answer, naming the IAM action when that is the cause.

    A failure that is not an AWS error is a bug: it is raised again, traceback and all.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    for exc in failures.values():
        if not isinstance(exc, (ClientError, BotoCoreError)):
            raise exc  # a bug, not an AWS answer: keep its traceback
    denied = sorted(r for r, e in failures.items() if _code(e) in _UNAUTHORIZED)
    if denied:
        said = _said(failures[denied[0]])
        return (f"aws: not authorized to call DescribeInstanceTopology in {', '.join(denied)}: allow the IAM "
                f"action {IAM_ACTION} for the credentials topolabel uses (AWS said: {said})")
    by_reason: dict[str, list[str]] = {}
    for region, exc in sorted(failures.items()):
        by_reason.setdefault(_reason(exc), []).append(region)
    return "aws: " + "; ".join(f"{reason} ({', '.join(regions)})" for reason, regions in by_reason.items())


def _code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _said(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    error = response.get("Error", {})
    return f"{error.get('Code', type(exc).__name__)}: {error.get('Message', exc)}"


def _reason(exc: Exception) -> str:
    from botocore.exceptions import ConnectionError, HTTPClientError, NoCredentialsError

    code = _code(exc)
    if code in _BAD_CREDENTIALS:
        return f"AWS rejected the credentials ({_said(exc)})"
    if code in _THROTTLED:
        return (f"DescribeInstanceTopology still throttled after the retries ({_said(exc)}); try again later "
                "or raise AWS_MAX_ATTEMPTS")
    if code:
        return f"DescribeInstanceTopology failed ({_said(exc)})"
    if isinstance(exc, NoCredentialsError):
        return ("no AWS credentials: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE, or run with an "
                "instance or pod role")
    if isinstance(exc, (ConnectionError, HTTPClientError)):
        return f"cannot reach EC2: {exc}"
    return f"the AWS client failed: {exc}"


# --- the AWS edge -------------------------------------------------------------------------------------

def _session() -> tuple[Any, str | None, int]:
    """botocore's session (boto3's default credential chain), the profile's region and attempts per call."""
    import botocore.session
    from botocore.exceptions import BotoCoreError

    session = botocore.session.get_session()
    try:
        region = session.get_config_variable("region")
        attempts = int(session.get_config_variable("max_attempts") or DEFAULT_ATTEMPTS)
    except (BotoCoreError, ValueError) as exc:  # a missing AWS_PROFILE, a malformed max_attempts
        raise SourceError(f"aws: cannot read the AWS configuration: {exc}") from None
    return session, region, attempts


def _client(session: Any, region: str, endpoint_url: str | None, attempts: int) -> "EC2Client":
    """An EC2 client with adaptive retries: client-side rate limiting plus backoff on RequestLimitExceeded."""
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError

    config = Config(retries={"mode": "adaptive", "total_max_attempts": attempts},
                    user_agent_extra="topolabel", connect_timeout=10, read_timeout=60)
    try:
        return session.create_client("ec2", region_name=region, endpoint_url=endpoint_url, config=config)
    except (BotoCoreError, ValueError) as exc:  # a malformed --endpoint-url or region name
        raise SourceError(f"aws: cannot make an EC2 client for {region}: {exc}") from None


def per_region(fn: Callable[[str], RegionAnswer], regions: Iterable[str], progress: Progress = quiet
               ) -> tuple[dict[str, RegionAnswer], dict[str, Exception]]:
    """`fn(region)` for every region in parallel: the answers and the failures per region."""
    return each(fn, regions, "aws: regions", progress, MAX_REGIONS_IN_FLIGHT)


def read_region(client: "EC2Client", ids: Sequence[str]) -> RegionAnswer:
    """Every placement of `ids` in the client's region: ceil(len(ids) / 100) requests plus extra pages.

    `UnsupportedOperation` (a region without the API) ends the region's work with the reason; ids the
    region reports as unknown are set aside and the rest of their batch asked again.
    """
    from botocore.exceptions import ClientError

    answer = RegionAnswer()
    for batch in batches(ids):
        while batch:
            try:
                answer.placements.update(_describe(client, batch))
                break
            except ClientError as exc:
                code = _code(exc)
                if code == "UnsupportedOperation":
                    answer.unsupported = _said(exc)
                    return answer
                unknown = _named_ids(exc, batch) if code in _NOT_FOUND else set()
                if not unknown:
                    raise
                answer.not_found |= unknown
                batch = [i for i in batch if i not in unknown]
    return answer


def _describe(client: "EC2Client", batch: list[str]) -> dict[str, Placement]:
    """One batch of ids, page by page (MaxResults is not allowed together with InstanceIds)."""
    placements: dict[str, Placement] = {}
    kwargs: dict[str, Any] = {"InstanceIds": batch}
    while True:
        page = client.describe_instance_topology(**kwargs)
        for item in page.get("Instances") or []:
            placements[item["InstanceId"]] = Placement(
                tuple(item.get("NetworkNodes") or ()), item.get("CapacityBlockId") or None, item.get("InstanceType"))
        token = page.get("NextToken")
        if not token:
            return placements
        kwargs["NextToken"] = token


def _named_ids(exc: Exception, batch: Sequence[str]) -> set[str]:
    """The ids of `batch` that an InvalidInstanceID error message names."""
    message = str(getattr(exc, "response", {}).get("Error", {}).get("Message", ""))
    return set(re.findall(r"i-[0-9A-Za-z]+", message)) & set(batch)


SOURCE = Source(NAME, AwsOptions, add_arguments, discover)
