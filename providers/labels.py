"""Topology from labels the nodes already carry (GKE, EKS, OCI, CoreWeave, Topograph, or any key list)."""

from __future__ import annotations

import argparse
import re
from typing import Sequence

from pydantic import model_validator

from labeler.errors import SourceError
from labeler.labelvalues import is_valid_value
from labeler.model import Discovery
from labeler.nodes import Node
from labeler.placement import pad_depths
from providers.gpu_clique import ANNOTATION as CLIQUE_ANNOTATION

from .base import Options, Source, SourceContext, parse_options

NAME = "labels"

# preset -> (level name, label key), coarsest first. A preset may list more keys than a cluster uses.
PRESETS: dict[str, tuple[tuple[str, str], ...]] = {
    "gke": (("block", "cloud.google.com/gce-topology-block"),
            ("subblock", "cloud.google.com/gce-topology-subblock"),
            ("host", "cloud.google.com/gce-topology-host")),
    # EKS: layer 1 is furthest from the instance; the depth varies by instance type (3, or 4 on p6-b200).
    "eks": tuple((f"layer-{i}", f"topology.k8s.aws/network-node-layer-{i}") for i in range(1, 5)),
    "oci": (("block", "oci.oraclecloud.com/host.network_block_id"),
            ("rack", "oci.oraclecloud.com/host.rack_id")),
    "coreweave": (("fabric", "backend.coreweave.cloud/fabric"),
                  ("leafgroup", "backend.coreweave.cloud/leafgroup")),
    # The GPU Operator's NVLink domain (`<ClusterUUID>.<CliqueID>`), set only on multi-node NVLink systems
    # (GB200/GB300 NVL72) once the fabric is up; usually combined with a network source.
    "nvlink": (("nvlink", "nvidia.com/gpu.clique"),),
}
# Where the GPU Operator does not run, `topolabel agent --nvlink` publishes the same value as an annotation.
ANNOTATION_FALLBACK = {"nvidia.com/gpu.clique": CLIQUE_ANNOTATION}
# Topograph: `fabric.topograph.run/tier-N` with tier 0 closest to the node, or its older keys.
TOPOGRAPH_TIER = re.compile(r"^fabric\.topograph\.run/tier-([0-9]+)$")
TOPOGRAPH_LEGACY = (("core", "network.topology.nvidia.com/core"),
                    ("datacenter", "network.topology.nvidia.com/datacenter"),
                    ("spine", "network.topology.nvidia.com/spine"),
                    ("leaf", "network.topology.nvidia.com/leaf"),
                    ("block", "network.topology.nvidia.com/block"))


class LabelsOptions(Options):
    preset: str | None = None
    keys: list[str] | None = None
    names: list[str] | None = None

    @model_validator(mode="after")
    def _one_of(self) -> "LabelsOptions":
        if bool(self.preset) == bool(self.keys):
            raise ValueError("give either a preset (gke, eks, oci, coreweave, topograph, nvlink) or keys, not both")
        if self.preset and self.preset not in PRESETS and self.preset != "topograph":
            raise ValueError(f"unknown preset {self.preset!r}; known: {', '.join(sorted(PRESETS))}, topograph")
        if self.names is not None and (not self.keys or len(self.names) != len(self.keys)):
            raise ValueError("names must list one level name per key")
        return self


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("labels source")
    group.add_argument("--preset", help="label set a cloud or tool already writes: gke, eks, oci, coreweave, topograph, nvlink")
    group.add_argument("--keys", type=lambda s: [k for k in s.split(",") if k],
                       help="comma-separated label keys, coarsest first (instead of --preset)")


def discover(ctx: SourceContext) -> Discovery:
    opts = parse_options(LabelsOptions, ctx)
    candidates = _candidates(opts, ctx.nodes)
    used = [(name, key) for name, key in candidates if any(_value(n, key) for n in ctx.nodes)]
    if not used:
        keys = ", ".join(k for _, k in candidates) or "(none)"
        raise SourceError(f"labels: no node carries any of the keys {keys}")
    discovery = Discovery(NAME, tuple(name for name, _ in used))
    for node in ctx.nodes:
        values = [_value(node, key) for _, key in used]
        known = _known_prefix(values)
        if known == 0:
            discovery.problem(f"has none of the labels {', '.join(k for _, k in used)}", node.name)
        elif any(values[known:]):
            missing = [k for (_, k), v in zip(used, values) if not v]
            discovery.problem(f"is missing {', '.join(missing)} above labels it has; left as it is", node.name)
        else:
            discovery.paths[node.name] = tuple(values[:known])
    pad_depths(discovery, len(used))
    return discovery


def _value(node: Node, key: str) -> str:
    """The label's value, else the agent's annotation standing in for it. The node writes that annotation
    itself, so only a valid label value counts (at most 63 characters): anything else is ignored."""
    if node.labels.get(key):
        return node.labels[key].strip()
    value = node.annotations.get(ANNOTATION_FALLBACK.get(key, ""), "").strip()
    return value if is_valid_value(value) else ""


def _candidates(opts: LabelsOptions, nodes: Sequence[Node]) -> list[tuple[str, str]]:
    if opts.keys:
        names = opts.names or [_level_name(k) for k in opts.keys]
        return list(zip(names, opts.keys))
    if opts.preset == "topograph":
        return _topograph_keys(nodes)
    return list(PRESETS[opts.preset or ""])


def _topograph_keys(nodes: Sequence[Node]) -> list[tuple[str, str]]:
    tiers = {int(m.group(1)) for n in nodes for k in n.labels if (m := TOPOGRAPH_TIER.match(k))}
    if tiers:
        return [(f"tier-{t}", f"fabric.topograph.run/tier-{t}") for t in sorted(tiers, reverse=True)]
    return list(TOPOGRAPH_LEGACY)


def _level_name(key: str) -> str:
    """A short level name from a key: `example.com/topology-rack` -> `topology-rack`."""
    return key.rsplit("/", 1)[-1]


def _known_prefix(values: list[str]) -> int:
    count = 0
    while count < len(values) and values[count]:
        count += 1
    return count


SOURCE = Source(NAME, LabelsOptions, add_arguments, discover)
