"""Degraded fabric: links below the usual width or speed, and uplink ports most peers use but one lacks.

Neither moves a host (placement uses which switches an HCA reaches, not how fast); both are reported so the
cable or port gets fixed. "Usual" is the most common value among links of the same kind (HCA-leaf,
leaf-spine, spine-core), and the uplink ports expected on a switch are those used by most switches of its
tier in its block.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from itertools import chain, compress, repeat
from operator import gt, itemgetter
from typing import Mapping

from .fabric import Fabric
from .parse import SPEEDS
from .tiers import Tiers

_PLURAL = {1: "leaves", 2: "spines"}
_PEER = itemgetter(0)  # of a port's (peer, peer port, cable)


def _rate(width: int | None, speed: str | None) -> str:
    return f"{width or '?'}x{speed or '?'}"


def slow_links(fabric: Fabric, tiers: Tiers, names: Mapping[int, str]) -> list[tuple[str, tuple[int, ...]]]:
    """(message, HCA nodes on the link) for every link narrower or slower than usual for its kind.

    Links are counted by kind and rate over whole columns; only a kind with some rate below its usual one
    (or a tie for the usual one, which the listing order settles) is walked link by link, in the order
    reports always listed them: in a healthy fabric, none of its tens of thousands."""
    if len(fabric.rates) < 2:
        return []  # every link runs at the one rate there is: none is below its kind's usual one
    found = []
    for kind, rates in sorted(_rates_by_kind(fabric, tiers).items()):
        usual = _usual(rates)
        if usual is None:
            continue
        links: list[tuple[int, int, int]] = []
        if _tied(rates) or any(_below(rate, *usual) for rate in rates):
            links = _links_of_kind(fabric, tiers, kind)
            usual = _usual(Counter(fabric.rate(cable) for _, _, cable in links))
            assert usual is not None
        width, speed = usual
        for a, b, cable in links:
            a_end, pa, b_end, pb, _ = fabric.cables[cable]
            rate = fabric.rate(cable)
            if _below(rate, width, speed):
                port = {a_end: pa, b_end: pb}
                ends = " - ".join(f"{tiers.name(n)} {names.get(n, f'0x{fabric.guids[n]:016x}')} port {port[n]}"
                                  for n in (b, a))
                message = (f"{ends}: runs {_rate(*rate)}, expected {_rate(width, speed)} "
                           f"like most {tiers.name(a)}-{tiers.name(b)} links")
                found.append((message, tuple(n for n in (a, b) if tiers.rank(n) == 0)))
    return found


def _rates_by_kind(fabric: Fabric, tiers: Tiers) -> dict[tuple[int, int], Counter]:
    """(lower rank, upper rank) -> how many of its links run at each (width, speed), HCA-HCA links left out."""
    if not fabric.cables:
        return {}
    rank = tiers.rank_list(len(fabric.guids))
    a, _, b, _, rate = zip(*fabric.cables)
    counted = Counter(zip(map(rank.__getitem__, a), map(rank.__getitem__, b), rate))
    kinds: dict[tuple[int, int], Counter] = defaultdict(Counter)
    for (ra, rb, index), count in counted.items():
        if ra or rb:
            kinds[(min(ra, rb), max(ra, rb))][fabric.rates[index]] += count
    return kinds


def _links_of_kind(fabric: Fabric, tiers: Tiers, kind: tuple[int, int]) -> list[tuple[int, int, int]]:
    """(lower end, upper end, cable) for the cables between ranks `kind`, in the order of `Fabric.edges`."""
    found = []
    for u, v, cable in fabric.edges():
        ru, rv = tiers.rank(u), tiers.rank(v)
        if (min(ru, rv), max(ru, rv)) == kind:
            found.append((v, u, cable) if rv < ru else (u, v, cable))
    return found


def _usual(rates: Counter) -> tuple[int, str] | None:
    """The most common known width and speed (each the first listed on a tie); None when either is unknown
    on every link."""
    widths, speeds = _widths_and_speeds(rates)
    if not widths or not speeds:
        return None
    return widths.most_common(1)[0][0], speeds.most_common(1)[0][0]


def _tied(rates: Counter) -> bool:
    """Whether the most common width or speed shares its count with another (then the first listed wins)."""
    return any(len(c) > 1 and c.most_common(2)[1][1] == c.most_common(1)[0][1] for c in _widths_and_speeds(rates))


def _widths_and_speeds(rates: Counter) -> tuple[Counter, Counter]:
    widths: Counter = Counter()
    speeds: Counter = Counter()
    for (width, speed), count in rates.items():  # in the order each pair was first listed
        if width:
            widths[width] += count
        if speed:
            speeds[speed] += count
    return widths, speeds


def _below(rate: tuple[int | None, str | None], width: int, speed: str) -> bool:
    narrow = rate[0] is not None and rate[0] < width
    return narrow or (rate[1] is not None and SPEEDS.index(rate[1]) < SPEEDS.index(speed))


@dataclass(frozen=True)
class UplinkGap:
    """Uplink ports more than half of a switch's peers (same tier, same block) have cabled and it has not
    (switch and block are fabric nodes)."""

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
    guid = fabric.guids.__getitem__
    rank_of = tiers.rank_list(len(fabric.guids))
    found = []
    by_tier_and_block = sorted(groups.items(), key=lambda kv: (kv[0][0], 0 if kv[0][1] is None else guid(kv[0][1])))
    for (rank, block), members in by_tier_and_block:
        if len(members) < 3:
            continue  # a majority of two says nothing
        uplinks = {s: _uplinks(fabric.ports[s], rank_of, rank) for s in members}
        usage = Counter(chain.from_iterable(uplinks.values()))
        expected = {port for port, count in usage.items() if count * 2 > len(members)}
        if all(expected <= fabric.ports[s].keys() for s in members):
            continue  # the usual case: nothing missing
        for switch in sorted(members, key=lambda s: names.get(s, "")):
            missing = tuple(sorted(expected - fabric.ports[switch].keys()))
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
        name = names.get(gap.switch, f"0x{fabric.guids[gap.switch]:016x}")
        for port in gap.missing:
            found.append(f"{tiers.name(gap.switch)} {name} port {port}: no link, but {gap.usage[port]} of {gap.peers} "
                         f"{_PLURAL[gap.rank]} in {where} have an uplink on this port (cable missing or down)")
    return found


def _uplinks(ports: dict[int, tuple[int, int, int]], rank_of: list[int], rank: int) -> list[int]:
    """The ports of a switch of `rank` cabled to a higher rank (whole columns, no loop per port)."""
    return list(compress(ports, map(gt, map(rank_of.__getitem__, map(_PEER, ports.values())), repeat(rank))))
