"""Topology from LLDP: each host under the top-of-rack switch (or MLAG pair) its data-plane ports hear.

Host facts come from the `topolabel.dev/lldp-neighbors` annotation that `topolabel agent` writes on its
own Node, or offline from a directory of `NODE.json` files (`--lldp-dir`; each the agent's facts JSON or
raw `lldpcli -f json0 show neighbors` output). Levels above the rack come from a switch map
(`--switch-map`) or from the switches' own LLDP facts (`--switch-lldp DIR` of `SWITCH.json`). See docs/lldp.md.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from pydantic import field_validator, model_validator

from labeler.errors import InputError, SourceError
from labeler.io.documents import read_document
from labeler.io.files import read_text
from labeler.topology.model import Discovery, Problem

from ..base import Options, Source, SourceContext, parse_options, regex
from .facts import ANNOTATION, Neighbor, read_facts
from .place import DEFAULT_MGMT, Fabric, aliases, fabric_from_map, fabric_from_switches, place

NAME = "lldp"
# With --lldp-dir no cluster is needed; reading the agent's annotations needs nodes, and says so.

HostFacts = dict[str, tuple[Neighbor, ...]]


class LldpOptions(Options):
    lldp_dir: str | None = None
    mgmt_interfaces: re.Pattern[str] = re.compile(DEFAULT_MGMT)
    switch_map: str | None = None
    switch_lldp: str | None = None

    @field_validator("mgmt_interfaces", mode="before")
    @classmethod
    def _pattern(cls, value: object) -> object:
        return regex(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_fabric(self) -> "LldpOptions":
        if self.switch_map and self.switch_lldp:
            raise ValueError("give a switch map or the switches' LLDP facts, not both (list MLAG pairs in the map)")
        return self


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("lldp source")
    group.add_argument("--lldp-dir", metavar="DIR",
                       help="NODE.json files (agent facts or lldpcli -f json0 output) instead of node annotations")
    group.add_argument("--mgmt-interfaces", metavar="REGEX",
                       help=f"management interfaces to ignore, on hosts and in switch facts (default: {DEFAULT_MGMT})")
    group.add_argument("--switch-map", metavar="FILE", help="YAML: switch -> levels above the rack, MLAG pairs")
    group.add_argument("--switch-lldp", metavar="DIR",
                       help="SWITCH.json LLDP facts of the switches: MLAG peers and blocks (leaves sharing spines)")


def discover(ctx: SourceContext) -> Discovery:
    opts = parse_options(LldpOptions, ctx)
    mgmt = opts.mgmt_interfaces
    hosts, problems = _from_dir(opts.lldp_dir, ctx) if opts.lldp_dir else _from_annotations(ctx)
    discovery = place(hosts, _fabric(opts, hosts, mgmt), mgmt, NAME)
    discovery.problems[:0] = problems
    return discovery


def _fabric(opts: LldpOptions, hosts: HostFacts, mgmt: re.Pattern[str]) -> Fabric:
    if opts.switch_map:
        return fabric_from_map(read_document(opts.switch_map), opts.switch_map, aliases(hosts))
    if opts.switch_lldp:
        switches = {}
        for name, path in _json_files(opts.switch_lldp).items():
            try:
                switches[name] = read_facts(read_text(path), str(path))
            except InputError as exc:
                raise SourceError(str(exc)) from None
        return fabric_from_switches(switches, hosts, mgmt, opts.switch_lldp)
    return Fabric(infer_pairs=True)


def _from_annotations(ctx: SourceContext) -> tuple[HostFacts, list[Problem]]:
    if not ctx.nodes:
        raise SourceError("lldp: no nodes to read the agent's annotations from; give --kubeconfig/--context "
                          "or --nodes, or read files with --lldp-dir")
    hosts: HostFacts = {}
    problems = []
    for node in ctx.nodes:
        text = node.annotations.get(ANNOTATION)
        if text is None:
            problems.append(Problem(NAME, f"no {ANNOTATION} annotation: is the topolabel agent running on it?",
                                    node.name))
            continue
        try:
            hosts[node.name] = read_facts(text, f"annotation {ANNOTATION}")
        except InputError as exc:
            problems.append(Problem(NAME, str(exc), node.name))
    return hosts, problems


def _from_dir(directory: str, ctx: SourceContext) -> tuple[HostFacts, list[Problem]]:
    """Facts of the cluster's nodes (or of every file when there are no nodes) from DIR/NODE.json."""
    files = _json_files(directory)
    names = [n.name for n in ctx.nodes] if ctx.nodes else sorted(files)
    hosts: HostFacts = {}
    problems = []
    for name in names:
        if name not in files:
            problems.append(Problem(NAME, f"no file {Path(directory) / (name + '.json')}", name))
            continue
        try:
            hosts[name] = read_facts(read_text(files[name]), str(files[name]))
        except InputError as exc:
            problems.append(Problem(NAME, str(exc), name))
    strays = sorted(set(files) - set(names))
    if strays:
        problems.append(Problem(NAME, f"{directory}: {len(strays)} file(s) for hosts that are not nodes, ignored: "
                                f"{', '.join(strays[:5])}{' ...' if len(strays) > 5 else ''}"))
    return hosts, problems


def _json_files(directory: str) -> dict[str, Path]:
    """`NAME.json` files in a directory: name -> path; an unreadable directory is a `SourceError`."""
    root = Path(directory)
    if not root.is_dir():
        raise SourceError(f"{directory}: not a directory")
    try:
        files = {p.stem: p for p in sorted(root.glob("*.json"))}
    except OSError as exc:
        raise SourceError(f"{directory}: cannot read: {exc.strerror or exc}") from None
    if not files:
        raise SourceError(f"{directory}: no NAME.json files")
    return files


# A fabric is read whole: no cluster nodes needed, and no cheaper answer for a few joining nodes.
SOURCE = Source(NAME, LldpOptions, add_arguments, discover, needs_nodes=False, per_node=False,
                reads_provider_id=False)
