"""NVIDIA Topograph's node labels read back as one hierarchy.

Topograph writes each node's switch chain closest-first: `fabric.topograph.run/tier-0` is the switch the node
hangs off, tier-1 the one above it, and so on until the chain ends, so chains differ in length and one switch
is tier-1 for one node and tier-2 for another. The chains are therefore read closest-first and aligned at
their top: a switch sits at the level of its distance from the top of its tree, whatever tier number a node
gives it, and a shorter chain repeats its closest switch for the finer levels (with a notice, as
`labeler.placement.pad_depths` does for AWS). Levels are named after the tiers of the deepest chain.

The accelerator domain (`accelerator.topograph.run/domain`, the NVLink domain) becomes the finest level when
every domain sits inside one closest switch, else the finest level at which the hierarchy stays a tree, with
a notice; its optional sub-domain goes below it the same way. A node without a domain is its own domain.

Older Topograph releases wrote other keys (see GENERATIONS); each node is read from the newest set it
carries. A node Topograph found no topology for carries `tier-0: no-topology`, which is no switch.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Mapping, Sequence

from labeler.errors import TopologyError
from labeler.model import Discovery, Level, check_tree
from labeler.nodes import Node
from labeler.placement import pad_depths

NAME = "labels"
NO_TOPOLOGY = "no-topology"
ACCELERATOR = "accelerator"
SUBDOMAIN = "accelerator-sub"


@dataclass(frozen=True)
class Generation:
    """One release line's fabric keys: numbered tiers (`prefix` + N) or fixed closest-first keys."""

    release: str
    prefix: str = ""
    fixed: tuple[str, ...] = ()

    def tiers(self, labels: Mapping[str, str]) -> dict[int, str]:
        """Tier number -> value, for the keys of this generation the node carries."""
        if self.fixed:
            return {i: labels[k].strip() for i, k in enumerate(self.fixed) if labels.get(k, "").strip()}
        pattern = re.compile(re.escape(self.prefix) + r"([0-9]+)$")
        return {int(m.group(1)): v.strip() for k, v in labels.items() if (m := pattern.match(k)) and v.strip()}

    def level_name(self, tier: int) -> str:
        return self.fixed[tier].rsplit("/", 1)[-1] if self.fixed else f"tier-{tier}"


# Newest first. v1.0: fabric.topograph.run; v1.0 release candidates: network.topology.nvidia.com/tier-N;
# v0.4-v0.6: leaf, spine, core; v0.1-v0.3: block (the leaf), spine, datacenter.
GENERATIONS = (
    Generation("v1.0", prefix="fabric.topograph.run/tier-"),
    Generation("v1.0-rc", prefix="network.topology.nvidia.com/tier-"),
    Generation("v0.4", fixed=tuple(f"network.topology.nvidia.com/{k}" for k in ("leaf", "spine", "core"))),
    Generation("v0.1", fixed=tuple(f"network.topology.nvidia.com/{k}" for k in ("block", "spine", "datacenter"))),
)
# The accelerator domain, newest key first; Topograph leaves its own key off a node whose GPU Operator
# clique label it was told to defer to (acceleratorDomainSourceLabel), so that label comes last.
DOMAIN_KEYS = ("accelerator.topograph.run/domain", "xclr.topology.nvidia.com/domain",
               "network.topology.nvidia.com/accelerator", "nvidia.com/gpu.clique")
SUBDOMAIN_KEYS = ("accelerator.topograph.run/sub-domain", "xclr.topology.nvidia.com/sub-domain")


@dataclass
class _Read:
    """One node's Topograph labels: its chain closest-first, its generation, its accelerator domain."""

    chain: tuple[str, ...] = ()
    generation: Generation | None = None
    domain: str = ""
    subdomain: str = ""
    problem: str = ""
    no_topology: bool = False


def discover(nodes: Sequence[Node]) -> Discovery:
    reads = {node.name: _read(node) for node in nodes}
    has_fabric = any(r.chain for r in reads.values())
    has_domain = any(r.domain for r in reads.values())
    found = Discovery(NAME, ())
    if not has_fabric and not has_domain:
        return found
    placed = {}
    for node, read in sorted(reads.items()):
        why = read.problem or _unplaced(read, has_fabric)
        if why:
            found.problem(why, node)
        else:
            placed[node] = read
    _notices(found, reads)
    if has_fabric:
        _fabric_levels(found, placed)
    if has_domain:
        _accelerator_levels(found, placed)
    return found


def _read(node: Node) -> _Read:
    labels = node.labels
    read = _Read(domain=_first(labels, DOMAIN_KEYS))
    read.subdomain = _first(labels, SUBDOMAIN_KEYS) if read.domain else ""
    carried = [(g, tiers) for g in GENERATIONS if (tiers := g.tiers(labels))]
    if not carried:
        return read
    # the newest complete chain; keys shared by two releases (spine) do not make a chain on their own
    generation, tiers = next(((g, t) for g, t in carried if _gaps(t) == []), carried[0])
    read.generation = generation
    if tiers == {0: NO_TOPOLOGY}:
        read.no_topology = True
        return read
    if _gaps(tiers):
        keys = ", ".join(_key(generation, t) for t in _gaps(tiers))
        read.problem = f"is missing {keys} between switches it has; left as it is"
    read.chain = tuple(tiers[t] for t in sorted(tiers))
    return read


def _gaps(tiers: Mapping[int, str]) -> list[int]:
    return [t for t in range(max(tiers)) if t not in tiers]


def _key(generation: Generation, tier: int) -> str:
    return generation.fixed[tier] if generation.fixed else f"{generation.prefix}{tier}"


def _first(labels: Mapping[str, str], keys: Sequence[str]) -> str:
    return next((labels[k].strip() for k in keys if labels.get(k, "").strip()), "")


def _unplaced(read: _Read, has_fabric: bool) -> str:
    if read.no_topology and not read.domain:
        return f"Topograph found no topology for it (its tier-0 is the placeholder {NO_TOPOLOGY!r})"
    if read.chain or (read.domain and not has_fabric):
        return ""
    if read.domain:
        return "has an accelerator domain but no Topograph fabric tier labels; left as it is"
    return ("has none of Topograph's labels (fabric.topograph.run/tier-N, accelerator.topograph.run/domain "
            "or the older network.topology.nvidia.com/ keys)")


def _notices(found: Discovery, reads: Mapping[str, _Read]) -> None:
    used = Counter(r.generation.release for r in reads.values() if r.generation and r.chain)
    newest = next((g.release for g in GENERATIONS if used[g.release]), None)
    older = sorted(n for n, r in reads.items() if r.generation and r.chain and r.generation.release != newest)
    if older:
        found.problem(f"{len(older)} node(s) carry only an older Topograph release's keys and were read from "
                      f"them (e.g. {', '.join(older[:3])}); the others carry the {newest} keys")


def _fabric_levels(found: Discovery, reads: Mapping[str, _Read]) -> None:
    """Chains aligned at their top switch, padded below; the level names of the deepest chain."""
    chains = {n: r.chain for n, r in reads.items() if r.chain}
    if not chains:
        return
    _check_chains(chains)
    depth = max(len(c) for c in chains.values())
    deepest = [r.generation for r in reads.values() if r.chain and len(r.chain) == depth and r.generation]
    generation = next(g for g in GENERATIONS if g in deepest)
    found.level_names = tuple(generation.level_name(t) for t in reversed(range(depth)))
    found.paths = {n: tuple(reversed(c)) for n, c in chains.items()}
    pad_depths(found, depth)


def _check_chains(chains: Mapping[str, tuple[str, ...]]) -> None:
    """Each switch has one chain above it; otherwise the labels do not describe a tree."""
    above: dict[str, tuple[tuple[str, ...], str]] = {}
    for node in sorted(chains):
        chain = chains[node]
        for i, switch in enumerate(chain):
            seen = above.setdefault(switch, (chain[i + 1:], node))
            if seen[0] != chain[i + 1:]:
                raise TopologyError(
                    f"labels (topograph): switch {switch!r} sits under {_chain(seen[0])} for node {seen[1]} but "
                    f"under {_chain(chain[i + 1:])} for node {node}: the tier labels do not describe a tree")


def _chain(switches: tuple[str, ...]) -> str:
    return " < ".join(switches) if switches else "nothing (a top switch)"


def _accelerator_levels(found: Discovery, reads: Mapping[str, _Read]) -> None:
    if not found.level_names:  # no fabric: the accelerator domain alone, as the nvlink preset reads it
        found.level_names = (ACCELERATOR,)
        found.paths = {n: (r.domain,) for n, r in reads.items() if r.domain}
        return
    fabric = found.level_names
    at = _insert(found, {n: r.domain for n, r in reads.items()}, ACCELERATOR, 0)
    if at < len(fabric):
        found.problem(f"accelerator domains span several {fabric[at]} domains, so the accelerator level sits "
                      f"above {fabric[at]} (levels: {' > '.join(found.level_names)})")
    subs = {n: r.subdomain or r.domain for n, r in reads.items() if r.domain}
    if any(r.subdomain for r in reads.values()):
        try:
            _insert(found, subs, SUBDOMAIN, at + 1)
        except TopologyError as exc:  # the optional finer level is left out; the domain stays
            found.problem(f"{exc}; the {SUBDOMAIN} level is left out")


def _insert(found: Discovery, column: Mapping[str, str], name: str, lowest: int) -> int:
    """Add a level at the finest position (not above `lowest`) where every domain keeps one parent.

    A node without a value in `column` is its own domain there: the next finer level's value, or its name.
    """
    depth = len(found.level_names)
    errors: list[str] = []
    for at in range(depth, lowest - 1, -1):
        names = found.level_names[:at] + (name,) + found.level_names[at:]
        paths = {n: p[:at] + (column.get(n) or (p[at] if at < depth else n),) + p[at:] for n, p in found.paths.items()}
        problems = check_tree([Level(x, x) for x in names], paths)
        if not problems:
            found.level_names, found.paths = names, paths
            return at
        errors = errors or problems
    raise TopologyError(f"labels (topograph): the {name} domains do not nest in the fabric tiers at any level: "
                        + "; ".join(errors[:3]))
