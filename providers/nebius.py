"""Topology from the Nebius Compute API: each instance's `status.infiniband_topology_path`.

A node maps to its instance through `spec.providerID` (`nebius://computeinstance-...`, as Nebius Managed
Kubernetes writes it). Each project named is listed once, page by page (`InstanceService.List`), projects in
parallel: the calls grow with the projects' instances, not with the nodes. The path is the instance's
InfiniBand switches root first; levels are named as the labels source's `nebius` preset names Soperator's
tiers (`tier-3 > tier-2 > tier-1`, tier 1 the leaf), and an instance's NVLink instance group (GB200/GB300)
becomes the `nvlink` level where it nests. Shorter paths repeat their leaf (`pad_depths`).

The pure parts come first; the SDK edge (credentials, TLS, paging, gRPC errors) at the end. The `nebius` SDK
is an optional dependency (`pip install 'topolabel[nebius]'`), imported only when the source runs.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from labeler.errors import InputError, SourceError
from labeler.progress import Progress, quiet
from labeler.topology.model import Discovery
from labeler.topology.placement import insert_level, pad_depths

from .base import Options, Source, SourceContext, parse_options
from .fanout import each
from .instances import instances

NAME = "nebius"
NVLINK = "nvlink"
DEFAULT_DEPTH = 3  # Nebius reports three switches; the level names when no instance answered
PAGE_SIZE = 100  # instances per List page
PARALLEL = 8  # projects listed at once
TIMEOUT = 60.0  # seconds per List call, retries included
RETRIES = 4  # attempts per call, on the SDK's retryable statuses
TOKEN_ENV = "NEBIUS_IAM_TOKEN"
INSTALL = "pip install 'topolabel[nebius]'"
USER_AGENT = "topolabel"

_INSTANCE = re.compile(r"^computeinstance-[a-z0-9]+$")


class NebiusOptions(Options):
    nebius_project: list[str] | None = None
    nebius_credentials: str | None = None
    nebius_endpoint: str | None = None
    nebius_ca: str | None = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("nebius source (Compute API InfiniBand topology paths)")
    group.add_argument("--nebius-project", metavar="ID[,ID...]", type=lambda s: [p for p in s.split(",") if p],
                       help="projects whose instances to list (project-e00...)")
    group.add_argument("--nebius-credentials", metavar="FILE",
                       help=f"a service account's credentials file (default: the token in ${TOKEN_ENV})")
    group.add_argument("--nebius-endpoint", metavar="HOST:PORT",
                       help="one address for every Nebius API (default: the SDK's, api.nebius.cloud)")
    group.add_argument("--nebius-ca", metavar="FILE", help="CA bundle to verify the API's TLS certificate "
                                                           "(default: the system's)")


# --- pure parts -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Instance:
    """What topolabel reads from an instance."""

    path: tuple[str, ...]  # InfiniBand switches, root first
    nvlink: str = ""
    state: str = ""


def instance_of(provider_id: str) -> str:
    """The instance id in `nebius://computeinstance-...`; an InputError says what is wrong."""
    instance = provider_id.removeprefix("nebius://")
    if not provider_id.startswith("nebius://") or not _INSTANCE.fullmatch(instance):
        shown = repr(provider_id) if provider_id else "no spec.providerID"
        raise InputError(f"{shown} is not a Nebius instance (expected nebius://computeinstance-...)")
    return instance


def level_names(depth: int) -> tuple[str, ...]:
    """`tier-<depth>` .. `tier-1`, coarsest first: the `nebius` preset's names for Soperator's tiers."""
    return tuple(f"tier-{t}" for t in range(depth, 0, -1))


def place(discovery: Discovery, targets: Mapping[str, str], found: Mapping[str, Instance],
          projects: Sequence[str]) -> None:
    """Each node's path, or a problem saying why not; then padding and the NVLink level where it nests."""
    groups: dict[str, str] = {}
    for node in sorted(targets):
        instance = targets[node]
        info = found.get(instance)
        if info is None:
            discovery.problem(f"instance {instance} is in none of the projects listed ({', '.join(projects)}): "
                              "deleted, or in another project (--nebius-project)", node)
        elif not info.path:
            discovery.problem(f"instance {instance} ({info.state or 'unknown state'}) has no "
                              "status.infiniband_topology_path (not in a GPU cluster, or not running)", node)
        else:
            discovery.paths[node] = info.path
            if info.nvlink:
                groups[node] = info.nvlink
    depth = max((len(p) for p in discovery.paths.values()), default=DEFAULT_DEPTH)
    discovery.level_names = level_names(depth)
    pad_depths(discovery, depth)
    if groups:
        at = insert_level(discovery, groups, NVLINK, origin=NAME)
        if at < depth:
            discovery.problem(f"NVLink instance groups span several {discovery.level_names[at + 1]} domains, so "
                              f"the {NVLINK} level sits above it (levels: {' > '.join(discovery.level_names)})")


# --- the SDK edge -------------------------------------------------------------------------------------


def discover(ctx: SourceContext) -> Discovery:
    opts = parse_options(NebiusOptions, ctx)
    discovery = Discovery(NAME, level_names(DEFAULT_DEPTH))
    targets = instances(ctx.nodes, discovery, instance_of, "Nebius for its topology")
    if not targets:  # nothing to look up: no credentials needed
        return discovery
    if not opts.nebius_project:
        raise SourceError("nebius: no project to list instances in: give --nebius-project (project-e00...)")
    found = fetch(opts, opts.nebius_project, set(targets.values()), ctx.progress)
    place(discovery, targets, found, opts.nebius_project)
    return discovery


def fetch(opts: NebiusOptions, projects: Sequence[str], wanted: set[str], progress: Progress = quiet
          ) -> dict[str, Instance]:
    """The wanted instances of every project, each project listed page by page, projects in parallel."""
    sdk = _sdk(opts)
    try:
        from nebius.api.nebius.compute.v1 import InstanceServiceClient

        client = InstanceServiceClient(sdk)
        answers, failures = each(lambda project: _list(client, project, wanted), projects, "nebius: projects",
                                 progress, PARALLEL)
    finally:
        sdk.sync_close()
    if failures:
        project, exc = next(iter(failures.items()))
        raise _error(exc, project, opts) from None
    return {k: v for found in answers.values() for k, v in found.items()}


def _list(client: Any, project: str, wanted: set[str]) -> dict[str, Instance]:
    from nebius.api.nebius.compute.v1 import ListInstancesRequest

    found: dict[str, Instance] = {}
    token = ""
    while True:
        request = ListInstancesRequest(parent_id=project, page_size=PAGE_SIZE, page_token=token or None)
        page = client.list(request, timeout=TIMEOUT, retries=RETRIES).wait()
        for item in page.items:
            if item.metadata.id in wanted:
                found[item.metadata.id] = _instance(item)
        token = page.next_page_token
        if not token:
            return found


def _instance(item: Any) -> Instance:
    """The SDK's messages leave an absent sub-message None (a stopped instance has no topology path)."""
    status, spec = item.status, item.spec
    topology = status.infiniband_topology_path if status else None
    path = tuple(s.strip() for s in (topology.path if topology else ()) if s.strip())
    state = getattr(status.state, "name", "") if status else ""
    return Instance(path, ((spec.nvl_instance_group_id if spec else "") or "").strip(), state)


def _sdk(opts: NebiusOptions) -> Any:
    """An SDK channel: TLS verified (the system's CA bundle or --nebius-ca), one address for every service
    with --nebius-endpoint, a service account's credentials file or the token in NEBIUS_IAM_TOKEN."""
    try:
        import grpc
        from nebius.base.resolver import Constant
        from nebius.sdk import SDK
    except ImportError:
        raise SourceError(f"nebius: the Nebius SDK is not installed: {INSTALL}") from None
    logging.getLogger("nebius").setLevel(logging.ERROR)  # retries are logged as warnings with tracebacks
    kwargs: dict[str, Any] = {"user_agent_prefix": USER_AGENT}
    if opts.nebius_credentials:
        kwargs["credentials_file_name"] = opts.nebius_credentials
    elif os.environ.get(TOKEN_ENV):
        kwargs["credentials"] = os.environ[TOKEN_ENV]
    else:
        raise SourceError(f"nebius: no credentials: set {TOKEN_ENV}, or give --nebius-credentials (a service "
                          "account's credentials file)")
    if opts.nebius_endpoint:
        kwargs["resolver"] = Constant(opts.nebius_endpoint)
    try:
        if opts.nebius_ca:
            with open(opts.nebius_ca, "rb") as bundle:
                kwargs["tls_credentials"] = grpc.ssl_channel_credentials(root_certificates=bundle.read())
        return SDK(**kwargs)
    except (OSError, ValueError, RuntimeError) as exc:  # no CA file, a bad credentials file, no system CA bundle
        raise SourceError(f"nebius: cannot set up the API client: {type(exc).__name__}: {exc}") from None


def _error(exc: Exception, project: str, opts: NebiusOptions) -> Exception:
    """One line for a project that could not be listed; a failure that is not the SDK's is a bug, kept."""
    from nebius.base.error import SDKError

    if not isinstance(exc, SDKError):
        return exc
    status = getattr(exc, "status", None)
    code = getattr(getattr(status, "code", None), "name", "")
    said = str(exc).removeprefix("Request error ")
    if code == "PERMISSION_DENIED":
        return SourceError(f"nebius: permission denied listing instances in {project}: the identity needs a role "
                           f"that views compute instances in the project (docs/nebius.md, Permissions) ({said})")
    if code == "UNAUTHENTICATED":
        return SourceError(f"nebius: the credentials were rejected ({said})")
    if code == "NOT_FOUND":
        return SourceError(f"nebius: project {project} not found ({said})")
    if code in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
        where = opts.nebius_endpoint or "the Nebius API"
        return SourceError(f"nebius: cannot reach {where} to list instances in {project}: {said}")
    return SourceError(f"nebius: listing instances in {project} failed: {said}")


SOURCE = Source(NAME, NebiusOptions, add_arguments, discover, per_node=False)
