"""Fabric health evidence from one discovery of the fabric, and from its ports' error counters.

What the fabric shows about each host, as findings (`labeler.topology.isolation`):
- `rate`: an HCA link narrower or slower than most HCA links;
- `link`: a host without a link to a leaf of its leaf group (a cable out, an HCA port down);
- `uplinks`: the host sits behind a leaf that lost at least `uplink_loss` of the uplinks its peers have
  (every host behind that leaf, together: scope `leaf <name>`);
- `unreachable`: a host an earlier discovery saw is not in the fabric any more (its leaf cut off, or every
  cable down); the hosts seen are handed back as the baseline for the next pass;
- `errors`: a port's error counters rose past their limits since the last reading (`ibqueryerrors`), on the
  host's HCA or on the leaf port its cable ends in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from labeler.topology.isolation import Finding

from .fabric import Fabric
from .health import slow_links, uplink_gaps
from .hosts import links
from .place import Request, Survey, survey
from .portrecord import increases
from .queryerrors import PortErrors

Baseline = dict[str, list[str]]  # host -> the leaves it was seen behind
Counters = dict[str, dict[str, int]]  # "GUID/port" -> counter -> value


@dataclass
class FabricEvidence:
    findings: list[Finding] = field(default_factory=list)
    hosts: Baseline = field(default_factory=dict)  # the hosts this discovery saw, for the next pass
    counters: Counters = field(default_factory=dict)  # the counters read, for the next pass
    notices: list[str] = field(default_factory=list)  # what concerns no host (errors between switches)


@dataclass(frozen=True)
class Readings:
    """Port error counters read over the fabric, and what the last reading held (None: no earlier reading,
    so the values since the counters were last cleared count)."""

    errors: PortErrors
    before: Mapping[str, Mapping[str, int]] | None = None
    at: float | None = None


def fabric_evidence(fabric: Fabric, request: Request, uplink_loss: float, limits: Mapping[str, int],
                    known: Mapping[str, list[str]] | None = None, readings: Readings | None = None) -> FabricEvidence:
    seen = survey(fabric, request)
    names, host_of, out = seen.names, seen.host_of, FabricEvidence()
    behind: dict[int, list[str]] = {}  # leaf -> hosts cabled to it
    for hca, host in host_of.items():
        for leaf, _, _ in links(fabric, hca):
            behind.setdefault(leaf, []).append(host)
            out.hosts.setdefault(host, []).append(names[leaf])
    out.hosts = {h: sorted(set(leaves)) for h, leaves in out.hosts.items()}
    for message, hcas in slow_links(fabric, seen.tiers, names):
        for hca in hcas:
            if hca in host_of:
                out.findings.append(Finding(host_of[hca], "rate", message))
    for host, leaves in sorted(seen.groups.missing.items()):
        missing = ", ".join(sorted(names[leaf] for leaf in leaves))
        out.findings.append(Finding(host, "link", f"no link to leaf {missing} of its leafgroup (cable out or HCA "
                                                  "port down)"))
    for gap in uplink_gaps(fabric, seen.tiers, seen.blocks.of, names):
        lost = len(gap.missing) / gap.expected
        if gap.rank == 1 and lost >= uplink_loss:
            leaf_name = names[gap.switch]
            for host in sorted(set(behind.get(gap.switch, ()))):
                out.findings.append(Finding(host, "uplinks", f"behind leaf {leaf_name}, which lost "
                                                             f"{len(gap.missing)} of the {gap.expected} uplinks its "
                                                             "peers have", scope=f"leaf {leaf_name}"))
    for host, was_behind in sorted((known or {}).items()):
        if host not in out.hosts:
            scope = f"leaf {was_behind[0]}" if len(was_behind) == 1 else "node"
            out.findings.append(Finding(host, "unreachable", f"not in the fabric any more (was behind "
                                                             f"{', '.join(was_behind)}): its leaf is cut off, or every "
                                                             "cable of its HCAs is down", scope=scope))
    if readings is not None:
        _errors(fabric, seen, readings, limits, out)
    return out


def _errors(fabric: Fabric, seen: Survey, readings: Readings, limits: Mapping[str, int], out: FabricEvidence) -> None:
    """Counter increases past their limits, on a host's HCA port or on the leaf port facing it."""
    host_of, names = seen.host_of, seen.names
    owner = {fabric.guids[hca]: hca for hca in host_of}  # an HCA by its GUID or any of its port GUIDs
    owner.update((port_guid, node) for (node, _), port_guid in fabric.port_guids.items() if node in host_of)
    device = dict(zip(seen.hcas.nodes, seen.hcas.devices))
    for (guid, port), counters in sorted(readings.errors.items()):
        key = f"{guid:016x}/{port}"
        out.counters[key] = dict(counters)
        rise = increases(counters, None if readings.before is None else readings.before.get(key, {}))
        over = {k: v for k, v in sorted(rise.items()) if v >= limits.get(k, 0) > 0}
        if not over:
            continue
        text = ", ".join(f"{k} +{v}" for k, v in over.items())
        hca, where = owner.get(guid), ""
        if hca is not None:
            where = f"{device[hca] or f'HCA 0x{fabric.guids[hca]:016x}'} port {port}"
        elif guid in fabric.index:
            node = fabric.index[guid]
            end = fabric.ports[node].get(port)
            hca = end[0] if end is not None and end[0] in host_of else None
            name = names.get(node, f"0x{guid:016x}")
            where = f"leaf {name} port {port}, facing its HCA"
            if hca is None:
                out.notices.append(f"switch {name} port {port}: {text}")
                continue
        if hca is None:
            out.notices.append(f"port 0x{guid:016x}/{port} (not in the fabric discovered): {text}")
            continue
        flap = " (the link went down: it flaps)" if "link_downed" in over else ""
        out.findings.append(Finding(host_of[hca], "errors", f"{where}: {text}{flap}", at=readings.at))
