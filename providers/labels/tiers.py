"""Switch chains labelled tier by tier, closest first, read back as one hierarchy: NVIDIA Topograph's labels
and Nebius's (a `Family` each, in `presets`).

Topograph writes each node's switch chain closest-first: `fabric.topograph.run/tier-0` is the switch the node
hangs off, tier-1 the one above it, and so on until the chain ends, so chains differ in length and one switch
is tier-1 for one node and tier-2 for another. The chains are therefore read closest-first and aligned at
their top: a switch sits at the level of its distance from the top of its tree, whatever tier number a node
gives it, and a shorter chain repeats its closest switch for the finer levels (with a notice, as
`labeler.topology.placement.pad_depths` does for AWS). Levels are named after the tiers of the deepest chain.

The accelerator domain (`accelerator.topograph.run/domain`, the NVLink domain) becomes the finest level when
every domain sits inside one closest switch, else the finest level at which the hierarchy stays a tree, with
a notice; its optional sub-domain goes below it the same way. A node without a domain is its own domain.

Older releases wrote other keys (a family's generations); each node is read from the newest set it carries. A
node Topograph found no topology for carries `tier-0: no-topology`, which is no switch. Nebius numbers its chain
from tier 1, its tier 0 naming the rack's NVLink domain; its family reads that as the accelerator domain.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Mapping, Sequence

from labeler.errors import TopologyError
from labeler.io.nodes import Node
from labeler.topology.model import Discovery
from labeler.topology.placement import insert_level, pad_depths

NAME = "labels"
NO_TOPOLOGY = "no-topology"
SUBDOMAIN = "accelerator-sub"
FABRIC = "fabric tiers"


@dataclass(frozen=True)
class Generation:
    """One release line's fabric keys: numbered tiers (`prefix` + N) or fixed closest-first keys."""

    release: str
    prefix: str = ""
    fixed: tuple[str, ...] = ()
    first: int = 0  # the tier number closest to the node (Nebius's chain starts at 1)

    def tiers(self, labels: Mapping[str, str]) -> dict[int, str]:
        """Tier number -> value, for the keys of this generation the node carries."""
        if self.fixed:
            return {i: labels[k].strip() for i, k in enumerate(self.fixed) if labels.get(k, "").strip()}
        pattern = re.compile(re.escape(self.prefix) + r"([0-9]+)$")
        return {t: v.strip() for k, v in labels.items()
                if (m := pattern.match(k)) and v.strip() and (t := int(m.group(1))) >= self.first}

    def level_name(self, tier: int) -> str:
        return self.fixed[tier - self.first].rsplit("/", 1)[-1] if self.fixed else f"tier-{tier}"


@dataclass(frozen=True)
class Family:
    """One writer's tier labels: its generations newest first, the accelerator domain's keys (newest first) and
    the level that domain becomes, the optional sub-domain's keys, how messages name the writer, and the page
    its keys come from."""

    writer: str
    generations: tuple[Generation, ...]
    domain_keys: tuple[str, ...]
    accelerator: str = "accelerator"
    subdomain_keys: tuple[str, ...] = ()
    source: str = ""  # the documentation page the keys come from

    @property
    def origin(self) -> str:
        return f"{NAME} ({self.writer.lower()})"

    def keys(self) -> str:
        """The keys a node may carry, for messages."""
        first = self.generations[0]
        chain = f"{first.prefix}N" if first.prefix else ", ".join(first.fixed)
        older = " or older releases' keys" if len(self.generations) > 1 else ""
        return f"{chain}, {self.domain_keys[0]}{older}"


@dataclass
class _Read:
    """One node's Topograph labels: its chain closest-first, its generation, its accelerator domain."""

    chain: tuple[str, ...] = ()
    generation: Generation | None = None
    domain: str = ""
    subdomain: str = ""
    problem: str = ""
    no_topology: bool = False


def discover(nodes: Sequence[Node], family: Family) -> Discovery:
    reads = {node.name: _read(node, family) for node in nodes}
    has_fabric = any(r.chain for r in reads.values())
    has_domain = any(r.domain for r in reads.values())
    found = Discovery(NAME, ())
    if not has_fabric and not has_domain:
        return found
    placed = {}
    for node, read in sorted(reads.items()):
        why = read.problem or _unplaced(read, has_fabric, family)
        if why:
            found.problem(why, node)
        else:
            placed[node] = read
    _notices(found, reads, family)
    if has_fabric:
        _fabric_levels(found, placed, family)
    if has_domain:
        _accelerator_levels(found, placed, family)
    return found


def _read(node: Node, family: Family) -> _Read:
    labels = node.labels
    read = _Read(domain=_first(labels, family.domain_keys))
    read.subdomain = _first(labels, family.subdomain_keys) if read.domain else ""
    carried = [(g, tiers) for g in family.generations if (tiers := g.tiers(labels))]
    if not carried:
        return read
    # the newest complete chain; keys shared by two releases (spine) do not make a chain on their own
    generation, tiers = next(((g, t) for g, t in carried if _gaps(g, t) == []), carried[0])
    read.generation = generation
    if tiers == {generation.first: NO_TOPOLOGY}:
        read.no_topology = True
        return read
    if _gaps(generation, tiers):
        keys = ", ".join(_key(generation, t) for t in _gaps(generation, tiers))
        read.problem = f"is missing {keys} between switches it has; left as it is"
    read.chain = tuple(tiers[t] for t in sorted(tiers))
    return read


def _gaps(generation: Generation, tiers: Mapping[int, str]) -> list[int]:
    return [t for t in range(generation.first, max(tiers)) if t not in tiers]


def _key(generation: Generation, tier: int) -> str:
    return generation.fixed[tier] if generation.fixed else f"{generation.prefix}{tier}"


def _first(labels: Mapping[str, str], keys: Sequence[str]) -> str:
    return next((labels[k].strip() for k in keys if labels.get(k, "").strip()), "")


def _unplaced(read: _Read, has_fabric: bool, family: Family) -> str:
    if read.no_topology and not read.domain:
        return f"{family.writer} found no topology for it (its closest tier is the placeholder {NO_TOPOLOGY!r})"
    if read.chain or (read.domain and not has_fabric):
        return ""
    if read.domain:
        return f"has an accelerator domain but no {family.writer} fabric tier labels; left as it is"
    return f"has none of {family.writer}'s labels ({family.keys()})"


def _notices(found: Discovery, reads: Mapping[str, _Read], family: Family) -> None:
    used = Counter(r.generation.release for r in reads.values() if r.generation and r.chain)
    newest = next((g.release for g in family.generations if used[g.release]), None)
    older = sorted(n for n, r in reads.items() if r.generation and r.chain and r.generation.release != newest)
    if older:
        found.problem(f"{len(older)} node(s) carry only an older {family.writer} release's keys and were read "
                      f"from them (e.g. {', '.join(older[:3])}); the others carry the {newest} keys")


def _fabric_levels(found: Discovery, reads: Mapping[str, _Read], family: Family) -> None:
    """Chains aligned at their top switch, padded below; the level names of the deepest chain."""
    chains = {n: r.chain for n, r in reads.items() if r.chain}
    if not chains:
        return
    _check_chains(chains, family)
    depth = max(len(c) for c in chains.values())
    deepest = [r.generation for r in reads.values() if r.chain and len(r.chain) == depth and r.generation]
    generation = next(g for g in family.generations if g in deepest)
    found.level_names = tuple(generation.level_name(generation.first + t) for t in reversed(range(depth)))
    found.paths = {n: tuple(reversed(c)) for n, c in chains.items()}
    pad_depths(found, depth)


def _check_chains(chains: Mapping[str, tuple[str, ...]], family: Family) -> None:
    """Each switch has one chain above it; otherwise the labels do not describe a tree."""
    above: dict[str, tuple[tuple[str, ...], str]] = {}
    for node in sorted(chains):
        chain = chains[node]
        for i, switch in enumerate(chain):
            seen = above.setdefault(switch, (chain[i + 1:], node))
            if seen[0] != chain[i + 1:]:
                raise TopologyError(
                    f"{family.origin}: switch {switch!r} sits under {_chain(seen[0])} for node {seen[1]} but "
                    f"under {_chain(chain[i + 1:])} for node {node}: the tier labels do not describe a tree")


def _chain(switches: tuple[str, ...]) -> str:
    return " < ".join(switches) if switches else "nothing (a top switch)"


def _accelerator_levels(found: Discovery, reads: Mapping[str, _Read], family: Family) -> None:
    name = family.accelerator
    if not found.level_names:  # no fabric: the accelerator domain alone, as the nvlink preset reads it
        found.level_names = (name,)
        found.paths = {n: (r.domain,) for n, r in reads.items() if r.domain}
        return
    fabric = found.level_names
    at = insert_level(found, {n: r.domain for n, r in reads.items()}, name, within=FABRIC, origin=family.origin)
    if at < len(fabric):
        found.problem(f"{name} domains span several {fabric[at]} domains, so the {name} level sits "
                      f"above {fabric[at]} (levels: {' > '.join(found.level_names)})")
    subs = {n: r.subdomain or r.domain for n, r in reads.items() if r.domain}
    if any(r.subdomain for r in reads.values()):
        try:
            insert_level(found, subs, SUBDOMAIN, at + 1, within=FABRIC, origin=family.origin)
        except TopologyError as exc:  # the optional finer level is left out; the domain stays
            found.problem(f"{exc}; the {SUBDOMAIN} level is left out")

