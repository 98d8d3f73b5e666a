"""From a fabric and who owns which HCA to a Discovery: levels, each node's path, and problems.

Pure: the fabric, the nodes and the GUID map in; the Discovery out. The structure (tiers, leaf groups,
blocks) is inferred from every host in the fabric, requested or not, so a leaf whose hosts were not asked
for stays a leaf; only then are the requested nodes read off.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from itertools import compress
from typing import Callable, Sequence

from labeler.errors import SourceError
from labeler.gcpause import paused_gc
from labeler.io.nodes import Node
from labeler.topology.model import Discovery

from .options import ANNOTATION
from .fabric import Fabric
from .health import missing_uplinks, slow_links
from .hosts import GuidMap, Hcas, assign_owners, host_hcas, links, name_resolver
from .names import natural_key, switch_names, unique_names
from .tiers import Blocks, LeafGroups, Tiers, blocks, classify, leaf_groups_of, with_empty_leaves

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

    hcas: Hcas
    aggregation: int  # SHARP aggregation nodes left out
    contested: list[tuple[str, str]]  # (node, why) of each node in a contested claim on an HCA
    tiers: Tiers
    names: dict[int, str]  # switch node -> readable name
    host_of: dict[int, str]  # HCA node -> host, for the HCAs with a host that the request counts (GUID order)
    groups: LeafGroups
    blocks: Blocks


def survey(fabric: Fabric, request: Request) -> Survey:
    """Tiers, leaf groups and blocks from every host in the fabric, requested or not, so a leaf whose hosts
    were not asked for stays a leaf."""
    hcas, aggregation = host_hcas(fabric)
    if "switch" not in fabric.kinds:
        raise SourceError(_no_switches(request.origin, hcas))
    contested = assign_owners(hcas, fabric, request.guids or GuidMap(), name_resolver(request.nodes))
    tiers = classify(fabric, hcas.nodes)
    names = switch_names({node: fabric.descs[node] for node, kind in enumerate(fabric.kinds) if kind == "switch"},
                         fabric.guids)
    host_of = hcas.counted(request.pattern)
    groups = leaf_groups_of(fabric, tiers.leaves, host_of)
    found_blocks = blocks(fabric, tiers, groups)
    tiers = with_empty_leaves(fabric, tiers, found_blocks.of)
    return Survey(hcas, aggregation, contested, tiers, names, host_of, groups, found_blocks)


@paused_gc()
def place(fabric: Fabric, request: Request) -> Discovery:
    seen = survey(fabric, request)
    hcas, aggregation, contested, tiers, names = seen.hcas, seen.aggregation, seen.contested, seen.tiers, seen.names
    host_of, groups, found_blocks = seen.host_of, seen.groups, seen.blocks
    guids = request.guids or GuidMap()
    block_of = found_blocks.of
    leaf_blocks = {block_of[leaf] for leaf in tiers.leaves}
    three_level = bool(tiers.cores) and len(leaf_blocks) > 1
    key = fabric.guids.__getitem__
    group_names = unique_names({str(key(g)): [names[leaf] for leaf in m] for g, m in groups.members.items()})
    group_name = {g: group_names[str(key(g))] for g in groups.members}
    block_names = _block_names(block_of, tiers, names, key) if three_level else {}

    found = Discovery(request.source, ("block", "leafgroup") if three_level else ("leafgroup",))
    found.problem(_shape(tiers, leaf_blocks, three_level, groups, hcas, host_of, aggregation))
    for node, message in contested:
        found.problem(message, node, claim=True)
    for node, message in guids.errors:
        found.problem(message, node)
    _report_unknown(found, fabric, hcas, names)
    wanted = {n.name for n in request.nodes} if request.nodes else None
    _report_groups(found, groups, names, group_name, wanted, key)
    group_paths = {}  # one path per leaf group holding hosts, shared by them
    for group in set(groups.host_group.values()):
        path = (group_name[group],)
        group_paths[group] = (block_names[block_of[group]], *path) if three_level else path
    paths = {host: group_paths[group] for host, group in groups.host_group.items()}
    claimants = {node for node, _ in contested}
    _read_off(found, {host: path for host, path in paths.items() if host not in claimants}, hcas, request, claimants)
    slow = slow_links(fabric, tiers, names)
    placed = {node: host for node, host in zip(hcas.nodes, hcas.hosts) if host in found.paths} if slow else {}
    for message, hca_nodes in slow:
        found.problem(message, next((placed[n] for n in hca_nodes if n in placed), None))
    for message in missing_uplinks(fabric, tiers, block_of, names, block_names):
        found.problem(message)
    for leaf, spine in found_blocks.stray:
        leaf_port, (_, spine_port, _) = min(((port, end) for port, end in fabric.ports[leaf].items() if end[0] == spine),
                                            key=lambda port_end: port_end[1][2])  # its first cable to the spine
        found.problem(f"leaf {names[leaf]} port {leaf_port} - spine {names[spine]} port {spine_port} is the only "
                      "cable between two pods; it does not join them into one block (miscabled?)")
    return found


def _no_switches(origin: str, hcas: Hcas) -> str:
    seen = ", ".join(f"{hcas.descs[i]!r} (0x{hcas.guids[i]:016x})" for i in range(min(3, len(hcas)))) or "nothing"
    return (f"{origin}: no switch in the fabric; the discovery saw only {seen}, so it yields no topology. "
            "The HCA it ran from is not cabled to a switch, its port is down, or no subnet manager brought "
            "it up: run ibnetdiscover from a host whose port is Active (ibstat), or pick another HCA with -C")


def _block_names(block_of: dict[int, int], tiers: Tiers, names: dict[int, str], key: Callable[[int], int]) -> dict[int, str]:
    """A block is named after its spines (or its leaves when it has no spine); names two blocks share are told
    apart by a hash of the block's GUID."""
    spines: dict[int, list[str]] = defaultdict(list)
    leaves: dict[int, list[str]] = defaultdict(list)
    for switch, block in block_of.items():
        (spines if switch in tiers.spines else leaves)[block].append(names[switch])
    named = unique_names({str(key(b)): spines.get(b) or leaves[b] for b in set(block_of.values())})
    return {b: named[str(key(b))] for b in set(block_of.values())}


def _shape(tiers: Tiers, leaf_blocks: set[int], three_level: bool, groups: LeafGroups, hcas: Hcas,
           host_of: dict[int, str], aggregation: int) -> str:
    empty = f" ({len(tiers.empty)} without hosts)" if tiers.empty else ""
    counts = f"{len(tiers.leaves)} leaves{empty}, {len(tiers.spines)} spines"
    if three_level:
        shape = f"3-level fat tree ({counts}, {len(tiers.cores)} cores; {len(leaf_blocks)} blocks): levels block > leafgroup"
    elif tiers.cores:
        shape = (f"switches above the spines but every leaf in one block ({counts}, {len(tiers.cores)} more): "
                 "treated as 2-level, one level leafgroup")
    else:
        shape = f"2-level fat tree ({counts}): one level leafgroup"
    if groups.widths and groups.widths.most_common(1)[0][0] > 1:
        leaves_per_host = groups.widths.most_common(1)[0][0]
        shape += (f"; rail-optimised: most hosts attach to {leaves_per_host} leaves, and hosts on the same "
                  f"leaves form one leafgroup (scalable unit)")
    used = set(compress(hcas.devices, map(host_of.__contains__, hcas.nodes)))  # whole columns: 8,192 HCAs
    devices = sorted(filter(None, used), key=natural_key)
    shape += f"; {len(groups.host_group)} hosts in {len(groups.members)} leafgroups"
    if devices:
        more = f" and {len(devices) - 16} more" if len(devices) > 16 else ""
        shape += f"; HCAs used: {', '.join(devices[:16])}{more}"
    if aggregation:
        shape += f"; {aggregation} SHARP aggregation nodes ignored"
    return "fabric shape: " + shape


def _leaf(fabric: Fabric, node: int, names: dict[int, str]) -> str:
    return ", ".join(f"leaf {names[s]} port {p}" for s, p, _ in links(fabric, node)) or "no switch link"


def _report_unknown(found: Discovery, fabric: Fabric, hcas: Hcas, names: dict[int, str]) -> None:
    for i, host in enumerate(hcas.hosts):
        if host is None:
            found.problem(f"{hcas.label(i)} on {_leaf(fabric, hcas.nodes[i], names)}: host unknown "
                          f"({hcas.unknown[i]}); {MAP_HINT}")


def _report_groups(found: Discovery, groups: LeafGroups, names: dict[int, str], group_name: dict[int, str],
                   wanted: set[str] | None, key: Callable[[int], int]) -> None:
    """Groups joined by shared leaves, and hosts cabled oddly; a host that is not a requested node is only
    counted in the notice about fabric hosts outside the cluster."""
    for group, count in sorted(groups.merged.items(), key=lambda item: key(item[0])):
        found.problem(f"leafgroup {group_name[group]} joins {count} different leaf sets that share leaves "
                      "(HCAs on another network, e.g. storage, in the same fabric?); select the compute HCAs "
                      "with --hca-pattern, or leave the storage switches out with --ib-exclude")
    for host, per_group in sorted(groups.split.items()):
        if wanted is not None and host not in wanted:
            continue
        chosen = groups.host_group[host]
        others = ", ".join(f"{group_name[g]} ({n})" for g, n in sorted(per_group.items(), key=lambda item: key(item[0]))
                           if g != chosen)
        found.problem(f"HCAs span leafgroups: placed in {group_name[chosen]} ({per_group[chosen]} links), "
                      f"also cabled to {others} (miscabled?)", host)
    for host, leaves in sorted(groups.missing.items()):
        if wanted is not None and host not in wanted:
            continue
        missing = ", ".join(sorted(names[leaf] for leaf in leaves))
        found.problem(f"no link to leaf {missing} of its leafgroup {group_name[groups.host_group[host]]} "
                      "(cable missing, HCA or port down, or HCA not mapped); placed by its other links", host)


def _read_off(found: Discovery, paths: dict[str, tuple[str, ...]], hcas: Hcas, request: Request,
              claimants: set[str]) -> None:
    """The requested nodes' paths; nodes without a placed HCA and fabric hosts outside the cluster are problems.
    Nodes in a contested claim are left as they are (their claim problems say why)."""
    if not request.nodes:
        found.paths.update(paths)
        return
    owned: dict[str, list[int]] = defaultdict(list)
    for i, host in enumerate(hcas.hosts):
        if host:
            owned[host].append(i)
    guids = request.guids or GuidMap()
    for node in request.nodes:
        if node.name in claimants:
            continue
        if node.name in paths:
            found.paths[node.name] = paths[node.name]
        elif owned.get(node.name):
            devices = ", ".join(sorted(hcas.devices[i] or f"0x{hcas.guids[i]:016x}" for i in owned[node.name]))
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
