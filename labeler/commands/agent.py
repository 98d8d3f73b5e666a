"""`topolabel agent`: publish this node's LLDP neighbours on its own Node (runs in a hostNetwork DaemonSet)."""

from __future__ import annotations

import argparse
import os
import sys

from providers.lldp_facts import to_json

from ..agent import Agent, annotation_patch, lldpcli_command, read_neighbors, run as run_agent
from ..kube import call_with_retries, connect, patch_node
from ..model import TopologyError

EXAMPLES = """examples:
  NODE_NAME=gpu-001 topolabel agent --once                   # one round, then exit
  topolabel agent --lldp-socket /run/topolabel/lldpd.socket  # the DaemonSet's loop (manifests/agent)
  topolabel agent --once --print > facts/$(hostname).json    # offline: a file for --lldp-dir
"""


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("agent", help="publish this node's LLDP neighbours as an annotation on its own Node",
                            epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--node-name", help="this node's name (default: $NODE_NAME, from the downward API)")
    parser.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig (default: the in-cluster account)")
    parser.add_argument("--context", help="kubeconfig context")
    parser.add_argument("--lldpcli", default="lldpcli", metavar="PATH", help="lldpcli to run (default: lldpcli)")
    parser.add_argument("--lldp-socket", metavar="PATH", help="lldpd's control socket (default: lldpcli's own)")
    parser.add_argument("--interval", type=float, default=300.0, metavar="SECONDS",
                        help="seconds between rounds (default: 300)")
    parser.add_argument("--resync", type=float, default=3600.0, metavar="SECONDS",
                        help="patch even unchanged facts this often, to restore a removed annotation (default: 3600)")
    parser.add_argument("--once", action="store_true", help="one round, then exit; errors exit non-zero")
    parser.add_argument("--print", dest="print_only", action="store_true",
                        help="print the facts JSON to stdout instead of patching the Node")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.interval <= 0 or args.resync < 0:
        raise TopologyError("--interval must be positive and --resync not negative")
    command = lldpcli_command(args.lldpcli, args.lldp_socket)

    def collect() -> str:
        return to_json(read_neighbors(command))

    if args.print_only:
        agent = Agent(collect, lambda value: print(value, flush=True))
    else:
        node = args.node_name or os.environ.get("NODE_NAME")
        if not node:
            raise TopologyError("no node name: set NODE_NAME (downward API spec.nodeName) or give --node-name")
        api = connect(args.kubeconfig, args.context)
        agent = Agent(collect, lambda value: call_with_retries(lambda: patch_node(api, node, annotation_patch(value))),
                      resync=args.resync)
    return run_agent(agent, args.interval, args.once, log=sys.stderr)
