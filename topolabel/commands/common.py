"""Flags and steps that several subcommands share: config, cluster access, source, snapshot."""

from __future__ import annotations

import argparse

from kubernetes import client

from labeler.config import Config, load_config
from labeler.kube import Timeouts, connect, list_nodes
from labeler.model import Snapshot
from labeler.nodes import Node, load_nodes_file
from providers.registry import SOURCES, get_source

from ..output import FORMATS
from ..pipeline import discover, read_snapshot, source_options


def config_parent() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--config", metavar="FILE", help="topolabel.yaml; flags override it")
    parser.add_argument("-o", "--output", choices=FORMATS, default="table", help="output format (default: table)")
    return parser


def cluster_parent() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group("nodes (a file, or a live cluster as kubectl reaches it)")
    group.add_argument("--nodes", metavar="FILE", help="`kubectl get nodes -o yaml` output; no cluster needed")
    group.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig (default: $KUBECONFIG, ~/.kube/config)")
    group.add_argument("--context", help="kubeconfig context")
    add_timeouts(group)
    return parser


def add_timeouts(group: argparse._ActionsContainer) -> None:
    """--connect-timeout and --request-timeout: every call to the API server ends within them."""
    group.add_argument("--connect-timeout", type=seconds, default=Timeouts.connect, metavar="SECONDS",
                       help=f"seconds to wait for a connection to the API server (default: {Timeouts.connect:g})")
    group.add_argument("--request-timeout", type=seconds, default=Timeouts.read, metavar="SECONDS",
                       help="seconds to wait for each answer of the API server, its whole body included "
                            f"(default: {Timeouts.read:g})")


def seconds(text: str) -> float:
    """A positive, finite number of seconds (an argparse type)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def kube_of(args: argparse.Namespace, pool: int = 64) -> client.ApiClient:
    """The API client for --kubeconfig/--context, with the command's timeouts."""
    timeouts = Timeouts(getattr(args, "connect_timeout", Timeouts.connect), getattr(args, "request_timeout", Timeouts.read))
    return connect(args.kubeconfig, args.context, pool, timeouts)


def source_parent() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--source", choices=sorted(SOURCES), help="where topology comes from")
    for name in sorted(SOURCES):
        get_source(name).add_arguments(parser)
    return parser


def snapshot_parent() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--snapshot", metavar="FILE",
                        help="a snapshot from `topolabel discover -o json` (instead of running a source)")
    return parser


def config_of(args: argparse.Namespace) -> Config:
    return load_config(args.config)


def cluster_nodes(args: argparse.Namespace, required: bool = True) -> list[Node]:
    """Nodes from --nodes or the cluster; none when not required and no cluster was named."""
    if args.nodes:
        return load_nodes_file(args.nodes)
    if not required and not (args.kubeconfig or args.context):
        return []
    return list_nodes(kube_of(args))


def snapshot_of(args: argparse.Namespace, cfg: Config, nodes: list[Node] | None = None) -> Snapshot:
    """The snapshot given with --snapshot, or a fresh discovery from the configured source. Without `nodes`
    the cluster is read only when the source needs it: fabric sources (inventory, InfiniBand, LLDP files)
    run without one."""
    if getattr(args, "snapshot", None):
        return read_snapshot(args.snapshot)
    source, options = source_options(cfg, vars(args))
    if nodes is None:
        nodes = cluster_nodes(args, required=source.needs_nodes)
    return discover(cfg, source, options, nodes, origin=args.config or f"--source {source.name}")
