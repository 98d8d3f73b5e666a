"""From a fabric and who owns which HCA to a Discovery: levels, each node's path, and problems.

Pure: the fabric, the nodes and the GUID map in; the Discovery out. The structure (tiers, leaf groups,
blocks) is inferred from every host in the fabric, requested or not, so a leaf whose hosts were not asked
for stays a leaf; only then are the requested nodes read off.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Sequence

from labeler.errors import SourceError
from labeler.gcpause import paused_gc
from labeler.model import Discovery
from labeler.nodes import Node

from .options import ANNOTATION
from .fabric import Fabric
from .health import missing_uplinks, slow_links
from .hosts import GuidMap, Hca, assign_owners, host_hcas, name_resolver
from .names import natural_key, switch_names, unique_names
from .tiers import Blocks, LeafGroups, Tiers, blocks, classify, leaf_groups, with_empty_leaves

NAME = "infiniband"
MAX_LISTED = 20  # fabric hosts named in the notice about hosts outside the cluster
MAP_HINT = f"map its GUID with --guid-map, --node-name-map or the {ANNOTATION} node annotation"


@dataclass(frozen=True)
class Request:
    """What to place: Kubernetes nodes (empty: every host in the fabric), GUIDs, which HCAs count, and who read
    the fabric from where."""

    nodes: Sequence[Node] = ()
    guids: GuidMap | None = None
    pattern: re.Pattern | None = None
    origin: str = "ibnetdiscover"
    source: str = NAME


@dataclass
class Survey:
    """The fabric read as a fat tree: host HCAs and their owners, switch tiers and names, leaf groups, blocks."""

    hcas: list[Hca]
    aggregation: int  # SHARP aggregation nodes left out
    contested: list[tuple[str, str]]  # (node, why) of each node in a contested claim on an HCA
    tiers: Tiers
    names: dict[int, str]  # switch GUID -> readable name
    selected: list[Hca]  # HCAs with a host that the request counts
    host_links: dict[str, dict[int, int]]
    groups: LeafGroups
    blocks: Blocks


def survey(fabric: Fabric, request: Request) -> Survey:
    """Tiers, leaf groups and blocks from every host in the fabric, requested or not, so a leaf whose hosts
    were not asked for stays a leaf."""
    hcas, aggregation = host_hcas(fabric)
    if not any(data["kind"] == "switch" for data in fabric.nodes.values()):
        raise SourceError(_no_switches(request.origin, hcas))
    contested = assign_owners(hcas, request.guids or GuidMap(), name_resolver(request.nodes))
    tiers = classify(fabric, (link[0] for h in hcas for link in h.links))
    names = switch_names({g: d["desc"] for g, d in fabric.nodes.items() if d["kind"] == "switch"})
    selected = [h for h in hcas if h.host and _wanted(h, request.pattern)]
    host_links = _host_links(selected)
    groups = leaf_groups(host_links)
    found_blocks = blocks(fabric, tiers, groups)
    tiers = with_empty_leaves(fabric, tiers, found_blocks.of)
    return Survey(hcas, aggregation, contested, tiers, names, selected, host_links, groups, found_blocks)


@paused_gc()
def place(fabric: Fabric, request: Request) -> Discovery:
    seen = survey(fabric, request)
    hcas, aggregation, contested, tiers, names = seen.hcas, seen.aggregation, seen.contested, seen.tiers, seen.names
    selected, host_links, groups, found_blocks = seen.selected, seen.host_links, seen.groups, seen.blocks
    guids = request.guids or GuidMap()
    block_of = found_blocks.of
    leaf_blocks = {block_of[leaf] for leaf in tiers.leaves}
    three_level = bool(tiers.cores) and len(leaf_blocks) > 1
    group_names = unique_names({str(g): [names[leaf] for leaf in m] for g, m in groups.members.items()})
    block_names = _block_names(block_of, tiers, names) if three_level else {}

    found = Discovery(request.source, ("block", "leafgroup") if three_level else ("leafgroup",))
    found.problem(_shape(tiers, leaf_blocks, three_level, host_links, groups, selected, aggregation))
    for node, message in contested:
        found.problem(message, node, claim=True)
    for node, message in guids.errors:
        found.problem(message, node)
    _report_unknown(found, hcas, names)
    wanted = {n.name for n in request.nodes} if request.nodes else None
    _report_groups(found, groups, names, group_names, wanted)
    group_paths = {}  # one path per leaf group holding hosts, shared by them
    for group in set(groups.host_group.values()):
        path = (group_names[str(group)],)
        group_paths[group] = (block_names[block_of[min(groups.members[group])]], *path) if three_level else path
    paths = {host: group_paths[group] for host, group in groups.host_group.items()}
    claimants = {node for node, _ in contested}
    _read_off(found, {host: path for host, path in paths.items() if host not in claimants}, hcas, request, claimants)
    placed = {h.guid: h.host for h in hcas if h.host in found.paths}
    for message, hca_guids in slow_links(fabric, tiers, names):
        found.problem(message, next((placed[g] for g in hca_guids if g in placed), None))
    for message in missing_uplinks(fabric, tiers, block_of, names, block_names):
        found.problem(message)
    for leaf, spine in found_blocks.stray:
        ports = fabric.between(leaf, spine)[0]["ends"]
        found.problem(f"leaf {names[leaf]} port {ports[leaf]} - spine {names[spine]} port {ports[spine]} is the only "
                      "cable between two pods; it does not join them into one block (miscabled?)")
    return found


def _host_links(hcas: Sequence[Hca]) -> dict[str, dict[int, int]]:
    """Each host's links per leaf, leaves in the order first seen (plain dicts: a Counter per host cost more
    than the counting, at 8,192 hosts)."""
    host_links: dict[str, dict[int, int]] = {}
    for hca in hcas:
        counts = host_links.setdefault(hca.host, {})  # type: ignore[arg-type]
        for leaf, _, _ in hca.links:
            counts[leaf] = counts.get(leaf, 0) + 1
    return host_links


def _wanted(hca: Hca, pattern: re.Pattern | None) -> bool:
    """An HCA counts when it matches the pattern; one whose device name is unknown counts too."""
    return pattern is None or hca.device is None or bool(pattern.search(hca.device))


def _no_switches(origin: str, hcas: Sequence[Hca]) -> str:
    seen = ", ".join(f"{h.desc!r} (0x{h.guid:016x})" for h in hcas[:3]) or "nothing"
    return (f"{origin}: no switch in the fabric; the discovery saw only {seen}, so it yields no topology. "
            "The HCA it ran from is not cabled to a switch, its port is down, or no subnet manager brought "
            "it up: run ibnetdiscover from a host whose port is Active (ibstat), or pick another HCA with -C")


def _block_names(block_of: dict[int, int], tiers: Tiers, names: dict[int, str]) -> dict[int, str]:
    """A block is named after its spines (or its leaves when it has no spine)."""
    spines: dict[int, list[str]] = defaultdict(list)
    leaves: dict[int, list[str]] = defaultdict(list)
    for switch, block in block_of.items():
        (spines if switch in tiers.spines else leaves)[block].append(names[switch])
    named = unique_names({str(b): spines.get(b) or leaves[b] for b in set(block_of.values())})
    return {int(b): name for b, name in named.items()}


def _shape(tiers: Tiers, leaf_blocks: set[int], three_level: bool, host_links: dict[str, dict[int, int]],
           groups: LeafGroups, selected: Sequence[Hca], aggregation: int) -> str:
    empty = f" ({len(tiers.empty)} without hosts)" if tiers.empty else ""
    counts = f"{len(tiers.leaves)} leaves{empty}, {len(tiers.spines)} spines"
    if three_level:
        shape = f"3-level fat tree ({counts}, {len(tiers.cores)} cores; {len(leaf_blocks)} blocks): levels block > leafgroup"
    elif tiers.cores:
        shape = (f"switches above the spines but every leaf in one block ({counts}, {len(tiers.cores)} more): "
                 "treated as 2-level, one level leafgroup")
    else:
        shape = f"2-level fat tree ({counts}): one level leafgroup"
    widths = Counter(len(links) for links in host_links.values())
    if widths and widths.most_common(1)[0][0] > 1:
        leaves_per_host = widths.most_common(1)[0][0]
        shape += (f"; rail-optimised: most hosts attach to {leaves_per_host} leaves, and hosts on the same "
                  f"leaves form one leafgroup (scalable unit)")
    devices = sorted({h.device for h in selected if h.device}, key=natural_key)
    shape += f"; {len(groups.host_group)} hosts in {len(groups.members)} leafgroups"
    if devices:
        more = f" and {len(devices) - 16} more" if len(devices) > 16 else ""
        shape += f"; HCAs used: {', '.join(devices[:16])}{more}"
    if aggregation:
        shape += f"; {aggregation} SHARP aggregation nodes ignored"
    return "fabric shape: " + shape


def _leaf(hca: Hca, names: dict[int, str]) -> str:
    return ", ".join(f"leaf {names[s]} port {p}" for s, p, _ in hca.links) or "no switch link"


def _report_unknown(found: Discovery, hcas: Sequence[Hca], names: dict[int, str]) -> None:
    for hca in hcas:
        if hca.host is None:
            found.problem(f"{hca.label} on {_leaf(hca, names)}: host unknown ({hca.unknown}); {MAP_HINT}")


def _report_groups(found: Discovery, groups: LeafGroups, names: dict[int, str], group_names: dict[str, str],
                   wanted: set[str] | None) -> None:
    """Groups joined by shared leaves, and hosts cabled oddly; a host that is not a requested node is only
    counted in the notice about fabric hosts outside the cluster."""
    for group, count in sorted(groups.merged.items()):
        found.problem(f"leafgroup {group_names[str(group)]} joins {count} different leaf sets that share leaves "
                      "(HCAs on another network, e.g. storage, in the same fabric?); select the compute HCAs "
                      "with --hca-pattern, or leave the storage switches out with --ib-exclude")
    for host, per_group in sorted(groups.split.items()):
        if wanted is not None and host not in wanted:
            continue
        chosen = groups.host_group[host]
        others = ", ".join(f"{group_names[str(g)]} ({n})" for g, n in sorted(per_group.items()) if g != chosen)
        found.problem(f"HCAs span leafgroups: placed in {group_names[str(chosen)]} ({per_group[chosen]} links), "
                      f"also cabled to {others} (miscabled?)", host)
    for host, leaves in sorted(groups.missing.items()):
        if wanted is not None and host not in wanted:
            continue
        missing = ", ".join(sorted(names[leaf] for leaf in leaves))
        found.problem(f"no link to leaf {missing} of its leafgroup {group_names[str(groups.host_group[host])]} "
                      "(cable missing, HCA or port down, or HCA not mapped); placed by its other links", host)


def _read_off(found: Discovery, paths: dict[str, tuple[str, ...]], hcas: Sequence[Hca], request: Request,
              claimants: set[str]) -> None:
    """The requested nodes' paths; nodes without a placed HCA and fabric hosts outside the cluster are problems.
    Nodes in a contested claim are left as they are (their claim problems say why)."""
    if not request.nodes:
        found.paths.update(paths)
        return
    owned: dict[str, list[Hca]] = defaultdict(list)
    for hca in hcas:
        if hca.host:
            owned[hca.host].append(hca)
    guids = request.guids or GuidMap()
    for node in request.nodes:
        if node.name in claimants:
            continue
        if node.name in paths:
            found.paths[node.name] = paths[node.name]
        elif owned.get(node.name):
            devices = ", ".join(sorted(h.device or f"0x{h.guid:016x}" for h in owned[node.name]))
            found.problem(f"none of its HCAs ({devices}) match --hca-pattern {request.pattern.pattern!r}"
                          if request.pattern else f"its HCAs ({devices}) reach no leaf switch", node.name)
        else:
            mapped = len(guids.by_node.get(node.name, ()))
            hint = (f"none of its {mapped} mapped GUID(s) is in the fabric" if mapped
                    else f"no HCA description names it and no GUID is mapped to it; {MAP_HINT}")
            found.problem(f"no HCA in the InfiniBand fabric {request.origin}: {hint}", node.name)
    names = {n.name for n in request.nodes}
    outside = sorted(set(paths) - names - claimants, key=natural_key)
    if outside:
        listed = ", ".join(outside[:MAX_LISTED]) + (f" and {len(outside) - MAX_LISTED} more"
                                                     if len(outside) > MAX_LISTED else "")
        found.problem(f"{len(outside)} fabric host(s) are not Kubernetes nodes (UFM, storage, management, or not "
                      f"yet joined), so they are not placed: {listed}")
