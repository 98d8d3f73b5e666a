"""`topolabel agent`: publish this node's LLDP neighbours and NVLink domain on its own Node (a DaemonSet)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Callable

from labeler.errors import TopologyError
from labeler.kube import call_with_retries, patch_node
from providers.gpu_clique import ANNOTATION as CLIQUE_ANNOTATION, read_clique
from providers.lldp.facts import ANNOTATION as LLDP_ANNOTATION, to_json

from ..agent import Agent, annotation_patch, lldpcli_command, read_neighbors, run as run_agent
from .common import add_timeouts, kube_of

FIELD_MANAGER = "topolabel-agent"  # the admission policy lets this manager's managedFields entry hold its keys only
EXAMPLES = """examples:
  NODE_NAME=gpu-001 topolabel agent --once                   # one round, then exit
  topolabel agent --lldp-socket /run/topolabel/lldpd.socket  # the DaemonSet's loop (manifests/agent)
  topolabel agent --once --print > facts/$(hostname).json    # offline: a file for --lldp-dir
  topolabel agent --nvlink                                   # also the NVLink domain from nvidia-smi
"""


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("agent", help="publish this node's LLDP neighbours (and NVLink domain) on its own Node",
                            epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--node-name", help="this node's name (default: $NODE_NAME, from the downward API)")
    parser.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig (default: the in-cluster account)")
    parser.add_argument("--context", help="kubeconfig context")
    add_timeouts(parser)
    parser.add_argument("--lldpcli", default="lldpcli", metavar="PATH", help="lldpcli to run (default: lldpcli)")
    parser.add_argument("--lldp-socket", metavar="PATH", help="lldpd's control socket (default: lldpcli's own)")
    parser.add_argument("--no-lldp", dest="lldp", action="store_false", help="do not publish LLDP neighbours")
    parser.add_argument("--nvlink", action="store_true",
                        help=f"publish the NVLink domain (nvidia-smi fabric.clusterUuid.cliqueId) as {CLIQUE_ANNOTATION}")
    parser.add_argument("--nvidia-smi", default="nvidia-smi", metavar="PATH", help="nvidia-smi to run")
    parser.add_argument("--interval", type=float, default=300.0, metavar="SECONDS",
                        help="seconds between rounds (default: 300)")
    parser.add_argument("--resync", type=float, default=3600.0, metavar="SECONDS",
                        help="patch even unchanged facts this often, to restore a removed annotation (default: 3600)")
    parser.add_argument("--once", action="store_true", help="one round, then exit; errors exit non-zero")
    parser.add_argument("--alive-file", metavar="PATH", type=Path,
                        help="touch this file after every round (for a liveness probe: the loop still turns)")
    parser.add_argument("--print", dest="print_only", action="store_true",
                        help="print the facts JSON to stdout instead of patching the Node")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.interval <= 0 or args.resync < 0:
        raise TopologyError("--interval must be positive and --resync not negative")
    command = lldpcli_command(args.lldpcli, args.lldp_socket)
    collectors: dict[str, Callable[[], str | None]] = {}
    if args.lldp:
        collectors[LLDP_ANNOTATION] = lambda: to_json(read_neighbors(command))
    if args.nvlink:
        collectors[CLIQUE_ANNOTATION] = lambda: read_clique(args.nvidia_smi)
    if not collectors:
        raise TopologyError("nothing to publish: --no-lldp needs --nvlink")

    def collect() -> dict[str, str | None]:
        return {key: read() for key, read in collectors.items()}

    if args.print_only:
        if not args.lldp:
            raise TopologyError("--print writes the LLDP facts file; it cannot go with --no-lldp")
        agent = Agent(collectors[LLDP_ANNOTATION], lambda value: print(value, flush=True))
    else:
        node = args.node_name or os.environ.get("NODE_NAME")
        if not node:
            raise TopologyError("no node name: set NODE_NAME (downward API spec.nodeName) or give --node-name")
        api = kube_of(args)

        def publish(value: dict[str, str | None]) -> None:
            call_with_retries(lambda: patch_node(api, node, annotation_patch(value), field_manager=FIELD_MANAGER))

        agent = Agent(collect, publish, resync=args.resync)
    return run_agent(agent, args.interval, args.once, log=sys.stderr, alive=args.alive_file)
