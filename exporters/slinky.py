"""Slurm on Kubernetes with Slinky's slurm-operator: the ConfigMap holding `topology.yaml`, which the operator's
Controller mounts through `spec.configFileRefs`, and optionally the nodes' dynamic-topology annotations.

Full mode: the topology.yaml `topolabel export slurm --format yaml` writes, nodes included (Slurm node names
from the Kubernetes ones by `--slurm-name`). Every node that joins or leaves rewrites the file, and a
changed file means a Slurm reconfigure.

Skeleton mode (`--skeleton`): topology.yaml lists switches and blocks without nodes, and each Kubernetes node
gets the annotation `topology.slinky.slurm.net/spec` (`tree:root:spine-1:leaf-4,block:nvlink-rack-7`), which
slurm-operator copies to the Slurm node running on it (dynamic topology: `scontrol update ... Topology=`). The
ConfigMap then changes only when a switch or block appears or goes, never because a node joined or left:
the tree keeps one switch per domain with stable names (`tree.switches(stable=True)`), and block sizes must be
given, since computed ones follow the smallest block's node count. Slinky's Slurm nodes are pods, so the
skeleton needs no Slurm node names at all.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from pydantic import Field

from labeler.errors import TopologyError
from labeler.io.nodes import Node
from labeler.settings.config import Config
from labeler.topology.model import Snapshot
from labeler.topology.names import MANAGED_BY, name_problem

from .base import Export, Exporter
from .slurm import (NameRule, SlurmLayout, SlurmOptions, add_arguments as slurm_arguments, slurm_options,
                    slurm_topologies)
from .slurm.topologies import topology_yaml

ANNOTATION = "topology.slinky.slurm.net/spec"  # slurm-operator's AnnotationNodeTopologySpec
CONFIG_KEY = "topology.yaml"  # a file name the operator's Controller webhook knows
MAX_CONFIGMAP = 1 << 20  # the API server refuses larger objects
DEFAULT_NAME = "slurm-topology"
DEFAULT_NAMESPACE = "slurm"


@dataclass(frozen=True)
class SlinkyOptions:
    """The ConfigMap's name and namespace, skeleton mode, and the Slurm options of the topologies."""

    name: str = DEFAULT_NAME
    namespace: str = DEFAULT_NAMESPACE
    skeleton: bool = False
    slurm: SlurmOptions = field(default_factory=lambda: SlurmOptions(format="yaml"))


class SlinkyExportOptions(SlurmLayout):
    """`export.slinky` and the flags of `topolabel export slinky`: Slurm's layout (as `export.slurm`'s, without
    a format: always topology.yaml), the ConfigMap, and skeleton mode."""

    configmap: str = Field(DEFAULT_NAME, description="The ConfigMap the Controller's configFileRefs names")
    namespace: str = Field(DEFAULT_NAMESPACE, description="The Slurm cluster's namespace")
    skeleton: bool = Field(False, description=f"Switches and blocks without nodes, and each node's {ANNOTATION} "
                                              "annotation for slurm-operator's dynamic topology")


def export_slinky(snapshot: Snapshot, options: SlinkyOptions = SlinkyOptions(), nodes: Sequence[Node] = ()) -> Export:
    """The ConfigMap, and in skeleton mode each node's annotation."""
    for what, value, dots in (("ConfigMap name", options.name, True), ("namespace", options.namespace, False)):
        problem = name_problem(value, 253 if dots else 63, dots)
        if problem:
            raise TopologyError(f"slinky: {what} {problem}")
    slurm = options.slurm
    if options.skeleton:
        slurm = replace(slurm, names=NameRule(), stable=True)  # annotations name Kubernetes nodes
    found = slurm_topologies(snapshot, replace(slurm, format="yaml"), nodes)
    annotations: dict[str, dict[str, str]] = {}
    if options.skeleton:
        unsized = [t.name for t in found.topologies if t.plugin == "block" and not _sized(t.name, slurm)]
        if unsized:
            raise TopologyError(f"slinky --skeleton: block topology {', '.join(unsized)} needs its block sizes given "
                                "(--block-sizes or export.slinky.topologies[].blockSizes): computed ones follow the "
                                "smallest block's node count, and would change the skeleton as nodes come and go")
        annotations = _annotations(found.topologies, found.names)
    text = found.header + topology_yaml([t.entry(options.skeleton) for t in found.topologies])
    if len(text.encode()) > MAX_CONFIGMAP - 4096:
        raise TopologyError(f"slinky: topology.yaml is {len(text.encode())} bytes; a ConfigMap holds at most 1 MiB "
                            "(use --skeleton, which lists no nodes)")
    configmap = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": options.name, "namespace": options.namespace, "labels": dict(MANAGED_BY)},
                 "data": {CONFIG_KEY: text}}
    return Export(objects=[configmap], problems=found.problems, annotations=annotations)


def _sized(name: str, slurm: SlurmOptions) -> bool:
    spec = next((t for t in slurm.topologies if t.name == name), None)
    return bool((spec.block_sizes if spec else ()) or slurm.block_sizes)


def _annotations(topologies: Sequence[Any], names: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """Each node's dynamic-topology line: `<topology>:<unit>` for every topology that places it, in order."""
    node_of = {slurm: node for node, slurm in names.items()}
    lines: dict[str, list[str]] = {}
    for topology in topologies:
        for slurm, unit in topology.units().items():
            lines.setdefault(node_of[slurm], []).append(f"{topology.name}:{unit}")
    return {node: {ANNOTATION: ",".join(parts)} for node, parts in sorted(lines.items())}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    slurm_arguments(parser, formats=False)
    parser.add_argument("--configmap", metavar="NAME",
                        help=f"the ConfigMap the Controller's configFileRefs names (default: {DEFAULT_NAME})")
    parser.add_argument("--namespace", metavar="NS",
                        help=f"the Slurm cluster's namespace (default: {DEFAULT_NAMESPACE})")
    parser.add_argument("--skeleton", action="store_true", default=None,
                        help=f"switches and blocks without nodes, and each node's {ANNOTATION} annotation for "
                             "slurm-operator's dynamic topology: node churn then never changes the ConfigMap")


def _export(snapshot: Snapshot, cfg: Config, given: SlinkyExportOptions, nodes: Sequence[Node]) -> Export:
    options = SlinkyOptions(given.configmap, given.namespace, given.skeleton, slurm_options(given, format="yaml"))
    return export_slinky(snapshot, options, nodes)


EXPORTER = Exporter("slinky", "Slinky slurm-operator: a ConfigMap with topology.yaml (and node annotations)", True,
                    add_arguments, _export, SlinkyExportOptions, annotates=True)
