"""`topolabel agent`: publish this node's LLDP neighbours, NVLink domain and InfiniBand HCA GUIDs on its own
Node (a DaemonSet), or, with --ib-collector, collect and publish the InfiniBand fabric (one node per fabric)."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any, Callable

from labeler.cluster.kube import call_with_retries, patch_node
from labeler.errors import TopologyError
from labeler.topology.isolation import COUNTERS
from providers.gpu_clique import ANNOTATION as CLIQUE_ANNOTATION, read_clique
from providers.infiniband import ANNOTATION as IB_ANNOTATION, DEFAULT_NAMESPACE
from providers.infiniband.portrecord import ANNOTATION as PORT_ANNOTATION
from providers.infiniband.sysfs import guid_entries, read_devices
from providers.lldp.facts import ANNOTATION as LLDP_ANNOTATION, to_json

from ..agent import Agent, PortWatch, annotation_patch, lldpcli_command, read_neighbors, run as run_agent
from ..ibcollector import Collector, Settings, parse_fabric_names, run as run_collector
from . import COMMANDS
from .common import add_timeouts, connect, seconds, seconds_or_zero

FIELD_MANAGER = "topolabel-agent"  # the admission policy lets this manager's managedFields entry hold its keys only

EXAMPLES = """examples:
  NODE_NAME=gpu-001 topolabel agent --once                   # one round, then exit
  topolabel agent --lldp-socket /run/topolabel/lldpd.socket  # the DaemonSet's loop (manifests/agent)
  topolabel agent --once --print > facts/$(hostname).json    # offline: a file for --lldp-dir
  topolabel agent --nvlink --infiniband                      # also the NVLink domain and the HCA GUIDs
  topolabel agent --no-lldp --infiniband --ib-health         # the HCA GUIDs and the ports' health
  topolabel agent --ib-collector --ib-fabric 'compute=^mlx5_[0-7]$' --ib-fabric 'storage=^mlx5_(8|9)$'
"""


def register(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("agent", help=COMMANDS["agent"],
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
    parser.add_argument("--infiniband", action="store_true",
                        help=f"publish this node's InfiniBand HCA GUIDs (sysfs) as {IB_ANNOTATION}")
    parser.add_argument("--ib-health", action="store_true",
                        help=f"publish this node's InfiniBand ports (states, rates, error counter increases per round) "
                             f"as {PORT_ANNOTATION}, for fabric health (docs/health.md)")
    parser.add_argument("--sysfs", default="/sys", metavar="PATH", help="where sysfs is mounted (default: /sys)")
    collector = parser.add_argument_group("InfiniBand fabric collector (--ib-collector; docs/infiniband.md)")
    collector.add_argument("--ib-collector", action="store_true",
                           help="instead of annotating this node: run ibnetdiscover on one node per fabric (chosen by "
                                "a Lease) and publish the fabric for the operator's infiniband source")
    collector.add_argument("--ib-fabric", action="append", default=[], metavar="NAME=REGEX",
                           help="name a fabric by the HCAs on it (device name regex); repeat per fabric. "
                                "Default: one fabric per subnet prefix, named by it")
    collector.add_argument("--namespace", help=f"where leases and fabrics go (default: $POD_NAMESPACE, else "
                                               f"{DEFAULT_NAMESPACE})")
    collector.add_argument("--lease-duration", type=seconds, default=30.0, metavar="SECONDS",
                           help="a dead collector's fabric is taken over after this long (default: 30)")
    collector.add_argument("--ibnetdiscover", default="ibnetdiscover", metavar="PATH", help="ibnetdiscover to run")
    collector.add_argument("--ib-timeout", type=seconds, default=120.0, metavar="SECONDS",
                           help="give ibnetdiscover (and ibqueryerrors) this long (default: 120)")
    collector.add_argument("--ib-errors", action="store_true",
                           help="also run ibqueryerrors and publish how much each port's error counters rose since "
                                "the last run, for fabric health (needs a subnet manager: the PMA is reached by LID)")
    collector.add_argument("--ibqueryerrors", default="ibqueryerrors", metavar="PATH", help="ibqueryerrors to run")
    parser.add_argument("--interval", type=seconds, default=300.0, metavar="SECONDS",
                        help="seconds between rounds (default: 300)")
    parser.add_argument("--resync", type=seconds_or_zero, default=3600.0, metavar="SECONDS",
                        help="patch even unchanged facts this often, to restore a removed annotation (default: 3600)")
    parser.add_argument("--once", action="store_true", help="one round, then exit; errors exit non-zero")
    parser.add_argument("--alive-file", metavar="PATH", type=Path,
                        help="touch this file after every round (for a liveness probe: the loop still turns)")
    parser.add_argument("--print", dest="print_only", action="store_true",
                        help="print the facts JSON to stdout instead of patching the Node")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.ib_collector:
        return run_ib_collector(args)
    command = lldpcli_command(args.lldpcli, args.lldp_socket)
    collectors: dict[str, Callable[[], str | None]] = {}
    if args.lldp:
        collectors[LLDP_ANNOTATION] = lambda: to_json(read_neighbors(command))
    if args.nvlink:
        collectors[CLIQUE_ANNOTATION] = lambda: read_clique(args.nvidia_smi)
    if args.infiniband:
        collectors[IB_ANNOTATION] = lambda: guid_entries(read_devices(args.sysfs))
    if args.ib_health:
        collectors[PORT_ANNOTATION] = PortWatch(args.sysfs, list(COUNTERS))
    if not collectors:
        raise TopologyError("nothing to publish: --no-lldp needs --nvlink, --infiniband or --ib-health")

    def collect() -> dict[str, str | None]:
        return {key: read() for key, read in collectors.items()}

    agent: Agent[Any]
    if args.print_only:
        if not args.lldp:
            raise TopologyError("--print writes the LLDP facts file; it cannot go with --no-lldp")
        agent = Agent(collectors[LLDP_ANNOTATION], lambda value: print(value, flush=True))
    else:
        node = node_name(args)
        api = connect(args)

        def publish(value: dict[str, str | None]) -> None:
            call_with_retries(lambda: patch_node(api, node, annotation_patch(value), field_manager=FIELD_MANAGER),
                              budget=args.request_timeout)

        agent = Agent(collect, publish, resync=args.resync)
    return run_agent(agent, args.interval, args.once, log=sys.stderr, alive=args.alive_file)


def node_name(args: argparse.Namespace) -> str:
    node = args.node_name or os.environ.get("NODE_NAME")
    if not node:
        raise TopologyError("no node name: set NODE_NAME (downward API spec.nodeName) or give --node-name")
    return node


def run_ib_collector(args: argparse.Namespace) -> int:
    """The collector's loop until SIGTERM (or Ctrl-C), which hands its leases over on the way out."""
    if args.once or args.print_only or args.nvlink or args.infiniband or args.ib_health:
        raise TopologyError("--ib-collector runs alone until stopped: not with --once, --print, --nvlink, "
                            "--infiniband or --ib-health")
    if args.lease_duration < 3:
        raise TopologyError("--lease-duration must be at least 3 seconds")
    node = node_name(args)
    settings = Settings(namespace=args.namespace or os.environ.get("POD_NAMESPACE") or DEFAULT_NAMESPACE, node=node,
                        identity=os.environ.get("POD_NAME") or f"{node}-{socket.gethostname()}-{os.getpid()}",
                        sysfs=args.sysfs, named=parse_fabric_names(args.ib_fabric), interval=args.interval,
                        lease_duration=args.lease_duration, ibnetdiscover=args.ibnetdiscover, timeout=args.ib_timeout,
                        errors=args.ib_errors, ibqueryerrors=args.ibqueryerrors)
    collector = Collector(connect(args), settings, log=sys.stderr)
    signal.signal(signal.SIGTERM, _exit)
    try:
        return run_collector(collector)
    except KeyboardInterrupt:
        return 0


def _exit(*_: Any) -> None:
    raise KeyboardInterrupt  # unwinds through run_collector's finally, which releases the leases
