"""Degraded fabric: links below the usual width or speed, and uplink ports most peers use but one lacks.

Neither moves a host (placement uses which switches an HCA reaches, not how fast); both are reported so the
cable or port gets fixed. "Usual" is the most common value among links of the same kind (HCA-leaf,
leaf-spine, spine-core), and the uplink ports expected on a switch are those used by most switches of its
tier in its block.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Mapping

from .fabric import Fabric
from .parse import SPEEDS
from .tiers import Tiers

_PLURAL = {1: "leaves", 2: "spines"}


def _rate(width: int | None, speed: str | None) -> str:
    return f"{width or '?'}x{speed or '?'}"


def slow_links(fabric: Fabric, tiers: Tiers, names: Mapping[int, str]) -> list[tuple[str, tuple[int, ...]]]:
    """(message, HCA GUIDs on the link) for every link narrower or slower than usual for its kind.

    Links are counted by (width, speed) pair, and only those of a pair below the usual rate are looked at
    again: in a healthy fabric that is none of its tens of thousands."""
    kinds: dict[tuple[int, int], list] = defaultdict(list)
    rank = tiers.ranks.get
    seen: set[int] = set()
    for u, peers in fabric.adj.items():  # every cable once, in the order of Fabric.edges()
        ru = rank(u, 0)
        for v, cables in peers.items():
            if v in seen:
                continue
            rv = rank(v, 0)
            if rv < ru:
                kinds[(rv, ru)].append((v, u, cables))  # lower end first
            elif rv > 0:
                kinds[(ru, rv)].append((u, v, cables))
        seen.add(u)
    found = []
    for kind in sorted(kinds):
        links = [(a, b, data) for a, b, cables in kinds[kind] for data in cables]
        rates = Counter((d["width"], d["speed"]) for _, _, d in links)
        usual = _usual(rates)
        if usual is None:
            continue
        width, speed = usual
        low = {rate for rate in rates if _below(rate, width, speed)}
        for a, b, data in links if low else ():
            if (data["width"], data["speed"]) in low:
                ends = " - ".join(f"{tiers.name(g)} {names.get(g, f'0x{g:016x}')} port {data['ends'][g]}"
                                  for g in (b, a))
                message = (f"{ends}: runs {_rate(data['width'], data['speed'])}, expected {_rate(width, speed)} "
                           f"like most {tiers.name(a)}-{tiers.name(b)} links")
                found.append((message, tuple(g for g in (a, b) if tiers.rank(g) == 0)))
    return found


def _usual(rates: Counter) -> tuple[int, str] | None:
    """The most common known width and speed (each the first listed on a tie); None when either is unknown
    on every link."""
    widths: Counter = Counter()
    speeds: Counter = Counter()
    for (width, speed), count in rates.items():  # in the order each pair was first listed
        if width:
            widths[width] += count
        if speed:
            speeds[speed] += count
    if not widths or not speeds:
        return None
    return widths.most_common(1)[0][0], speeds.most_common(1)[0][0]


def _below(rate: tuple[int | None, str | None], width: int, speed: str) -> bool:
    narrow = rate[0] is not None and rate[0] < width
    return narrow or (rate[1] is not None and SPEEDS.index(rate[1]) < SPEEDS.index(speed))


@dataclass(frozen=True)
class UplinkGap:
    """Uplink ports more than half of a switch's peers (same tier, same block) have cabled and it has not."""

    switch: int
    rank: int
    block: int | None
    missing: tuple[int, ...]
    expected: int  # uplink ports a switch of this group is expected to have cabled
    usage: Mapping[int, int]  # port -> peers with an uplink on it
    peers: int


def uplink_gaps(fabric: Fabric, tiers: Tiers, block_of: Mapping[int, int], names: Mapping[int, str]) -> list[UplinkGap]:
    """Every leaf and spine short of the uplinks its peers have, by tier and block, then by name."""
    groups: dict[tuple[int, int | None], list[int]] = defaultdict(list)
    for switch in tiers.leaves | tiers.spines:
        groups[(tiers.rank(switch), block_of.get(switch))].append(switch)
    found = []
    for (rank, block), members in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        if len(members) < 3:
            continue  # a majority of two says nothing
        cabled = {s: _ports(fabric, s) for s in members}
        uplinks = {s: {port for port, peer in cabled[s].items() if tiers.rank(peer) > rank} for s in members}
        usage = Counter(port for ports in uplinks.values() for port in ports)
        expected = {port for port, count in usage.items() if count * 2 > len(members)}
        for switch in sorted(members, key=lambda s: names.get(s, "")):
            missing = tuple(sorted(expected - set(cabled[switch])))
            if missing:
                found.append(UplinkGap(switch, rank, block, missing, len(expected), usage, len(members)))
    return found


def missing_uplinks(fabric: Fabric, tiers: Tiers, block_of: Mapping[int, int],
                    names: Mapping[int, str], block_names: Mapping[int, str]) -> list[str]:
    """One message per uplink port missing (`uplink_gaps`); only uplinks are checked, so each missing cable is
    reported once, at its lower end."""
    found = []
    for gap in uplink_gaps(fabric, tiers, block_of, names):
        where = f"block {block_names[gap.block]}" if gap.block in block_names else "the fabric"
        for port in gap.missing:
            found.append(f"{tiers.name(gap.switch)} {names.get(gap.switch, f'0x{gap.switch:016x}')} port {port}: no "
                         f"link, but {gap.usage[port]} of {gap.peers} {_PLURAL[gap.rank]} in {where} have an uplink "
                         "on this port (cable missing or down)")
    return found


def _ports(fabric: Fabric, switch: int) -> dict[int, int]:
    return {data["ends"][switch]: peer for peer, cables in fabric.adj[switch].items() for data in cables}
