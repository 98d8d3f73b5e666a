"""`topolabel run`: the operator that keeps node labels and Kueue objects in sync with the topology."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys

from pythonjsonlogger.json import JsonFormatter

from labeler.cluster.timeouts import Timeouts
from labeler.errors import InputError

from ..operator.settings import RunOptions, operator_namespace
from . import COMMANDS
from .common import seconds

EXAMPLES = """examples:
  topolabel run --source labels --preset gke --kubeconfig ~/.kube/config
  topolabel run --config topolabel.yaml --resync 120 --http 127.0.0.1:9090
  topolabel run            # config from the TopologyLabeler named 'default' (in-cluster)
  topolabel run --log-format json | jq 'select(.node == "gpu-017")'   # one node's story
"""


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("run", help=COMMANDS["run"],
                            parents=[parents["config"], parents["cluster"], parents["source"]], epilog=EXAMPLES,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_argument_group("operator")
    group.add_argument("--name", default="default",
                       help="the TopologyLabeler whose spec is the config, if it exists (default: default)")
    group.add_argument("--resync", type=seconds, default=300.0, metavar="SECONDS",
                       help="full resync interval (default: 300)")
    group.add_argument("--source-timeout", type=seconds, default=120.0, metavar="SECONDS",
                       help="give up on a discovery after this long; the last good topology stays (default: 120)")
    group.add_argument("--http", type=_address, default=("0.0.0.0", 8080), metavar="HOST:PORT",
                       help="serve /metrics, /healthz, /readyz here (default: 0.0.0.0:8080; port 0 picks one)")
    group.add_argument("--leader-elect", action="store_true",
                       help="run as one of several replicas: work only while holding the Lease topolabel-operator "
                            "in the operator's namespace (the manifests run 2 replicas with it)")
    group.add_argument("--capacity-metrics", action="store_true",
                       help="after each full pass, export what Kueue's TAS counts as free per flavor and level "
                            "(topolabel_capacity_*; needs `list pods` cluster-wide: manifests/capacity)")
    group.add_argument("--verbose", action="store_true", help="debug logging")
    group.add_argument("--log-format", choices=("text", "json"), default="text",
                       help="json: one object per line with time, level, logger, message and, where they apply, "
                            "node, source and reason (default: text)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..operator.handlers import Operator  # kopf loads in seconds; only this command needs it
    from ..operator.leader import LeadershipLost

    if args.nodes:
        raise InputError("--nodes is a file; the operator watches a cluster (use --kubeconfig)")
    configure_logging(args.log_format, args.verbose)
    host, port = args.http
    opts = RunOptions(kubeconfig=args.kubeconfig, context=args.context, config_path=args.config, flags=vars(args),
                      name=args.name, namespace=operator_namespace(), resync=args.resync,
                      source_timeout=args.source_timeout, http_host=host, http_port=port,
                      timeouts=Timeouts(args.connect_timeout, args.request_timeout), leader_election=args.leader_elect,
                      capacity_metrics=args.capacity_metrics)
    try:
        asyncio.run(Operator(opts).run())
    except LeadershipLost as exc:
        # exit at once: threads still writing must not outlive the Lease (the pod restarts as a standby)
        print(f"topolabel run: error: {exc}", file=sys.stderr, flush=True)
        os._exit(2)
    return 0


def configure_logging(fmt: str, verbose: bool) -> None:
    """Text for people, or JSON lines for a log pipeline (fields, not parsing, pick out a node or a source)."""
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter("%(levelname)s %(name)s %(message)s", timestamp="time",
                                           rename_fields={"levelname": "level", "name": "logger"}))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=[handler], force=True)
    if not verbose:  # kopf logs every handled Node event at INFO
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return host or "0.0.0.0", int(port)
