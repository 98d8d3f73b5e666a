"""Topology from OCI's Compute API: each bare-metal host's HPC island, network block and local block.

A node maps to its instance through `spec.providerID` (the instance OCID, as OKE writes it, or `oci://<OCID>`).
The tenancy's availability domains are listed once (ListAvailabilityDomains), then each one's compute hosts
(ListComputeHosts, paged, in parallel), keeping only domains some node's `topology.kubernetes.io/zone` names
when every node names one. A host whose summary lacks a topology field is asked for in full
(GetComputeHost). Calls: 1 + the pages of each domain listed + the hosts read in full.

Levels are island > block > local-block, the names of the labels source's `oci` preset, with values the last
11 characters of each OCID as Oracle's OKE labeler writes its `rdma.*` labels, so switching between the two
keeps every label. A host's GPU memory fabric (GB200/GB300 NVLink domain) becomes the `nvlink` level where it
nests. A node without a host, or whose host lacks a field, is a problem of its own.

The pure parts come first; the SDK edge (credentials, clients, paging, errors) at the end. The `oci` SDK is
an optional dependency (`pip install 'topolabel[oci]'`), imported only when the source runs.
"""

from __future__ import annotations

import argparse
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Sequence

from labeler.errors import InputError, SourceError
from labeler.io.nodes import Node
from labeler.progress import Progress, quiet
from labeler.topology.model import Discovery
from labeler.topology.placement import insert_level

from .base import Options, Source, SourceContext, parse_options
from .fanout import each
from .instances import instances

NAME = "oci"
LEVELS = ("island", "block", "local-block")
NVLINK = "nvlink"
FIELDS = ("hpc_island_id", "network_block_id", "local_block_id")  # the SDK's names, coarsest first
API_FIELDS = ("hpcIslandId", "networkBlockId", "localBlockId")  # the API's, for messages
OCID_TAIL = 11  # Oracle's OKE labeler writes the last 11 characters of each OCID
PAGE_LIMIT = 100  # hosts per ListComputeHosts page
PARALLEL = 8  # availability domains listed, or hosts read, at once
ZONE_LABEL = "topology.kubernetes.io/zone"
TIMEOUT = (10.0, 60.0)  # connect, read: seconds per HTTP request
INSTALL = "pip install 'topolabel[oci]'"

_INSTANCE = re.compile(r"^ocid1\.instance\.[a-z0-9-]+\.[a-z0-9-]*\.[a-z0-9]+$")


class OciOptions(Options):
    oci_auth: Literal["config", "instance-principal", "workload-identity"] = "config"
    oci_config: str | None = None
    oci_profile: str | None = None
    oci_region: str | None = None
    compartment: str | None = None
    oci_endpoint: str | None = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("oci source (Compute API compute hosts)")
    group.add_argument("--oci-auth", choices=["config", "instance-principal", "workload-identity"],
                       help="how to authenticate: an API key in the OCI config file (default), the instance's "
                            "principal, or OKE workload identity (the pod's service account)")
    group.add_argument("--oci-config", metavar="FILE", help="OCI config file for --oci-auth config "
                                                             "(default: ~/.oci/config)")
    group.add_argument("--oci-profile", metavar="NAME", help="profile in the OCI config file (default: DEFAULT)")
    group.add_argument("--oci-region", metavar="REGION", help="region to ask (default: the config's, the "
                                                               "instance's, or OCI_RESOURCE_PRINCIPAL_REGION)")
    group.add_argument("--compartment", metavar="OCID", help="the tenancy OCID, whose root compartment holds "
                                                              "the compute hosts (default: the credentials' tenancy)")
    group.add_argument("--oci-endpoint", metavar="URL", help="Compute and Identity API endpoint (default: the "
                                                              "region's); for private endpoints and emulators")


# --- pure parts: nodes to instances, hosts to paths -----------------------------------------------------


@dataclass(frozen=True)
class Host:
    """What topolabel reads from a compute host (summary or full record)."""

    id: str
    instance: str
    availability_domain: str
    ids: tuple[str | None, ...]  # FIELDS, coarsest first
    gpu_memory_fabric: str | None = None

    @property
    def complete(self) -> bool:
        return all(self.ids)


@dataclass
class Listing:
    """The hosts found by instance OCID, and why some could not be read in full."""

    hosts: dict[str, Host] = field(default_factory=dict)
    unread: dict[str, str] = field(default_factory=dict)  # instance -> the API's reason


def instance_of(provider_id: str) -> str:
    """The instance OCID in `ocid1.instance...` or `oci://ocid1.instance...`; an InputError says what is wrong."""
    ocid = provider_id.removeprefix("oci://")
    if not _INSTANCE.fullmatch(ocid):
        shown = repr(provider_id) if provider_id else "no spec.providerID"
        raise InputError(f"{shown} is not an OCI instance (expected ocid1.instance... or oci://ocid1.instance...)")
    return ocid


def domains_to_list(domains: Sequence[str], nodes: Sequence[Node], targets: Mapping[str, str]) -> list[str]:
    """The availability domains whose hosts to list: those the nodes' zone labels name (`PHX-AD-1` names
    `Uocm:PHX-AD-1`), or all of them when a node names none or one that is not listed."""
    zones = {n.labels.get(ZONE_LABEL, "") for n in nodes if n.name in targets}
    by_zone = {ad.rpartition(":")[2]: ad for ad in domains}
    if "" in zones or not zones <= set(by_zone):
        return sorted(domains)
    return sorted(by_zone[z] for z in zones)


def short(ocid: str) -> str:
    """An OCID as Oracle's OKE labeler writes it in labels: its last 11 characters."""
    return ocid[-OCID_TAIL:]


def place(discovery: Discovery, targets: Mapping[str, str], listing: Listing, listed: Sequence[str],
          compartment: str) -> None:
    """Each node's path from its host, or a problem saying why not; then the NVLink level where it nests."""
    fabrics: dict[str, str] = {}
    where = f"{', '.join(listed) or 'no availability domain'} of compartment {compartment}"
    for node in sorted(targets):
        instance = targets[node]
        host = listing.hosts.get(instance)
        if host is None:
            discovery.problem(f"instance {instance} is on no compute host listed in {where} (not a bare-metal "
                              "shape, terminated, or in another region or tenancy)", node)
        elif instance in listing.unread:
            discovery.problem(f"instance {instance}: compute host {host.id} could not be read: "
                              f"{listing.unread[instance]}", node)
        elif not host.complete:
            missing = ", ".join(f for f, v in zip(API_FIELDS, host.ids) if not v)
            discovery.problem(f"instance {instance}: compute host {host.id} has no {missing} (its shape or "
                              "capacity reports no RDMA topology)", node)
        else:
            discovery.paths[node] = tuple(short(v) for v in host.ids if v)
            if host.gpu_memory_fabric:
                fabrics[node] = short(host.gpu_memory_fabric)
    if fabrics:
        at = insert_level(discovery, fabrics, NVLINK, origin=NAME)
        if at < len(LEVELS):
            discovery.problem(f"GPU memory fabrics span several {LEVELS[at]} domains, so the {NVLINK} level sits "
                              f"above {LEVELS[at]} (levels: {' > '.join(discovery.level_names)})")


# --- the SDK edge -------------------------------------------------------------------------------------


def discover(ctx: SourceContext) -> Discovery:
    opts = parse_options(OciOptions, ctx)
    discovery = Discovery(NAME, LEVELS)
    targets = instances(ctx.nodes, discovery, instance_of, "OCI for its compute host")
    if not targets:  # nothing to look up: no credentials needed
        return discovery
    api = Api.connect(opts)
    domains = api.availability_domains()
    listed = domains_to_list(domains, ctx.nodes, targets)
    listing = api.hosts(listed, set(targets.values()), ctx.progress)
    place(discovery, targets, listing, listed, api.compartment)
    return discovery


@dataclass
class Api:
    """The Compute and Identity clients for one region and the compartment (tenancy) to list."""

    compute: Any
    identity: Any
    compartment: str

    @classmethod
    def connect(cls, opts: OciOptions) -> "Api":
        try:
            import oci
        except ImportError:
            raise SourceError(f"oci: the OCI SDK is not installed: {INSTALL}") from None
        config, signer, tenancy = _credentials(oci, opts)
        compartment = opts.compartment or tenancy
        if not compartment:
            raise SourceError("oci: no tenancy to list compute hosts in: give --compartment (the tenancy OCID)")
        if opts.oci_region:
            config["region"] = opts.oci_region
        if not config.get("region") and not opts.oci_endpoint:
            raise SourceError("oci: no region: give --oci-region, or a region in the OCI config")
        kwargs = {"signer": signer, "timeout": TIMEOUT, "retry_strategy": _retry(oci),
                  "circuit_breaker_strategy": oci.circuit_breaker.NoCircuitBreakerStrategy()}
        if opts.oci_endpoint:
            kwargs["service_endpoint"] = opts.oci_endpoint
        try:
            return cls(oci.core.ComputeClient(config, **kwargs), oci.identity.IdentityClient(config, **kwargs),
                       compartment)
        except (ValueError, oci.exceptions.ClientError) as exc:  # a malformed endpoint or region
            raise SourceError(f"oci: cannot make an API client: {exc}") from None

    def availability_domains(self) -> list[str]:
        """The tenancy's availability domains (one call)."""
        return [ad.name for ad in self._call("ListAvailabilityDomains", self.identity.list_availability_domains,
                                             compartment_id=self.compartment).data]

    def hosts(self, domains: Sequence[str], wanted: set[str], progress: Progress = quiet) -> Listing:
        """Every domain's compute hosts, page by page; those of `wanted` instances lacking a field read in full."""
        answers, failures = each(lambda ad: self._list(ad, wanted), domains, "oci: availability domains",
                                 progress, PARALLEL)
        if failures:
            raise _first_error(failures)
        listing = Listing({h.instance: h for found in answers.values() for h in found})
        partial = [h for h in listing.hosts.values() if not h.complete]
        if partial:
            with ThreadPoolExecutor(max_workers=min(PARALLEL, len(partial))) as pool:
                for host, (full, reason) in zip(partial, pool.map(self._get, partial)):
                    listing.hosts[host.instance] = full or host
                    if reason:
                        listing.unread[host.instance] = reason
        return listing

    def _list(self, domain: str, wanted: set[str]) -> list[Host]:
        found: list[Host] = []
        page = None
        while True:
            response = self._call("ListComputeHosts", self.compute.list_compute_hosts, compartment_id=self.compartment,
                                  availability_domain=domain, limit=PAGE_LIMIT, page=page)
            found += [host for item in response.data.items if (host := _host(item)).instance in wanted]
            page = response.next_page
            if not page:
                return found

    def _get(self, host: Host) -> tuple[Host | None, str | None]:
        """The full record of a host whose summary lacks a field; a host gone since the listing is its reason."""
        from oci.exceptions import ServiceError

        try:
            full = self._call("GetComputeHost", self.compute.get_compute_host, compute_host_id=host.id)
            return _host(full.data), None
        except SourceError as exc:
            cause = exc.__cause__
            if isinstance(cause, ServiceError) and cause.status == 404:
                return None, _said(cause)
            raise

    def _call(self, operation: str, method: Any, **kwargs: Any) -> Any:
        """One API call; an OCI failure becomes one SourceError naming the operation (cause kept for `_get`)."""
        from oci.exceptions import RequestException, ServiceError

        try:
            return method(**{k: v for k, v in kwargs.items() if v is not None})
        except ServiceError as exc:
            raise SourceError(_service_message(operation, exc, self.compartment)) from exc
        except RequestException as exc:  # connection refused, timeouts (ConnectTimeout is one)
            raise SourceError(f"oci: cannot reach the OCI API for {operation}: {exc}") from exc


def _host(item: Any) -> Host:
    """A ComputeHostSummary or ComputeHost as topolabel reads it."""
    return Host(item.id, item.instance_id or "", item.availability_domain or "",
                tuple((getattr(item, f) or "").strip() or None for f in FIELDS), item.gpu_memory_fabric_id or None)


def _credentials(oci: Any, opts: OciOptions) -> tuple[dict[str, Any], Any, str | None]:
    """The SDK config, a signer and the credentials' tenancy, for the chosen way to authenticate."""
    from oci.exceptions import ClientError

    try:
        if opts.oci_auth == "instance-principal":
            signer = oci.auth.signers.InstancePrincipalsSecurityTokenSigner()
            return {"region": signer.region}, signer, signer.tenancy_id
        if opts.oci_auth == "workload-identity":
            signer = oci.auth.signers.get_oke_workload_identity_resource_principal_signer()
            return {"region": getattr(signer, "region", None)}, signer, None
        config = oci.config.from_file(opts.oci_config or oci.config.DEFAULT_LOCATION,
                                      opts.oci_profile or oci.config.DEFAULT_PROFILE)
        signer = oci.signer.Signer(config["tenancy"], config["user"], config["fingerprint"],
                                   config.get("key_file"), config.get("pass_phrase"), config.get("key_content"))
        return config, signer, config["tenancy"]
    except (ClientError, OSError, ValueError, KeyError) as exc:  # no file, profile or key; a bad key; no IMDS
        raise SourceError(f"oci: cannot authenticate ({opts.oci_auth}): {type(exc).__name__}: {exc}") from None
    except oci.exceptions.ServiceError as exc:  # the instance or workload token exchange refused
        raise SourceError(f"oci: cannot authenticate ({opts.oci_auth}): {_said(exc)}") from None


def _retry(oci: Any) -> Any:
    """Throttling (429), server errors and dropped connections retried with backoff, five attempts in at most
    two minutes: the calls are reads."""
    return oci.retry.RetryStrategyBuilder(max_attempts=5, total_elapsed_time_seconds=120,
                                          service_error_retry_on_any_5xx=True, retry_base_sleep_time_seconds=0.5,
                                          retry_max_wait_between_calls_seconds=10).get_retry_strategy()


def _service_message(operation: str, exc: Any, compartment: str) -> str:
    said = _said(exc)
    if exc.status == 401:
        return f"oci: OCI rejected the credentials for {operation} ({said})"
    if exc.status == 404 and operation != "GetComputeHost":
        return (f"oci: {operation} in compartment {compartment}: not authorized, or no such compartment; the "
                "identity needs to inspect the tenancy's compute hosts (docs/oci.md, Permissions) "
                f"(OCI said: {said})")
    if exc.status == 429:
        return f"oci: {operation} still throttled after the retries ({said}); try again later"
    return f"oci: {operation} failed ({said})"


def _said(exc: Any) -> str:
    return f"{exc.status} {exc.code}: {exc.message}"


def _first_error(failures: Mapping[str, Exception]) -> Exception:
    """The first domain's failure; one that is not an API error is a bug and keeps its traceback."""
    domain, exc = next(iter(failures.items()))
    if isinstance(exc, SourceError):
        return SourceError(f"{exc} (availability domain {domain})")
    return exc


SOURCE = Source(NAME, OciOptions, add_arguments, discover, per_node=False)
