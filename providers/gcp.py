"""Topology from the Compute Engine API: each instance's `resourceStatus.physicalHostTopology`.

Nodes name their instance in `spec.providerID` (`gce://<project>/<zone>/<name>`). The instances are
read with `instances.list` per zone, or `instances.aggregatedList` per project when that takes fewer
calls, always filtered on the names asked for, so the calls grow with the cluster and not with the
project. Levels are cluster > block > subblock, and host with `--host-level`.

The pure parts (providerID parsing, filter building, the call plan, topology to path) come first; the
client edge (credentials, paging, retries, API errors) is at the end.
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, Sequence
from urllib.parse import quote_plus

from labeler.errors import InputError, SourceError
from labeler.io.nodes import Node
from labeler.progress import Progress, quiet
from labeler.topology.model import Discovery

from .base import Options, Source, SourceContext, parse_options

NAME = "gcp"
LEVELS = ("cluster", "block", "subblock")
HOST = "host"
PERMISSION = "compute.instances.list"
READONLY_SCOPE = "https://www.googleapis.com/auth/compute.readonly"

PAGE_SIZE = 500  # the API's largest maxResults
# URL-encoded characters of one filter: Compute has been reported to reject filters over about 4 KB
# (kubernetes/kubernetes#27741), and proxies on the way often cap URLs at 8 KB.
FILTER_BUDGET = 4000
PARALLEL = 8  # list calls in flight
# Partial responses (the X-Goog-FieldMask system parameter): an instance record runs to several KB
# (a GKE node's kube-env metadata, disks, interfaces), of which topolabel needs four fields.
_FIELDS = "name,machineType,status,resourceStatus/physicalHostTopology"
ZONAL_FIELDS = f"items({_FIELDS}),nextPageToken"
AGGREGATED_FIELDS = f"items/*/instances({_FIELDS}),nextPageToken"
TIMEOUT = 60.0  # seconds per HTTP request

_PROVIDER_ID = re.compile(r"^gce://([^/]*)/([^/]+)/([^/]+)$")
_PROJECT = re.compile(r"^[a-z0-9][-a-z0-9.:]*[a-z0-9]$")  # includes domain-scoped `example.com:proj`
_RFC1035 = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")  # zone and instance names


class GcpOptions(Options):
    project: str | None = None
    api_endpoint: str | None = None
    anonymous: bool = False
    host_level: bool = False


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("gcp source (Compute Engine physicalHostTopology)")
    group.add_argument("--project", help="project for providerIDs that name none (default: the ADC project)")
    group.add_argument("--api-endpoint", metavar="URL", help="Compute API endpoint (default: compute.googleapis.com)")
    group.add_argument("--anonymous", action="store_true", default=None,
                       help="send no credentials (for emulators and local test servers)")
    group.add_argument("--host-level", action="store_true", default=None,
                       help="add the physical host as the finest level (cluster > block > subblock > host)")


# --- pure parts -------------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class InstanceRef:
    """One instance; `project` is empty when the providerID names none."""

    project: str
    zone: str
    name: str

    def __str__(self) -> str:
        return f"{self.project}/{self.zone}/{self.name}"


def parse_provider_id(provider_id: str) -> InstanceRef:
    """`gce://<project>/<zone>/<name>` to an instance; a ValueError says what is wrong with it."""
    m = _PROVIDER_ID.fullmatch(provider_id)
    if not m:
        what = f"providerID {provider_id!r}" if provider_id else "no spec.providerID"
        raise InputError(f"{what}: not a GCE instance (gce://PROJECT/ZONE/NAME)")
    project, zone, name = m.groups()
    if project and not _PROJECT.fullmatch(project):
        raise InputError(f"providerID {provider_id!r}: {project!r} is not a project ID")
    for kind, value in (("zone", zone), ("instance name", name)):
        if not _RFC1035.fullmatch(value):
            raise InputError(f"providerID {provider_id!r}: {value!r} is not a valid {kind}")
    return InstanceRef(project, zone, name)


_BAR, _OPEN, _CLOSE = (len(quote_plus(c)) for c in "|()")
_FRAME = len(quote_plus('name eq "()"'))


def _split(name: str) -> tuple[str, str]:
    """Stem (up to and with the last '-') and suffix: a GKE pool's names share `gke-<cluster>-<pool>-<hash>-`."""
    cut = name.rfind("-") + 1
    return name[:cut], name[cut:]


def _added_cost(groups: Mapping[str, Sequence[str]], stem: str, suffix: str) -> int:
    """Encoded characters one more name adds to a filter: a new alternative, or a suffix in its stem's group."""
    members = len(groups.get(stem, ())) if stem else 0  # names without a stem stand alone
    if members == 0:
        return (_BAR if groups else 0) + len(stem) + len(suffix)
    if members == 1:  # `stem-a` becomes `stem-(a|b)`
        return _OPEN + _BAR + len(suffix) + _CLOSE
    return _BAR + len(suffix)


def _render(groups: Mapping[str, Sequence[str]]) -> str:
    alts = [stem + (sfx[0] if len(sfx) == 1 else "(" + "|".join(sfx) + ")") for stem, sfx in groups.items() if stem]
    alts += groups.get("", [])
    return 'name eq "(' + "|".join(alts) + ')"'


def name_filters(names: Iterable[str], budget: int = FILTER_BUDGET, limit: int = PAGE_SIZE) -> list[str]:
    """Filters `name eq "RE"` that together match exactly `names`, each within `budget` URL-encoded
    characters and `limit` names (so one call returns one page).

    Names sharing a stem cost only their suffixes, so a GKE pool's ~500 names fit in one filter. Names
    are RFC 1035 labels (checked when parsing providerIDs), which holds no regular-expression syntax.
    """
    filters: list[str] = []
    groups: dict[str, list[str]] = {}
    cost = count = 0
    for name in sorted(set(names)):
        stem, suffix = _split(name)
        delta = _added_cost(groups, stem, suffix)
        if groups and (count == limit or _FRAME + cost + delta > budget):
            filters.append(_render(groups))
            groups, cost, count = {}, 0, 0
            delta = _added_cost(groups, stem, suffix)
        groups.setdefault(stem, []).append(suffix)
        cost += delta
        count += 1
    if groups:
        filters.append(_render(groups))
    return filters


@dataclass(frozen=True)
class ListCall:
    """One paged list: a zone's instances, or with `zone` None the project's aggregated list."""

    project: str
    zone: str | None
    filter: str

    @property
    def scope(self) -> str:
        return f"projects/{self.project}" + (f"/zones/{self.zone}" if self.zone else "")


def plan_calls(refs: Iterable[InstanceRef], budget: int = FILTER_BUDGET, limit: int = PAGE_SIZE) -> list[ListCall]:
    """Per project, one filtered list per zone, or the aggregated list when its filters need fewer calls.

    The aggregated list never needs more (its filters pack names across zones); on a tie the zonal lists
    win, as their answers carry no entries for the other zones of the world.
    """
    by_project: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for ref in refs:
        by_project[ref.project][ref.zone].add(ref.name)
    calls: list[ListCall] = []
    for project in sorted(by_project):
        zones = by_project[project]
        zonal = [ListCall(project, z, f) for z in sorted(zones) for f in name_filters(zones[z], budget, limit)]
        everywhere = set().union(*zones.values())
        aggregated = [ListCall(project, None, f) for f in name_filters(everywhere, budget, limit)]
        calls += aggregated if len(aggregated) < len(zonal) else zonal
    return calls


@dataclass(frozen=True)
class InstanceInfo:
    """What topolabel reads from an instance."""

    machine_type: str
    status: str
    topology: Mapping[str, str]


def topology_path(info: InstanceInfo, levels: Sequence[str]) -> tuple[str, ...]:
    """The instance's raw path for `levels`; a ValueError names the fields it lacks."""
    values = [str(info.topology.get(level) or "").strip() for level in levels]
    if not any(values):
        raise InputError("has no resourceStatus.physicalHostTopology (its machine type or placement "
                         "does not report one)")
    missing = [level for level, value in zip(levels, values) if not value]
    if missing:
        hint = "; run without --host-level to place it by subblock" if missing == [HOST] else ""
        raise InputError(f"has physicalHostTopology without {', '.join(missing)}{hint}")
    return tuple(values)


def place(refs: Mapping[str, InstanceRef], found: Mapping[InstanceRef, InstanceInfo],
          failed: Mapping[str, str], levels: Sequence[str], discovery: Discovery) -> None:
    """Give each node its instance's path, or a problem saying why not.

    `failed` maps a call's scope (`projects/P` or `projects/P/zones/Z`) to the API's reason (a 404).
    """
    for node in sorted(refs):
        ref = refs[node]
        info = found.get(ref)
        if info is None:
            reason = failed.get(f"projects/{ref.project}/zones/{ref.zone}") or failed.get(f"projects/{ref.project}")
            discovery.problem(f"instance {ref}: {reason}" if reason else
                              f"instance {ref} not found (deleted, or a stale providerID)", node)
            continue
        try:
            discovery.paths[node] = topology_path(info, levels)
        except InputError as exc:
            discovery.problem(f"instance {ref} ({info.machine_type}, {info.status}) {exc}", node)


def node_refs(nodes: Sequence[Node], discovery: Discovery) -> dict[str, InstanceRef]:
    """Each node's instance from its providerID; nodes that are not GCE instances become problems."""
    refs: dict[str, InstanceRef] = {}
    for node in nodes:
        try:
            refs[node.name] = parse_provider_id(node.provider_id)
        except InputError as exc:
            discovery.problem(str(exc), node.name)
    return refs


def with_project(refs: Mapping[str, InstanceRef], default_project: str | None,
                 discovery: Discovery) -> dict[str, InstanceRef]:
    """Fill in the default project; a node without one, or sharing another's instance, is a problem."""
    out: dict[str, InstanceRef] = {}
    owner: dict[InstanceRef, str] = {}
    for node in sorted(refs):
        ref = refs[node]
        if not ref.project:
            if not default_project:
                discovery.problem(f"providerID gce:///{ref.zone}/{ref.name} names no project; give --project", node)
                continue
            ref = InstanceRef(default_project, ref.zone, ref.name)
        if ref in owner:
            discovery.problem(f"instance {ref} is also node {owner[ref]}'s; left as it is", node)
            continue
        owner[ref] = node
        out[node] = ref
    return out


# --- the client edge --------------------------------------------------------------------------------


def discover(ctx: SourceContext) -> Discovery:
    opts = parse_options(GcpOptions, ctx)
    levels = LEVELS + ((HOST,) if opts.host_level else ())
    discovery = Discovery(NAME, levels, local_names=True)
    parsed = node_refs(ctx.nodes, discovery)
    if not parsed:  # nothing to look up: no credentials needed
        return discovery
    client, adc_project = make_client(opts)
    refs = with_project(parsed, opts.project or adc_project, discovery)
    found, failed = fetch(client, plan_calls(refs.values()), set(refs.values()), ctx.progress)
    place(refs, found, failed, levels, discovery)
    return discovery


def make_client(opts: GcpOptions) -> tuple[Any, str | None]:
    """An InstancesClient over REST, and the project Application Default Credentials name (if any)."""
    import google.auth
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials, Credentials
    from google.auth.exceptions import DefaultCredentialsError
    from google.cloud import compute_v1

    credentials: Credentials
    project: str | None
    if opts.anonymous:
        credentials, project = AnonymousCredentials(), None
    else:
        try:
            credentials, project = google.auth.default(scopes=[READONLY_SCOPE])
        except DefaultCredentialsError as exc:
            raise SourceError(f"gcp: no Application Default Credentials ({exc}); run `gcloud auth "
                              "application-default login`, set GOOGLE_APPLICATION_CREDENTIALS, or use a "
                              "workload identity (--anonymous only for emulators)") from None
    client_options = ClientOptions(api_endpoint=opts.api_endpoint) if opts.api_endpoint else None
    client = compute_v1.InstancesClient(credentials=credentials, client_options=client_options, transport="rest")
    return client, project


def fetch(client: Any, calls: Sequence[ListCall], wanted: set[InstanceRef], progress: Progress = quiet
          ) -> tuple[dict[InstanceRef, InstanceInfo], dict[str, str]]:
    """Run the calls (in parallel, each following its pages); the instances asked for, and failed scopes."""
    found: dict[InstanceRef, InstanceInfo] = {}
    failed: dict[str, str] = {}
    if not calls:
        return found, failed
    task = progress("gcp: instance lists", len(calls))
    with ThreadPoolExecutor(max_workers=min(PARALLEL, len(calls))) as pool:
        for call, (instances, error) in zip(calls, pool.map(lambda c: list_call(client, c), calls)):
            task.advance()
            if error:
                failed[call.scope] = error
            for ref, info in instances:
                if ref in wanted:
                    found[ref] = info
    task.close()
    return found, failed


def list_call(client: Any, call: ListCall) -> tuple[list[tuple[InstanceRef, InstanceInfo]], str | None]:
    """One filtered list, every page. A 404 (no such zone or project) is returned as the reason, so the
    nodes there become problems; denied permission and other failures stop the run with one clear line."""
    from google.api_core import exceptions as gexc
    from google.auth.exceptions import GoogleAuthError
    from requests import RequestException

    try:
        return [(InstanceRef(call.project, zone, i.name), _info(i)) for zone, i in _instances(client, call)], None
    except gexc.NotFound as exc:
        return [], f"{call.scope} not found ({_reason(exc)})"
    except (gexc.Forbidden, gexc.PermissionDenied) as exc:
        raise SourceError(f"gcp: permission denied listing instances in {call.scope}: the credentials need "
                          f"{PERMISSION} (e.g. roles/compute.viewer) on the project ({_reason(exc)})") from None
    except gexc.Unauthorized as exc:
        raise SourceError(f"gcp: the credentials were rejected ({_reason(exc)})") from None
    except gexc.GoogleAPICallError as exc:
        raise SourceError(f"gcp: listing instances in {call.scope} failed: {exc.code} {_reason(exc)}") from None
    except gexc.RetryError as exc:
        raise SourceError(f"gcp: listing instances in {call.scope} kept failing: {exc.cause or exc}") from None
    except GoogleAuthError as exc:
        raise SourceError(f"gcp: the Compute API wants credentials and none could be had: {exc}") from None
    except RequestException as exc:
        cause = getattr(exc.args[0], "reason", None) if exc.args else None  # urllib3's, without the long URL
        raise SourceError(f"gcp: cannot reach the Compute API at {client.api_endpoint}: {cause or exc}") from None


def _instances(client: Any, call: ListCall) -> Iterator[tuple[str, Any]]:
    """(zone, instance) over every page of one list. Instances are the raw protobuf messages under the
    client's proto-plus wrappers, which would cost a third of the time for 10,000 instances."""
    from google.cloud import compute_v1

    fields = ZONAL_FIELDS if call.zone else AGGREGATED_FIELDS
    options = {"retry": _retry(), "timeout": TIMEOUT, "metadata": [("x-goog-fieldmask", fields)]}
    if call.zone:
        request = compute_v1.ListInstancesRequest(project=call.project, zone=call.zone, filter=call.filter,
                                                  max_results=PAGE_SIZE)
        for page in client.list(request=request, **options).pages:
            yield from ((call.zone, i) for i in compute_v1.InstanceList.pb(page).items)
        return
    request = compute_v1.AggregatedListInstancesRequest(project=call.project, filter=call.filter,
                                                        max_results=PAGE_SIZE)
    for page in client.aggregated_list(request=request, **options).pages:
        for scope, scoped in compute_v1.InstanceAggregatedList.pb(page).items.items():
            yield from ((scope.rpartition("/")[2], i) for i in scoped.instances)


def _info(instance: Any) -> InstanceInfo:
    """The fields topolabel needs from an Instance message (the API's JSON `subblock` is `.subblock`)."""
    topo = instance.resource_status.physical_host_topology
    return InstanceInfo(machine_type=instance.machine_type.rpartition("/")[2] or "unknown machine type",
                        status=instance.status or "unknown status",
                        topology={f: getattr(topo, f) for f in LEVELS + (HOST,)})


def _retry() -> Any:
    """Retry throttling and server errors with backoff; the list calls are reads, so safe to repeat."""
    from google.api_core import exceptions as gexc
    from google.api_core.retry import Retry, if_exception_type

    transient = if_exception_type(gexc.TooManyRequests, gexc.InternalServerError, gexc.BadGateway,
                                  gexc.ServiceUnavailable, gexc.GatewayTimeout)
    return Retry(predicate=transient, initial=0.5, maximum=10.0, multiplier=2.0, timeout=120.0)


def _reason(exc: Any) -> str:
    """The API's message without the request line the client prefixes (`GET https://...: `)."""
    message = str(getattr(exc, "message", "") or exc)
    return re.sub(r"^[A-Z]+ \S+: ", "", message)


SOURCE = Source(NAME, GcpOptions, add_arguments, discover)
