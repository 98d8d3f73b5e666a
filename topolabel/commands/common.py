"""Flags and steps that several subcommands share: config, cluster access, source, snapshot.

The Kubernetes client loads in a quarter of a second, so it is imported only when a cluster is read."""

from __future__ import annotations

import argparse
from dataclasses import replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable

from labeler.cluster.timeouts import Timeouts
from labeler.errors import InputError
from labeler.topology.model import Snapshot
from providers.registry import SOURCES, get_source

from ..output import FORMATS, NAMES
from ..parsing import COMMON, flags
from ..pipeline import discover, read_config, read_snapshot, source_options
from ..progress import terminal

if TYPE_CHECKING:
    from labeler.io.nodes import Keep, Node
    from labeler.settings.config import Config


def config_parent() -> argparse.ArgumentParser:
    parser = flags()
    parser.add_argument_group(COMMON).add_argument("--config", metavar="FILE", help="topolabel.yaml; flags override it")
    return parser


def output_parent(kinds: str = "") -> argparse.ArgumentParser:
    """`-o` for commands that print a result: a table (`wide`: every column, values whole) for people, JSON or
    YAML for tools, and with `kinds`, `name`: one `kind/name` line per item, as kubectl prints them."""
    parser = flags()
    group = parser.add_argument_group(COMMON)
    formats = (*FORMATS, NAMES) if kinds else FORMATS
    group.add_argument("-o", "--output", choices=formats, default="table", metavar="FORMAT",
                        help=f"{'|'.join(formats)} (default: table; wide: every column, values whole"
                             + (f"; name: one {kinds} line each" if kinds else "") + ")")
    group.add_argument("--no-headers", action="store_true", help="tables without their header line")
    return parser


def cluster_parent() -> argparse.ArgumentParser:
    parser = flags()
    group = parser.add_argument_group(COMMON)
    group.add_argument("--nodes", metavar="FILE", help="`kubectl get nodes -o yaml` output, instead of a cluster "
                                                       "(which is found as kubectl finds it)")
    group.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig (default: $KUBECONFIG, ~/.kube/config)")
    group.add_argument("--context", help="kubeconfig context")
    add_timeouts(group)
    return parser


def add_timeouts(group: argparse._ActionsContainer) -> None:
    """--connect-timeout and --request-timeout: every call to the API server ends within them."""
    group.add_argument("--connect-timeout", type=seconds, default=Timeouts.connect, metavar="SECONDS",
                       help=f"seconds to wait for a connection to the API server (default: {Timeouts.connect:g})")
    group.add_argument("--request-timeout", type=seconds, default=Timeouts.read, metavar="SECONDS",
                       help="seconds to wait for each answer of the API server, headers and whole body "
                            f"included; no retry of a call starts after it (default: {Timeouts.read:g})")


def seconds(text: str) -> float:
    """A positive, finite number of seconds (an argparse type)."""
    return _seconds(text, zero=False)


def seconds_or_zero(text: str) -> float:
    """A finite number of seconds, 0 or more (an argparse type)."""
    return _seconds(text, zero=True)


def _seconds(text: str, zero: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (0 <= value if zero else 0 < value) or value == float("inf"):
        what = "finite number of seconds, 0 or more" if zero else "positive number of seconds"
        raise argparse.ArgumentTypeError(f"{text!r} is not a {what}")
    return value


def source_parent(only: str | None = None) -> argparse.ArgumentParser:
    """--source and every source's flags, or with `only`, that source's ("": none; a parser then records that
    no source flag was read). Each source whose flags are added has its module imported."""
    parser = flags()
    parser.add_argument("--source", choices=sorted(SOURCES), help="where topology comes from")
    for name in sorted(SOURCES) if only is None else [only] if only else []:
        get_source(name).add_arguments(parser)
    if only == "":
        parser.set_defaults(source_flags_read=False)
    return parser


def snapshot_parent() -> argparse.ArgumentParser:
    parser = flags()
    parser.add_argument("--snapshot", metavar="FILE",
                        help="a snapshot from `topolabel discover -o json` (instead of running a source)")
    return parser


PARENTS = {"config": config_parent, "output": output_parent, "output-nodes": lambda: output_parent("node/NAME"), "cluster": cluster_parent, "snapshot": snapshot_parent,
           "source": source_parent}


def config_of(args: argparse.Namespace) -> Config:
    return read_config(args.config)


def cluster_nodes(args: argparse.Namespace, required: bool = True, needed_for: str | None = None,
                  keep: Keep | None = None) -> list[Node]:
    """Nodes from --nodes or the cluster, the records keeping what `keep` says (all by default); none when not
    required and no cluster was named.

    With --snapshot and no cluster named, `needed_for` says what the nodes are for, and the error when the
    default kubeconfig reaches no cluster says that --nodes would do instead."""
    from labeler.io.nodes import ALL, load_nodes_file

    keep = keep or ALL
    if args.nodes:
        return load_nodes_file(args.nodes, keep)
    named = args.kubeconfig or args.context
    if not required and not named:
        return []
    try:
        api = connect(args)
    except InputError as exc:
        if named or not needed_for or not getattr(args, "snapshot", None):
            raise
        raise InputError(f"--snapshot says where nodes sit, not {needed_for}: add --nodes FILE (`kubectl get nodes "
                         f"-o yaml`) or a cluster with --kubeconfig/--context ({exc})") from None
    from labeler.cluster.kube import list_nodes

    return list_nodes(api, keep=keep)


def connect(args: argparse.Namespace, pool: int = 64) -> Any:
    """An API client for --kubeconfig/--context with the command's timeouts; the Kubernetes client loads only
    here (start-up time)."""
    from labeler.cluster.kube import connect as kube_connect

    timeouts = Timeouts(getattr(args, "connect_timeout", Timeouts.connect), getattr(args, "request_timeout", Timeouts.read))
    return kube_connect(getattr(args, "kubeconfig", None), getattr(args, "context", None), pool, timeouts)


def given_source_flags(args: argparse.Namespace) -> list[str]:
    """The source flags given on the command line (those differing from their defaults): none when the parser
    had none (`cli.parse` reads a command line that way only when it holds none)."""
    if not getattr(args, "source_flags_read", True):
        return []
    return [flag for dest, (flag, default) in _source_flags().items() if getattr(args, dest, default) != default]


@lru_cache(maxsize=1)
def _source_flags() -> dict[str, tuple[str, object]]:
    """dest -> (flag, default) of every source flag."""
    return {a.dest: (a.option_strings[-1], a.default) for a in source_parent()._actions if a.option_strings
            and a.dest != "help"}


def snapshot_of(args: argparse.Namespace, cfg: Config | None, nodes: list[Node] | None = None) -> Snapshot:
    """The snapshot given with --snapshot, or a fresh discovery from the configured source (`cfg` None: no
    config file, the flags and defaults). Without `nodes`
    the cluster is read only when the source needs it: fabric sources (inventory, InfiniBand, LLDP files)
    run without one. Source flags with --snapshot are refused: nothing would read them."""
    if getattr(args, "snapshot", None):
        flags = given_source_flags(args)
        if flags:
            raise InputError(f"{', '.join(flags)}: a source's flags have no effect with --snapshot (the snapshot is "
                             "the topology); drop them, or drop --snapshot to discover")
        return read_snapshot(args.snapshot)
    from labeler.io.nodes import Keep

    source, options = source_options(cfg, vars(args))
    # the records read here are handed over, not kept in a variable: `discover` lets them go before the snapshot
    return discover(cfg, source, options, nodes if nodes is not None else
                    cluster_nodes(args, required=source.needs_nodes, keep=Keep(source.reads_provider_id)),
                    origin=args.config or f"--source {source.name}", cluster=lambda: connect(args), progress=terminal())


def snapshot_and_nodes(args: argparse.Namespace, cfg: Config | None, needed_for: str,
                       reads: Callable[[Snapshot], Keep]) -> tuple[Snapshot, list[Node]]:
    """The snapshot (`snapshot_of`) and the cluster's nodes, for commands that need both. A --snapshot file is
    read first: a bad one is refused without reading the cluster, and the memory its decoding frees then holds
    node records (100,000 nodes: 16 MiB less at plan's peak, 40 at kueue's). `reads`: what the command reads
    of each node given the snapshot, and the snapshot's strings the records share; with a --snapshot file the
    records keep only that (a source would read the nodes whole)."""
    if args.snapshot:
        snapshot = snapshot_of(args, cfg)
        keep = replace(reads(snapshot), provider_ids=False)  # no providerID: only sources read it
        return snapshot, cluster_nodes(args, needed_for=needed_for, keep=keep)
    nodes = cluster_nodes(args, needed_for=needed_for)
    return snapshot_of(args, cfg, nodes), nodes
