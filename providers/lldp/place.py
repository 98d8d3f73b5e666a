"""Placement from LLDP facts (pure): each host under the switch its data-plane ports hear, racks under blocks.

A host's rack is the switch its data-plane ports hear, or the switch pair when the two switches are known
to serve the same hosts (an MLAG pair, named `leaf-r01_leaf-r02`: '+' is not allowed in label values).
Pairs come from a switch map or the switches' facts; with neither, from the hosts: switches that several
hosts hear together, and no host pairs with another switch, serve one rack whether or not they run MLAG.
What sits above the racks comes from a `Fabric`: a switch map, or the switches' own LLDP facts, where
leaves that hear each other are MLAG peers and leaves that share a spine share a block.

A host's facts are its own claim (the agent on it writes them), so no host's claim may move another: a switch
set only one host hears does not stop the other hosts' pair being inferred (that host alone is refused), and a
switch name that several chassis send belongs to the chassis most hosts hear under it (the hosts hearing it
from another chassis are refused; on a tie, all of them). Such refused hosts are problems marked as claims.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from labeler.errors import SourceError
from labeler.topology.model import Discovery

from .facts import Neighbor

RACK = "rack"
BLOCK = "block"
PAIR_JOIN = "_"
# Management and out-of-band ports, by interface name. Not `enp..s..f..`: ConnectX data ports are named so.
DEFAULT_MGMT = r"(?i)^(eno[0-9]|mgmt|management|ipmi|bmc|idrac|ilo|oob)"


@dataclass
class Fabric:
    """What sits above the racks: level names (coarsest first), the path above each switch, and the
    groups of switches (MLAG pairs) that serve the same hosts. `origin` names the input in messages.
    `infer_pairs`: nothing says which switches are pairs (no map, no switch facts), so pairs are inferred
    from the hosts (`infer_pairs`)."""

    levels: tuple[str, ...] = ()
    paths: dict[str, tuple[str, ...]] = field(default_factory=dict)
    pairs: list[frozenset[str]] = field(default_factory=list)
    origin: str = ""
    unknown: str = "is not listed"
    problems: list[str] = field(default_factory=list)
    infer_pairs: bool = False

    def above(self, rack: frozenset[str]) -> tuple[str, ...] | str:
        """The path above a rack, or why there is none (a member unknown, members that disagree)."""
        if not self.levels:
            return ()
        missing = sorted(s for s in rack if s not in self.paths)
        if missing:
            return f"switch {', '.join(missing)} {self.unknown} ({self.origin})"
        found = {s: self.paths[s] for s in sorted(rack)}
        if len(set(found.values())) > 1:
            where = "; ".join(f"{s} in {'/'.join(p)}" for s, p in found.items())
            return f"the members of {rack_name(rack)} sit in different places: {where} ({self.origin})"
        return next(iter(found.values()))


def rack_name(rack: Iterable[str]) -> str:
    return PAIR_JOIN.join(sorted(rack))


def split_ports(neighbors: Iterable[Neighbor], mgmt: re.Pattern[str]) -> tuple[list[Neighbor], list[Neighbor]]:
    """(data-plane neighbours, management neighbours) by the local interface name."""
    data: list[Neighbor] = []
    excluded: list[Neighbor] = []
    for n in neighbors:
        (excluded if mgmt.search(n.interface) else data).append(n)
    return data, excluded


def aliases(hosts: Mapping[str, Sequence[Neighbor]]) -> dict[str, str]:
    """Chassis id (lower case) -> the switch identity hosts hear, so inputs may name switches either way."""
    return {n.chassis_id.lower(): n.switch for ns in hosts.values() for n in ns if n.chassis_id}


def place(hosts: Mapping[str, Sequence[Neighbor]], fabric: Fabric, mgmt: re.Pattern[str],
          source: str = "lldp") -> Discovery:
    """Each host's path (fabric levels, then rack); hosts that cannot be placed become problems."""
    discovery = Discovery(source, fabric.levels + (RACK,))
    for message in fabric.problems:
        discovery.problem(message)
    refused = _contested_names(hosts, mgmt, discovery)
    hosts = {h: ns for h, ns in hosts.items() if h not in refused}
    inferred = infer_pairs(hosts, mgmt) if fabric.infer_pairs else InferredPairs()
    for pair, count in inferred.pairs.items():
        discovery.problem(f"pair {rack_name(pair)} inferred from {count} hosts that hear exactly these switches "
                          "on their data-plane ports (no switch map or switch facts)")
    group = {s: pair for pair in [*fabric.pairs, *inferred.pairs] for s in pair}
    for host in sorted(hosts):
        data, excluded = split_ports(hosts[host], mgmt)
        if not data:
            skipped = f"; management port(s) excluded: {', '.join(n.describe() for n in excluded)}" if excluded else ""
            discovery.problem(f"no LLDP neighbour on a data-plane port{skipped}", host)
            continue
        switches = {n.switch for n in data}
        racks = {group.get(s, frozenset([s])) for s in switches}
        if len(racks) > 1:
            ports = ", ".join(n.describe() for n in data)
            alone = inferred.alone.get(host)
            why = alone or inferred.blocked.get(frozenset(switches), "the switches are not an MLAG pair")
            discovery.problem(f"data-plane ports disagree ({ports}): {why}; left as it is", host, claim=bool(alone))
            continue
        rack = racks.pop()
        above = fabric.above(rack)
        if isinstance(above, str):
            discovery.problem(f"{above}; left as it is", host)
            continue
        if switches != rack:
            unheard = ", ".join(sorted(rack - switches))
            discovery.problem(f"hears only {', '.join(sorted(switches))} of the pair {rack_name(rack)} "
                              f"(no LLDP from {unheard}: a link down?); placed under the pair", host)
        discovery.paths[host] = above + (rack_name(rack),)
    return discovery


@dataclass
class InferredPairs:
    """Switch sets taken as one rack (with the number of hosts that hear exactly them), the sets several hosts
    hear that could not be taken, with why, and hosts alone in hearing a set that crosses a pair (refused
    claims: they stop no pair), with why."""

    pairs: dict[frozenset[str], int] = field(default_factory=dict)
    blocked: dict[frozenset[str], str] = field(default_factory=dict)
    alone: dict[str, str] = field(default_factory=dict)


def infer_pairs(hosts: Mapping[str, Sequence[Neighbor]], mgmt: re.Pattern[str]) -> InferredPairs:
    """Switches that serve the same hosts, from the hosts alone: a set of two or more switches that at least
    two hosts hear exactly on their data-plane ports, when no host hears one of them together with a switch
    outside the set and fewer hosts hear only part of the set than all of it (else its members look like
    separate racks, with a few hosts cabled across)."""
    heard: dict[frozenset[str], list[str]] = defaultdict(list)  # switch set -> the hosts hearing exactly it
    for host in sorted(hosts):
        switches = frozenset(n.switch for n in split_ports(hosts[host], mgmt)[0])
        if switches:
            heard[switches].append(host)
    sets_with: dict[str, list[frozenset[str]]] = defaultdict(list)
    for switches in heard:
        for switch in switches:
            sets_with[switch].append(switches)
    found = InferredPairs()
    for candidate in sorted(heard, key=sorted):
        count = len(heard[candidate])
        if len(candidate) < 2 or count < 2:
            continue
        touching = {other for switch in candidate for other in sets_with[switch]}
        for other in sorted(touching, key=sorted):  # a crossing set one host alone claims: refused, blocks nothing
            if not other <= candidate and len(heard[other]) == 1:
                found.alone[heard[other][0]] = (
                    f"no other host hears {', '.join(sorted(other))} and no switch map pairs them, while {count} hosts "
                    f"hear exactly {', '.join(sorted(candidate))}; this host's claim is refused")
        touching = {other for other in touching if other <= candidate or len(heard[other]) > 1}
        why = _contradiction(candidate, count, touching, heard)
        if why:
            found.blocked[candidate] = (f"{count} hosts hear exactly {', '.join(sorted(candidate))}, but {why}, so "
                                        "they are not taken as a pair (list the pair in a switch map)")
        else:
            found.pairs[candidate] = count
    return found


def _contradiction(candidate: frozenset[str], count: int, touching: set[frozenset[str]],
                   heard: Mapping[frozenset[str], list[str]]) -> str:
    """Why the hosts contradict `candidate`, given the switch sets that share a switch with it."""
    crossing = sorted((heard[s][0], s) for s in touching if not s <= candidate)
    if crossing:
        host, switches = crossing[0]
        inside, outside = sorted(switches & candidate), sorted(switches - candidate)
        others = sum(len(heard[s]) for _, s in crossing) - 1
        more = f" (and {others} more host(s))" if others else ""
        return f"{host} hears {', '.join(inside)} with {', '.join(outside)}{more}"
    partial = sum(len(heard[s]) for s in touching if s < candidate)
    if partial >= count:
        return f"{partial} hosts hear only part of it"
    return ""


def _contested_names(hosts: Mapping[str, Sequence[Neighbor]], mgmt: re.Pattern[str],
                     discovery: Discovery) -> set[str]:
    """Switch names sent by several chassis: the name is the chassis most hosts hear under it; the hosts that
    hear it from another chassis (all of them, on a tie) are refused, as claims. Returns those hosts."""
    hearers: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))  # name -> chassis id -> hosts
    for host, neighbors in hosts.items():
        for n in split_ports(neighbors, mgmt)[0]:
            if n.chassis_name and n.chassis_id:
                hearers[n.chassis_name][n.chassis_id.lower()].add(host)
    refused: set[str] = set()
    for name in sorted(hearers):
        ids = hearers[name]
        if len(ids) < 2:
            continue
        ranked = sorted(ids, key=lambda i: (-len(ids[i]), i))
        winner = ranked[0] if len(ids[ranked[0]]) > len(ids[ranked[1]]) else None
        discovery.problem(f"switch name {name!r} is sent by {len(ids)} chassis ({', '.join(sorted(ids))}): two "
                          "switches share a system name, or a host claims one it is not cabled to; "
                          + (f"it is taken for {winner}, which most hosts hear" if winner else "no chassis has most hosts"))
        for chassis in ranked:
            if chassis == winner:
                continue
            for host in sorted(ids[chassis] - refused):
                refused.add(host)
                discovery.problem(f"hears switch {name!r} from chassis {chassis}, while "
                                  + (f"{len(ids[winner])} host(s) hear it from {winner}" if winner else
                                     "as many hosts hear it from another chassis")
                                  + "; this host's claim is refused and it is left as it is", host, claim=True)
    return refused


def fabric_from_map(data: Any, origin: str, alias: Mapping[str, str]) -> Fabric:
    """A fabric from a switch map document (see docs/lldp.md); switches may be named by chassis id."""
    if not isinstance(data, Mapping):
        raise SourceError(f"{origin}: expected a mapping with 'levels' and 'switches'")
    levels = data.get("levels")
    if not isinstance(levels, list) or not levels or not all(isinstance(x, str) and x.strip() for x in levels):
        raise SourceError(f"{origin}: 'levels' must be a non-empty list of level names above the rack, coarsest first")
    if RACK in levels or len(set(levels)) != len(levels):
        raise SourceError(f"{origin}: 'levels' must be distinct and must not name {RACK!r} (added below them)")
    switches = data.get("switches")
    if not isinstance(switches, Mapping) or not switches:
        raise SourceError(f"{origin}: 'switches' must map each switch to its {', '.join(levels)}")
    paths = {}
    for name, where in switches.items():
        values = [str(where.get(lv) or "").strip() for lv in levels] if isinstance(where, Mapping) else []
        if not values or not all(values):
            raise SourceError(f"{origin}: switches.{name} needs a value for each of {', '.join(levels)}")
        paths[_resolve(str(name), alias)] = tuple(values)
    pairs = [frozenset(_resolve(str(s), alias) for s in pair) for pair in _pair_lists(data.get("pairs"), origin)]
    _check_pairs(pairs, origin)
    return Fabric(tuple(levels), paths, pairs, f"switch map {origin}")


def _pair_lists(raw: Any, origin: str) -> list[list[Any]]:
    raw = raw or []
    if not isinstance(raw, list) or not all(isinstance(p, list) and len(set(map(str, p))) >= 2 for p in raw):
        raise SourceError(f"{origin}: 'pairs' must be a list of lists of two (or more) switch names")
    return raw


def _check_pairs(pairs: list[frozenset[str]], origin: str) -> None:
    seen: dict[str, frozenset[str]] = {}
    for pair in pairs:
        for s in pair:
            if s in seen and seen[s] != pair:
                raise SourceError(f"{origin}: switch {s} is in two pairs: {rack_name(seen[s])}, {rack_name(pair)}")
            seen[s] = pair


def _resolve(name: str, alias: Mapping[str, str]) -> str:
    return alias.get(name.lower(), name)


def fabric_from_switches(switches: Mapping[str, Sequence[Neighbor]], hosts: Mapping[str, Sequence[Neighbor]],
                         mgmt: re.Pattern[str], origin: str) -> Fabric:
    """A fabric from the switches' own LLDP facts (switch name -> neighbours).

    Leaves are the switches hosts hear on data-plane ports. Two leaves that hear each other are MLAG
    peers. Spines are switches with facts of their own that no host hears (on any port, so the
    management switch is none) and that are not hosts themselves. Leaves linked through shared spines
    form one block, named after its spines.
    """
    import networkx as nx

    alias = aliases(hosts)
    leaves = {n.switch for ns in hosts.values() for n in split_ports(ns, mgmt)[0]}
    heard = {n.switch for ns in hosts.values() for n in ns}
    own = {_resolve(name, alias): ns for name, ns in switches.items()}
    spines = {s for s in own if s not in heard and s not in hosts}  # a host's file among them is no spine
    peers: nx.Graph[str] = nx.Graph()
    uplinks: nx.Graph[str] = nx.Graph()
    for switch, neighbors in own.items():
        for n in split_ports(neighbors, mgmt)[0]:
            link = {switch, n.switch}
            if link <= leaves and len(link) == 2:
                peers.add_edge(switch, n.switch)
            elif len(link & leaves) == 1 and len(link & spines) == 1:
                uplinks.add_edge(switch, n.switch)
    fabric = Fabric((BLOCK,), origin=f"switch LLDP facts {origin}", unknown="has no uplink to a spine")
    for members in nx.connected_components(peers):
        if len(members) == 2:
            fabric.pairs.append(frozenset(members))
        else:
            fabric.problems.append(f"leaves {', '.join(sorted(members))} are cabled to each other; an MLAG pair "
                                   f"has two members, so none of them is paired ({fabric.origin})")
    for members in nx.connected_components(uplinks):
        block = rack_name(members & spines)
        for leaf in members & leaves:
            fabric.paths[leaf] = (block,)
    return fabric

