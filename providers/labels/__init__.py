"""Topology from labels the nodes already carry (GKE, EKS, OCI, CoreWeave, Crusoe, Nebius, Topograph, or any
key list).

The presets and where their keys come from are in `presets`; tier chains of any depth (Topograph, Nebius) in
`tiers`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from itertools import repeat
from operator import methodcaller
from typing import Sequence

from labeler.errors import SourceError
from labeler.io.nodes import Node
from labeler.settings.validation import did_you_mean
from labeler.topology.labelvalues import is_valid_value
from labeler.topology.model import Discovery
from labeler.topology.placement import insert_level, pad_depths
from providers.gpu_clique import ANNOTATION as CLIQUE_ANNOTATION

from ..base import Source, SourceContext, parse_options
from . import tiers
from .presets import PRESETS, TIERED, Preset, PresetLevel

NAME = "labels"
# Where the GPU Operator does not run, `topolabel agent --nvlink` publishes the same value as an annotation.
ANNOTATION_FALLBACK = {"nvidia.com/gpu.clique": CLIQUE_ANNOTATION}
KNOWN = ", ".join(sorted([*PRESETS, *TIERED]))


def _known(preset: str | None) -> str | None:
    if preset and preset not in PRESETS and preset not in TIERED:
        raise ValueError(f"unknown preset {preset!r}" + did_you_mean(preset, [*PRESETS, *TIERED]))
    return preset


@dataclass(frozen=True)
class LabelsOptions:
    """A plain dataclass: a discovery from flags reads it without pydantic; config files check it against the
    model made from it (`providers.options.model_of`)."""

    preset: str | None = field(default=None, metadata={"check": _known, "choices": sorted([*PRESETS, *TIERED])})
    keys: list[str] | None = None
    names: list[str] | None = None

    def check(self) -> None:
        if not self.preset and not self.keys:
            raise ValueError(f"give a preset ({KNOWN}) or keys (label keys, coarsest first)")
        if self.preset and self.keys:
            raise ValueError("give a preset or keys, not both")
        if self.names is not None and (not self.keys or len(self.names) != len(self.keys)):
            raise ValueError("names must list one level name per key")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("labels source")
    group.add_argument("--preset", choices=sorted([*PRESETS, *TIERED]), metavar="PRESET",
                       help=f"label set a cloud or tool already writes: {KNOWN}")
    group.add_argument("--keys", type=lambda s: [k for k in s.split(",") if k],
                       help="comma-separated label keys, coarsest first (instead of --preset)")


def discover(ctx: SourceContext) -> Discovery:
    opts = parse_options(LabelsOptions, ctx)
    if opts.preset in TIERED:
        family = TIERED[opts.preset]
        found = tiers.discover(ctx.nodes, family)
        if not found.level_names:
            why = f": {found.problems[0].node}: {found.problems[0].message}" if found.problems else ""
            raise SourceError(f"labels: no node can be placed from {family.writer}'s labels ({family.keys()}){why}")
        return found
    preset = _preset(opts)
    used = [(level, key) for level in preset.levels if (key := _carried(level, ctx.nodes, preset.placeholders))]
    if not used:
        listed = ", ".join(k for level in preset.levels for k in level.keys) or "(none)"
        raise SourceError(f"labels: no node carries any of the keys {listed}")
    discovery = Discovery(NAME, tuple(level.name for level, _ in used), local_names=preset.local_names)
    keys = [key for _, key in used]
    filled: list[str] = []
    plain = _plain_paths(ctx.nodes, keys, preset.placeholders)
    if plain is not None:
        discovery.paths.update(plain)
    for node in ctx.nodes if plain is None else ():
        path = _plain_path(node, keys, preset.placeholders)
        if path:
            discovery.paths[node.name] = path
            continue
        values = [_value(node, key, preset.placeholders) for _, key in used]
        if _fill_optional(values, used):
            filled.append(node.name)
        known = [i for i, value in enumerate(values) if value]
        note = _placeholders(node, keys, preset.placeholders)
        if not known:
            discovery.problem(f"has none of the labels {', '.join(keys)}{note}", node.name)
        elif len(known) <= known[-1]:  # a key above the finest one it has is missing
            above = [key for key, value in zip(keys[:known[-1]], values) if not value]
            discovery.problem(f"is missing {', '.join(above)} above labels it has; left as it is{note}", node.name)
        else:
            discovery.paths[node.name] = tuple(values[:len(known)])
    if filled:
        optional = ", ".join(key for level, key in used if level.optional)
        discovery.problem(f"{len(filled)} node(s) carry no {optional}; their coarser domain stands in for it "
                          f"(e.g. {', '.join(sorted(filled)[:3])})")
    pad_depths(discovery, len(used))
    if preset.accelerator and (key := _carried(preset.accelerator, ctx.nodes, preset.placeholders)):
        _add_accelerator(discovery, ctx.nodes, preset, preset.accelerator, key)
    return discovery


def _fill_optional(values: list[str], used: list[tuple[PresetLevel, str]]) -> bool:
    """Give an optional level a node lacks the coarser level's domain, when the node has both a coarser and a
    finer one (RoCE nodes have no superpod); whether any was filled."""
    filled = False
    for i, (level, _) in enumerate(used):
        if level.optional and not values[i] and i and values[i - 1] and any(values[i + 1:]):
            values[i] = values[i - 1]
            filled = True
    return filled


def _add_accelerator(discovery: Discovery, nodes: Sequence[Node], preset: Preset, level: PresetLevel,
                     key: str) -> None:
    """The preset's NVLink domain at the finest level where it nests, with a notice when that is not the
    finest level."""
    column = {n.name: value for n in nodes if n.name in discovery.paths
              and (value := _value(n, key, preset.placeholders))}
    above = discovery.level_names
    at = insert_level(discovery, column, level.name, in_parent=preset.accelerator_in_parent,
                      origin=f"{NAME} ({key})")
    if at < len(above):
        discovery.problem(f"{level.name} domains ({key}) span several {above[at]} domains, so the {level.name} "
                          f"level sits above {above[at]} (levels: {' > '.join(discovery.level_names)})")


def _preset(opts: LabelsOptions) -> Preset:
    if opts.keys:
        names = opts.names or [_level_name(k) for k in opts.keys]
        return Preset(tuple(PresetLevel(name, (key,)) for name, key in zip(names, opts.keys)), "--keys")
    return PRESETS[opts.preset or ""]


def _carried(level: PresetLevel, nodes: Sequence[Node], placeholders: frozenset[str]) -> str:
    """The level's newest key that some node carries a real value for ("" when none does)."""
    return next((key for key in level.keys if any(_value(n, key, placeholders) for n in nodes)), "")


def _plain_paths(nodes: Sequence[Node], keys: list[str], placeholders: frozenset[str]
                 ) -> dict[str, tuple[str, ...]] | None:
    """Every node's path when every node carries every key with a real value and no blanks around it (most
    clusters): each key's column checked over its distinct values, no call per node (100,000 nodes: a fifth
    of the time). None when any node needs `_plain_path` or more."""
    labels = [node.labels for node in nodes]
    columns = [list(map(methodcaller("get", key, ""), labels)) for key in keys]
    for column in columns:
        distinct = set(column)
        if "" in distinct or not placeholders.isdisjoint(distinct) or set(map(type, distinct)) != {str} \
                or not all(map(str.__eq__, distinct, map(str.strip, distinct))):
            return None
    return dict(zip([node.name for node in nodes], zip(*columns)))


def _plain_path(node: Node, keys: list[str], placeholders: frozenset[str]) -> tuple[str, ...] | None:
    """The node's path when it carries every key with a real value (most nodes): what `_value` gives for
    each key then, found with a few set and map operations instead of a call per key."""
    values = tuple(map(str.strip, map(node.labels.get, keys, repeat(""))))
    return values if all(values) and placeholders.isdisjoint(values) else None


def _value(node: Node, key: str, placeholders: frozenset[str] = frozenset()) -> str:
    """The label's value, else the agent's annotation standing in for it; a placeholder is no value. The node
    writes that annotation itself, so only a valid label value counts (at most 63 characters)."""
    if node.labels.get(key):
        value = node.labels[key].strip()
    else:
        value = node.annotations.get(ANNOTATION_FALLBACK.get(key, ""), "").strip()
        value = value if is_valid_value(value) else ""
    return "" if value in placeholders else value


def _placeholders(node: Node, keys: list[str], placeholders: frozenset[str]) -> str:
    held = sorted({k for k in keys if node.labels.get(k, "").strip() in placeholders})
    return f" (placeholder values on {', '.join(held)}: the labeler had no topology for it)" if held else ""


def _level_name(key: str) -> str:
    """A short level name from a key: `example.com/topology-rack` -> `topology-rack`."""
    return key.rsplit("/", 1)[-1]


SOURCE = Source(NAME, LabelsOptions, add_arguments, discover, reads_provider_id=False)
