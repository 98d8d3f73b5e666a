"""Topology from labels the nodes already carry (GKE, EKS, OCI, CoreWeave, Topograph, or any key list).

The presets and where their keys come from are in `presets`; Topograph's variable-depth tiers in `topograph`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from itertools import repeat
from typing import Sequence

from labeler.errors import SourceError
from labeler.labelvalues import is_valid_value
from labeler.model import Discovery
from labeler.nodes import Node
from labeler.placement import pad_depths
from labeler.validation import did_you_mean
from providers.gpu_clique import ANNOTATION as CLIQUE_ANNOTATION

from ..base import Source, SourceContext, parse_options
from . import topograph
from .presets import PRESETS, Preset, PresetLevel

NAME = "labels"
TOPOGRAPH = "topograph"
# Where the GPU Operator does not run, `topolabel agent --nvlink` publishes the same value as an annotation.
ANNOTATION_FALLBACK = {"nvidia.com/gpu.clique": CLIQUE_ANNOTATION}
KNOWN = ", ".join(sorted([*PRESETS, TOPOGRAPH]))


def _known(preset: str | None) -> str | None:
    if preset and preset not in PRESETS and preset != TOPOGRAPH:
        raise ValueError(f"unknown preset {preset!r}" + did_you_mean(preset, [*PRESETS, TOPOGRAPH]))
    return preset


@dataclass(frozen=True)
class LabelsOptions:
    """A plain dataclass: a discovery from flags reads it without pydantic; config files check it against the
    model made from it (`providers.options.model_of`)."""

    preset: str | None = field(default=None, metadata={"check": _known, "choices": sorted([*PRESETS, TOPOGRAPH])})
    keys: list[str] | None = None
    names: list[str] | None = None

    def check(self) -> None:
        if bool(self.preset) == bool(self.keys):
            raise ValueError(f"give either a preset ({KNOWN}) or keys, not both")
        if self.names is not None and (not self.keys or len(self.names) != len(self.keys)):
            raise ValueError("names must list one level name per key")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("labels source")
    group.add_argument("--preset", help=f"label set a cloud or tool already writes: {KNOWN}")
    group.add_argument("--keys", type=lambda s: [k for k in s.split(",") if k],
                       help="comma-separated label keys, coarsest first (instead of --preset)")


def discover(ctx: SourceContext) -> Discovery:
    opts = parse_options(LabelsOptions, ctx)
    if opts.preset == TOPOGRAPH:
        found = topograph.discover(ctx.nodes)
        if not found.level_names:
            why = f": {found.problems[0].node}: {found.problems[0].message}" if found.problems else ""
            raise SourceError("labels: no node can be placed from Topograph's labels (fabric.topograph.run/tier-N, "
                              f"accelerator.topograph.run/domain or the older network.topology.nvidia.com/ keys){why}")
        return found
    preset = _preset(opts)
    used = [(level.name, key) for level in preset.levels
            if (key := _carried(level, ctx.nodes, preset.placeholders))]
    if not used:
        keys = ", ".join(k for level in preset.levels for k in level.keys) or "(none)"
        raise SourceError(f"labels: no node carries any of the keys {keys}")
    discovery = Discovery(NAME, tuple(name for name, _ in used))
    keys = [key for _, key in used]
    for node in ctx.nodes:
        path = _plain_path(node, keys, preset.placeholders)
        if path:
            discovery.paths[node.name] = path
            continue
        values = [_value(node, key, preset.placeholders) for _, key in used]
        known = [i for i, value in enumerate(values) if value]
        note = _placeholders(node, used, preset.placeholders)
        if not known:
            discovery.problem(f"has none of the labels {', '.join(k for _, k in used)}{note}", node.name)
        elif len(known) <= known[-1]:  # a key above the finest one it has is missing
            above = [key for (_, key), value in zip(used[:known[-1]], values) if not value]
            discovery.problem(f"is missing {', '.join(above)} above labels it has; left as it is{note}", node.name)
        else:
            discovery.paths[node.name] = tuple(values[:len(known)])
    pad_depths(discovery, len(used))
    return discovery


def _preset(opts: LabelsOptions) -> Preset:
    if opts.keys:
        names = opts.names or [_level_name(k) for k in opts.keys]
        return Preset(tuple(PresetLevel(name, (key,)) for name, key in zip(names, opts.keys)), "--keys")
    return PRESETS[opts.preset or ""]


def _carried(level: PresetLevel, nodes: Sequence[Node], placeholders: frozenset[str]) -> str:
    """The level's newest key that some node carries a real value for ("" when none does)."""
    return next((key for key in level.keys if any(_value(n, key, placeholders) for n in nodes)), "")


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


def _placeholders(node: Node, used: list[tuple[str, str]], placeholders: frozenset[str]) -> str:
    held = sorted({k for _, k in used if node.labels.get(k, "").strip() in placeholders})
    return f" (placeholder values on {', '.join(held)}: the labeler had no topology for it)" if held else ""


def _level_name(key: str) -> str:
    """A short level name from a key: `example.com/topology-rack` -> `topology-rack`."""
    return key.rsplit("/", 1)[-1]


SOURCE = Source(NAME, LabelsOptions, add_arguments, discover)
