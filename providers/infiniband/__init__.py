"""InfiniBand source: `ibnetdiscover` output -> leaf groups and blocks of the fat tree, per node.

Reads the fabric that the in-cluster collector (`topolabel agent --ib-collector`) published (`--ib-fabric
NAME`), a saved `ibnetdiscover` output (`--ibnetdiscover FILE`, `-` for stdin), or runs the tool here
(`--run`). Levels: `block > leafgroup` for a 3-level fat tree, `leafgroup` for a 2-level one. Runs without
Kubernetes nodes (every host named in the fabric is placed); with nodes, each node without an HCA in the
fabric is a problem. See docs/infiniband.md.
"""

from __future__ import annotations

import argparse
from typing import Any

from labeler.errors import InputError, SourceError
from labeler.gcpause import paused_gc
from labeler.io.files import read_text
from labeler.topology.model import Discovery

from ..base import Source, SourceContext, parse_options
from . import options
from .options import ANNOTATION, DEFAULT_NAMESPACE

NAME = "infiniband"


def __getattr__(name: str) -> Any:
    """`InfinibandOptions`, the pydantic model of the options (`options.InfinibandOptions`), made when asked."""
    if name == "InfinibandOptions":
        return SOURCE.options
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("infiniband source")
    group.add_argument("--ib-fabric", metavar="NAME", nargs="?", const="*",
                       help="read the fabric the collector (topolabel agent --ib-collector) published in the cluster; "
                            "without NAME, the only one published")
    group.add_argument("--ib-namespace", metavar="NS", help=f"where the collector publishes (default {DEFAULT_NAMESPACE})")
    group.add_argument("--ib-max-age", type=float, metavar="SECONDS",
                       help="a published fabric not rediscovered for longer is stale (default 1800)")
    group.add_argument("--ibnetdiscover", metavar="FILE", help="saved `ibnetdiscover` output (plain, -g or --full); - for stdin")
    group.add_argument("--run", dest="run_ibnetdiscover", action="store_true", default=None, help="run ibnetdiscover on this host instead")
    group.add_argument("--ib-ca", metavar="DEVICE", help="with --run: the HCA to discover from (ibnetdiscover -C)")
    group.add_argument("--ib-timeout", type=float, metavar="SECONDS", help="with --run: give up after this long (default 60)")
    group.add_argument("--node-name-map", metavar="FILE", help="ibnetdiscover/OpenSM node-name-map: 0xGUID \"name\" per line")
    options.add_fabric_arguments(parser, NAME)


@paused_gc()  # the fabric's lifetime: read, placed, let go (see labeler.gcpause)
def discover(ctx: SourceContext) -> Discovery:
    opts = parse_options(options.InfinibandOptions, ctx)
    from .locate import locate  # the parser and placement load only when it runs
    from .parse import parse_ibnetdiscover, parse_node_name_map, read_ibnetdiscover

    names = parse_node_name_map(_read_text(opts.node_name_map), opts.node_name_map) if opts.node_name_map else None
    notices: list[str] = []
    if opts.ib_fabric:
        fabric, origin, notices = _published_fabric(opts, ctx, names)
    elif opts.run_ibnetdiscover:
        from .command import run_ibnetdiscover  # subprocess loads only to run the tool

        origin = "ibnetdiscover" + (f" -C {opts.ib_ca}" if opts.ib_ca else "")
        task = ctx.progress(f"running {origin}", None)
        try:
            text = run_ibnetdiscover(opts.ib_ca, opts.ib_timeout)
        finally:
            task.close()
        fabric = parse_ibnetdiscover(text, origin, names)
    else:
        origin = opts.ibnetdiscover or "-"
        try:
            fabric = read_ibnetdiscover(origin, names)
        except InputError as exc:
            raise SourceError(str(exc)) from None
    return locate(fabric, opts, ctx, origin, NAME, notices)


def _published_fabric(opts: options.InfinibandOptions, ctx: SourceContext,
                     names: dict[int, str] | None) -> tuple[Any, str, list[str]]:
    """The fabric the collector published, renamed by a node-name-map like ibnetdiscover output would be."""
    from .published import read_fabric_from

    if ctx.cluster is None:
        raise SourceError("infiniband: --ib-fabric reads the fabric published in the cluster; give --kubeconfig")
    assert opts.ib_fabric is not None
    found = read_fabric_from(ctx.cluster(), opts.ib_namespace, opts.ib_fabric, opts.ib_max_age)
    fabric = found.fabric
    if names:
        fabric.descs = [names.get(guid, desc) for guid, desc in zip(fabric.guids, fabric.descs)]
    return fabric, found.origin, [f"{found.origin}: {n}" for n in found.notices]


def _read_text(path: str) -> str:
    try:
        return read_text(path)
    except InputError as exc:
        raise SourceError(str(exc)) from None


# A fabric is read whole: no cluster nodes needed, and no cheaper answer for a few joining nodes.
SOURCE = Source(NAME, options.InfinibandOptions, add_arguments, discover, needs_nodes=False, per_node=False,
                reads_provider_id=False)
