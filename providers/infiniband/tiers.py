"""Switch tiers, leaf groups and blocks of a fat tree, from the fabric and the hosts' HCAs.

Leaves are switches with host HCAs, spines connect leaves, cores are the switches above. Hosts attached to
the same set of leaves form a leaf group (one leaf in a classic fat tree; the eight rail leaves of a
scalable unit in a rail-optimised one). Leaf groups whose leaves share spines form a block (pod).

The grouping is by majority, so a host with a missing cable, a down HCA or an HCA without a name stays in
its group: each leaf's group is the leaf set most of its hosts attach to, and a host goes to the group
holding most of its links.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from itertools import compress, repeat
from operator import itemgetter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from .fabric import Fabric

_peer_of = itemgetter(0)  # of a port's (peer, peer port, cable)


@dataclass(frozen=True)
class Tiers:
    """Switches (fabric nodes) by tier."""

    leaves: frozenset[int]
    spines: frozenset[int]
    cores: frozenset[int]
    ranks: dict[int, int] = field(default_factory=dict, compare=False)
    empty: frozenset[int] = frozenset()  # leaves without hosts (among `leaves`)

    def __post_init__(self) -> None:
        for rank, members in enumerate((self.leaves, self.spines, self.cores), start=1):
            self.ranks.update(dict.fromkeys(members, rank))

    def rank(self, node: int) -> int:
        """0 for HCAs, then leaf 1, spine 2, core 3: an uplink goes to a higher rank."""
        return self.ranks.get(node, 0)

    def name(self, node: int) -> str:
        return ("hca", "leaf", "spine", "core")[self.rank(node)]

    def rank_list(self, nodes: int) -> list[int]:
        """Every node's rank by index, for lookups over whole columns."""
        ranks = [0] * nodes
        for node, rank in self.ranks.items():
            ranks[node] = rank
        return ranks


def classify(fabric: Fabric, hcas: Iterable[int]) -> Tiers:
    """Tiers from the switches cabled to host HCAs (`hcas`, fabric nodes) upwards; a leaf without hosts is
    still among the cores here, until `with_empty_leaves` knows the blocks."""
    hosts = set(hcas)
    ports = fabric.ports
    switches = {node for node, kind in enumerate(fabric.kinds) if kind == "switch"}
    leaves = frozenset(s for s in switches if not hosts.isdisjoint(map(_peer_of, ports[s].values())))
    peers: set[int] = set()
    for leaf in leaves:
        peers.update(map(_peer_of, ports[leaf].values()))
    spines = frozenset((peers & switches) - leaves)
    return Tiers(leaves, spines, frozenset(switches - leaves - spines))


def with_empty_leaves(fabric: Fabric, tiers: Tiers, block_of: dict[int, int]) -> Tiers:
    """Move leaves without hosts out of the cores (and into their block in `block_of`).

    Such a switch is cabled like a leaf and unlike a core: only to spines, all of one block (a core joins
    blocks), and only on ports that the block's leaves use for their uplinks (a core's ports are its own).
    """
    if not tiers.cores:
        return tiers
    uplinks: dict[int, set[int]] = defaultdict(set)
    spines = tiers.spines
    for leaf in tiers.leaves:
        ports = fabric.ports[leaf]
        uplinks[block_of[leaf]].update(compress(ports, map(spines.__contains__, map(_peer_of, ports.values()))))
    empty = set()
    for switch in tiers.cores:
        ports = fabric.ports[switch]
        peers = set(map(_peer_of, ports.values()))
        homes = {block_of[p] for p in peers if p in spines}
        if peers and peers <= spines and len(homes) == 1 and ports.keys() <= uplinks[next(iter(homes))]:
            empty.add(switch)
            block_of[switch] = next(iter(homes))
    if not empty:
        return tiers
    return Tiers(tiers.leaves | empty, tiers.spines, tiers.cores - empty, empty=frozenset(empty))


class _Union:
    """Union-find, the item first by `key` (a switch's GUID) as the representative for stable output."""

    def __init__(self, key: Callable[[int], int] = int) -> None:
        self.parent: dict = {}
        self.key = key

    def find(self, item):
        root = self.parent.setdefault(item, item)
        while root != self.parent[root]:
            root = self.parent[root]
        while item != root:
            self.parent[item], item = root, self.parent[item]
        return root

    def union(self, a, b) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            low, high = (ra, rb) if self.key(ra) < self.key(rb) else (rb, ra)
            self.parent[high] = low


def leaf_groups_of(fabric: Fabric, leaves: Iterable[int], host_of: Mapping[int, str]) -> LeafGroups:
    """The leaf groups of the hosts whose HCAs count (`host_of`: HCA node -> host, in HCA order).

    In a healthy fabric each leaf's hosts attach to exactly the leaves that reach those same hosts: then the
    groups are the classes of leaves reaching the same hosts, found leaf by leaf without visiting a host
    (`leaf_groups` would find the same). Anything else (a missing cable, a host across two units, storage
    leaves shared by all) is grouped by majority, host by host (`leaf_groups`)."""
    key = fabric.guids.__getitem__
    on_leaf: dict[int, frozenset[str]] = {}
    for leaf in leaves:
        hosts = set(map(host_of.get, map(_peer_of, fabric.ports[leaf].values())))
        hosts.discard(None)  # type: ignore[arg-type]
        if hosts:
            on_leaf[leaf] = frozenset(hosts)  # type: ignore[arg-type]
    classes: dict[frozenset[str], list[int]] = defaultdict(list)
    for leaf, hosts in on_leaf.items():
        classes[hosts].append(leaf)
    reached = set().union(*classes)
    if sum(map(len, classes)) != len(reached):  # some host's leaves are not one class's
        return leaf_groups(_host_links(fabric, on_leaf, host_of), key)
    result = LeafGroups({}, {}, {})
    width: dict[str, int] = {}
    for hosts, members in classes.items():
        group = min(members, key=key)
        result.group_of_leaf.update(dict.fromkeys(members, group))
        result.members[group] = frozenset(members)
        result.host_group.update(dict.fromkeys(hosts, group))
        width.update(dict.fromkeys(hosts, len(members)))
    # hosts by their first HCA, as `leaf_groups` counts them; a host reaching no leaf has none
    result.widths = Counter(map(width.get, dict.fromkeys(host_of.values()), repeat(0)))
    return result


def _host_links(fabric: Fabric, on_leaf: Mapping[int, frozenset[str]],
                host_of: Mapping[int, str]) -> dict[str, dict[int, int]]:
    """Each counted host's links per leaf (hosts in HCA order; a host cabled to no leaf has none)."""
    host_links: dict[str, dict[int, int]] = {host: {} for host in host_of.values()}
    for leaf in on_leaf:
        for peer, _, _ in fabric.ports[leaf].values():
            host = host_of.get(peer)
            if host is not None:
                counts = host_links[host]
                counts[leaf] = counts.get(leaf, 0) + 1
    return host_links


@dataclass
class LeafGroups:
    """Leaves -> group (the group's leaf of smallest GUID), and where each host goes."""

    group_of_leaf: dict[int, int]
    members: dict[int, frozenset[int]]
    host_group: dict[str, int]
    merged: dict[int, int] = field(default_factory=dict)  # group -> number of distinct leaf sets joined
    split: dict[str, Counter] = field(default_factory=dict)  # host -> links per group, when > 1 group
    missing: dict[str, frozenset[int]] = field(default_factory=dict)  # host -> group leaves it has no link to
    widths: Counter = field(default_factory=Counter)  # leaves a host reaches -> hosts, first counted first


def leaf_groups(host_links: Mapping[str, Mapping[int, int]], key: Callable[[int], int] = int) -> LeafGroups:
    """Group leaves by the leaf set most of their hosts attach to, then place each host by majority.

    `host_links[host]` counts the host's links per leaf; `key` orders leaves (their GUIDs). Leaf sets of
    different leaves that overlap (a storage leaf shared by every compute group) are joined into one group
    and reported in `merged`.
    """
    sets = {host: frozenset(links) for host, links in host_links.items() if links}
    seen: dict[int, Counter] = defaultdict(Counter)
    for leaves in sets.values():
        for leaf in leaves:
            seen[leaf][leaves] += 1
    uf = _Union(key)
    canonical: dict[int, frozenset[int]] = {}
    for leaf, counts in seen.items():
        canonical[leaf] = max(counts, key=lambda s: (counts[s], len(s), sorted(map(key, s))))
        for other in canonical[leaf]:
            uf.union(leaf, other)
    group_of_leaf = {leaf: uf.find(leaf) for leaf in seen}
    members: dict[int, set[int]] = defaultdict(set)
    joined: dict[int, set[frozenset[int]]] = defaultdict(set)
    for leaf, group in group_of_leaf.items():
        members[group].add(leaf)
        joined[group].add(canonical[leaf])
    result = LeafGroups(group_of_leaf, {g: frozenset(m) for g, m in members.items()}, {},
                        widths=Counter(map(len, host_links.values())))
    # Leaf sets inside one another are one unit seen partly (hosts short of a rail); others overlap.
    result.merged = {g: len(sets_) for g, sets_ in joined.items()
                     if any(not s <= max(sets_, key=len) for s in sets_)}
    expected = {g: frozenset().union(*sets_) if g not in result.merged else frozenset()
                for g, sets_ in joined.items()}
    for host, links in sorted(host_links.items()):
        if not links:
            continue
        group = _host_group(links, group_of_leaf, host, result.split, key)
        result.host_group[host] = group
        if not expected[group] <= sets[host]:
            result.missing[host] = expected[group] - sets[host]
    return result


def _host_group(links: Mapping[int, int], group_of_leaf: Mapping[int, int], host: str,
                split: dict[str, Counter], key: Callable[[int], int]) -> int:
    """The group holding most of a host's links (on a tie the first by `key`); a host cabled to several groups
    goes into `split`. Nearly every host reaches one group, which needs no counting."""
    first = group_of_leaf[next(iter(links))]
    if all(group_of_leaf[leaf] == first for leaf in links):
        return first
    per_group: Counter = Counter()
    for leaf, count in links.items():
        per_group[group_of_leaf[leaf]] += count
    split[host] = per_group
    return max(per_group, key=lambda g: (per_group[g], -key(g)))


@dataclass
class Blocks:
    """Switch -> block (its switch of smallest GUID) for leaves and spines, and the single cables left out
    because each alone would have joined two pods: (leaf, spine)."""

    of: dict[int, int]
    stray: list[tuple[int, int]] = field(default_factory=list)


def blocks(fabric: Fabric, tiers: Tiers, groups: LeafGroups) -> Blocks:
    """Leaves and spines joined by leaf-spine cables and by leaf groups, except a single cable that alone
    would join two pods: a bridge whose sides both hold leaves and spines (a leaf cabled to another pod's
    spine must not make one block of two)."""
    spines = tiers.spines
    uplinks = {leaf: Counter(filter(spines.__contains__, map(_peer_of, fabric.ports[leaf].values())))
               for leaf in tiers.leaves}
    if not any(1 in counts.values() for counts in uplinks.values()):
        return Blocks(_joined(fabric, uplinks, groups))  # no single cable, so none is stray
    links: list[tuple[int, int]] = []
    cables: dict[frozenset[int], int] = {}
    for leaf, counts in uplinks.items():
        for spine, count in counts.items():
            links.append((leaf, spine))
            cables[frozenset((leaf, spine))] = count
    key = fabric.guids.__getitem__
    for leaves in groups.members.values():
        first = min(leaves, key=key)
        links.extend((first, leaf) for leaf in leaves if leaf != first)
    stray = _stray_cables(links, cables, tiers)
    apart = {frozenset(cable) for cable in stray}
    parts = _Union(key)
    for switch in tiers.leaves:
        parts.find(switch)
    for a, b in links:
        if apart and frozenset((a, b)) in apart:
            parts.find(a)  # left apart, each still in a block of its own side
            parts.find(b)
        else:
            parts.union(a, b)
    of = {switch: parts.find(switch) for switch in parts.parent}
    return Blocks(of, sorted(((a, b) if a in tiers.leaves else (b, a) for a, b in stray),
                             key=lambda pair: (key(pair[0]), key(pair[1]))))


def _joined(fabric: Fabric, uplinks: Mapping[int, Counter], groups: LeafGroups) -> dict[int, int]:
    """Switch -> block for leaves and their spines: what joining every leaf-spine cable and every leaf group
    gives, found by joining leaves that reach the same spines as one (a pod's leaves usually all do) and
    those classes by the spines and groups they share, not cable by cable."""
    key = fabric.guids.__getitem__
    parts = _Union(key)
    classes: dict[frozenset[int], list[int]] = defaultdict(list)
    for leaf, counts in uplinks.items():
        parts.find(leaf)
        if counts:
            classes[frozenset(counts)].append(leaf)
    first_leaf: dict[int, int] = {}  # spine -> a leaf cabled to it
    for spine_set, leaves in classes.items():
        for leaf in leaves[1:]:
            parts.union(leaves[0], leaf)
        for spine in spine_set:
            parts.union(first_leaf.setdefault(spine, leaves[0]), leaves[0])
    for members in groups.members.values():
        first = next(iter(members))
        for leaf in members:
            parts.union(first, leaf)
    blocks: dict[int, list[int]] = defaultdict(list)
    for leaf in uplinks:
        blocks[parts.find(leaf)].append(leaf)
    for spine, leaf in first_leaf.items():
        blocks[parts.find(leaf)].append(spine)
    of: dict[int, int] = {}
    for members in blocks.values():
        of.update(dict.fromkeys(members, min(members, key=key)))
    return of


def _stray_cables(links: list[tuple[int, int]], cables: Mapping[frozenset[int], int],
                  tiers: Tiers) -> list[tuple[int, int]]:
    """Single leaf-spine cables that are bridges with leaves and spines on both sides.

    The sides are counted on the bridge tree (2-edge-connected pieces joined by bridges), so each bridge
    costs no walk of its own. Only a single cable can be one, so without them networkx is not even loaded.
    """
    if 1 not in cables.values():
        return []
    import networkx as nx  # bridges and the bridge tree: only for fabrics with single leaf-spine cables

    graph = nx.Graph(links)
    graph.add_nodes_from(tiers.leaves)
    bridges = list(nx.bridges(graph))
    single = [(a, b) for a, b in bridges if cables.get(frozenset((a, b))) == 1]
    if not single:
        return []
    pieces = graph.copy()
    pieces.remove_edges_from(bridges)
    piece = {node: i for i, part in enumerate(nx.connected_components(pieces)) for node in part}
    weight: Counter = Counter()
    for node, i in piece.items():
        weight[(i, node in tiers.leaves)] += 1
    tree = nx.Graph((piece[a], piece[b]) for a, b in bridges)
    below: dict[int, tuple[int, int]] = {}  # piece -> (leaves, spines) in its subtree
    parent: dict[int, int] = {}
    totals: dict[int, tuple[int, int]] = {}
    for root in [min(c) for c in nx.connected_components(tree)]:
        order = list(nx.dfs_preorder_nodes(tree, root))
        parent.update({child: par for par, child in nx.dfs_edges(tree, root)})
        for i in reversed(order):
            kids = [below[k] for k in tree.neighbors(i) if parent.get(k) == i]
            below[i] = (weight[(i, True)] + sum(k[0] for k in kids), weight[(i, False)] + sum(k[1] for k in kids))
        for i in order:
            totals[i] = below[root]
    stray = []
    for a, b in single:
        child = piece[a] if parent.get(piece[a]) == piece[b] else piece[b]
        inner, whole = below[child], totals[child]
        outer = (whole[0] - inner[0], whole[1] - inner[1])
        if min(inner) > 0 and min(outer) > 0:
            stray.append((a, b))
    return stray
