"""topology/block: the domains of one level as blocks, in tree order, with BlockSizes Slurm accepts."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from labeler.errors import TopologyError
from labeler.topology.model import ACCELERATOR_LEVELS, Level, Problem

from ..domains import Domain
from ..hostlist import compress
from .names import SOURCE

MAX_BLOCK_LEVEL = 15


@dataclass
class Block:
    name: str
    nodes: list[str]
    ancestors: tuple[str, ...]


def block_depth(forest: list[Domain], levels: tuple[Level, ...], requested: str | None = None) -> int:
    """The level whose domains become blocks: the one named, else an accelerator (NVLink) domain level,
    else the coarsest with more than one domain."""
    names = [lv.name for lv in levels]
    if requested:
        if requested not in names:
            raise TopologyError(f"--block-level {requested!r} is not a level of the snapshot "
                                f"(levels: {', '.join(names)})")
        return names.index(requested)
    accelerator = next((name for name in names if name in ACCELERATOR_LEVELS), None)
    if accelerator:
        return names.index(accelerator)
    counts = Counter(d.depth for top in forest for d in top.walk())
    return next((depth for depth in range(len(levels)) if counts[depth] > 1), len(levels) - 1)


def blocks(forest: list[Domain], depth: int) -> list[Block]:
    """The domains at `depth` in tree order: blocks that share a coarser domain are consecutive."""
    out: list[Block] = []

    def visit(domain: Domain, ancestors: tuple[str, ...]) -> None:
        if domain.depth == depth:
            out.append(Block(domain.value, list(domain.nodes), ancestors))
            return
        for child in domain.children:
            visit(child, ancestors + (domain.value,))

    for top in forest:
        visit(top, ())
    return out


def block_sizes(block_list: list[Block], requested: Iterable[int] = (), counted: bool = True) -> list[int]:
    """BlockSizes: the requested ones once checked, else the smallest block times 1, 2, 4... up to the count.
    Without `counted` (blocks whose nodes join at run time) the base is not held against today's smallest block."""
    smallest = min(len(b.nodes) for b in block_list)
    sizes = list(requested)
    if sizes:
        problem = block_sizes_problem(sizes, smallest if counted else sizes[0])
        if problem:
            raise TopologyError(f"--block-sizes {','.join(map(str, sizes))}: {problem}")
        return sizes
    doublings = min(len(block_list).bit_length() - 1, MAX_BLOCK_LEVEL)
    return [smallest << k for k in range(doublings + 1)]


def block_sizes_problem(sizes: list[int], smallest: int) -> str | None:
    """Why Slurm would refuse these BlockSizes for blocks whose smallest holds `smallest` nodes, or None."""
    if not sizes or any(s <= 0 for s in sizes):
        return "sizes must be positive"
    base = sizes[0]
    if base > smallest:
        return f"the base size {base} is larger than the smallest block ({smallest} nodes)"
    exponents = []
    for size in sizes[1:]:
        ratio = size // base
        if size % base or ratio & (ratio - 1):
            return f"{size} is not the base {base} times a power of two"
        exponents.append(ratio.bit_length() - 1)
    if exponents != sorted(set(exponents)) or (exponents and exponents[0] == 0):
        return "sizes must rise"
    if exponents and exponents[-1] > MAX_BLOCK_LEVEL:
        return f"sizes may reach at most the base times 2^{MAX_BLOCK_LEVEL}"
    return None


def block_notes(block_list: list[Block], sizes: list[int], levels: tuple[Level, ...]) -> list[Problem]:
    """Notices a Slurm admin should see: uneven blocks, and aggregates that cut across a coarser domain."""
    notes = []
    counts = sorted({len(b.nodes) for b in block_list})
    if len(counts) > 1:
        notes.append(Problem(SOURCE, f"blocks hold {counts[0]} to {counts[-1]} nodes; Slurm plans in units of "
                                     f"the base block size {sizes[0]}, so larger blocks are used as if they "
                                     "were that size (set --block-sizes or another --block-level to change it)"))
    for size in sizes[1:]:
        span = size // sizes[0]
        groups = [block_list[i:i + span] for i in range(0, len(block_list), span)]
        cut = [(g, depth) for g in groups if len(g) == span and (depth := _cut_depth(g, block_list)) is not None]
        if cut:
            (first, depth), count = cut[0], len(cut)
            notes.append(Problem(SOURCE, f"BlockSizes {size}: {count} of {len(groups)} aggregates of {span} "
                                         f"consecutive blocks take part of a {levels[depth].name} domain "
                                         f"(e.g. {first[0].name}..{first[-1].name}), since those domains do "
                                         "not hold a power of two blocks each"))
    return notes


def _cut_depth(group: list[Block], block_list: list[Block]) -> int | None:
    """The coarsest level at which the group spans several domains without holding all of their blocks."""
    for depth in range(len(group[0].ancestors)):
        touched = {b.ancestors[depth] for b in group}
        if len(touched) > 1 and sum(b.ancestors[depth] in touched for b in block_list) != len(group):
            return depth
    return None


def block_conf(block_list: list[Block], sizes: list[int]) -> str:
    lines = [f"BlockName={b.name} Nodes={compress(b.nodes)}\n" for b in block_list]
    return "".join(lines) + f"BlockSizes={','.join(map(str, sizes))}\n"
