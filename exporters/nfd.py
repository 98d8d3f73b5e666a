"""Node Feature Discovery (`nfd.k8s-sigs.io/v1alpha1`): a NodeFeature per node carrying its domains, and a
NodeFeatureGroup per domain of every level, in the shape NFD's network-topology proposal (KEP-2549) sets out.

Each node's NodeFeature holds the attribute feature `topolabel.network` with one element per level (the
level's name -> the node's label value there). Each group matches the nodes whose element for its level holds
its value; NFD's master writes the matching nodes into the group's status. Label values are unique per level,
so one expression per group is enough. Groups are named `topolabel-<level>-<value>` (`domains.domain_names`);
NodeFeatures `topolabel-<node>`, carrying `nfd.node.kubernetes.io/node-name`, which is how NFD ties a
NodeFeature to its node. All live in NFD's namespace, where its master watches them.
"""

from __future__ import annotations

import argparse
from typing import Any, Mapping, Sequence

from labeler.errors import TopologyError
from labeler.io.nodes import Node
from labeler.settings.config import Config
from labeler.topology.labelvalues import short_hash
from labeler.topology.model import Snapshot
from labeler.topology.names import MANAGED_BY, dns_name, name_problem

from .base import Export, Exporter, Options
from .domains import domain_forest, domain_names

API_VERSION = "nfd.k8s-sigs.io/v1alpha1"
FEATURE = "topolabel.network"
NODE_NAME_LABEL = "nfd.node.kubernetes.io/node-name"
PREFIX = "topolabel-"
DEFAULT_NAMESPACE = "node-feature-discovery"
MAX_NAME = 253


class NfdOptions(Options):
    """Where NFD's master runs: the namespace of every object (`export.nfd`, `--namespace`)."""

    namespace: str = DEFAULT_NAMESPACE


def nfd_objects(snapshot: Snapshot, options: NfdOptions = NfdOptions()) -> list[dict[str, Any]]:
    """The groups (coarsest level first, then by name), then one NodeFeature per placed node (by name)."""
    problem = name_problem(options.namespace, 63, dots=False)
    if problem:
        raise TopologyError(f"nfd: namespace {problem}")
    forest = domain_forest(snapshot, {node: node for node in snapshot.nodes})
    domains = [d for top in forest for d in top.walk()]
    level_names = [lv.name for lv in snapshot.levels]
    names = domain_names(domains, level_names, PREFIX, MAX_NAME)
    meta = {"namespace": options.namespace, "labels": dict(MANAGED_BY)}
    groups = [_group(names[(d.depth, d.value)], level_names[d.depth], d.value, meta)
              for d in sorted(domains, key=lambda d: (d.depth, names[(d.depth, d.value)]))]
    return groups + [_node_feature(node, snapshot.nodes[node], meta) for node in sorted(snapshot.nodes)]


def _group(name: str, level: str, value: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    rule = {"name": f"{level} {value}",
            "matchFeatures": [{"feature": FEATURE, "matchExpressions": {level: {"op": "In", "value": [value]}}}]}
    return {"apiVersion": API_VERSION, "kind": "NodeFeatureGroup", "metadata": {"name": name, **meta},
            "spec": {"featureGroupRules": [rule]}}


def _node_feature(node: str, values: Mapping[str, str], meta: Mapping[str, Any]) -> dict[str, Any]:
    labels = {**meta["labels"], NODE_NAME_LABEL: node}
    metadata = {"name": _feature_name(node), "namespace": meta["namespace"], "labels": labels}
    return {"apiVersion": API_VERSION, "kind": "NodeFeature", "metadata": metadata,
            "spec": {"features": {"attributes": {FEATURE: {"elements": dict(values)}}}}}


def _feature_name(node: str) -> str:
    """`topolabel-<node>`: node names are DNS subdomains already; a hash keeps one that is too long unique."""
    name = f"{PREFIX}{node}"
    if len(name) <= MAX_NAME and not name_problem(name):
        return name
    return f"{dns_name(name, MAX_NAME - 9)}-{short_hash(node)}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--namespace", metavar="NS",
                        help=f"NFD's namespace, where its master watches NodeFeatures (default: {DEFAULT_NAMESPACE})")


def _export(snapshot: Snapshot, cfg: Config, options: NfdOptions, nodes: Sequence[Node]) -> Export:
    return Export(objects=nfd_objects(snapshot, options))


EXPORTER = Exporter("nfd", "Node Feature Discovery: a NodeFeatureGroup per domain, a NodeFeature per node", True,
                    add_arguments, _export, NfdOptions)
