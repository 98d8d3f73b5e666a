"""Which host owns each HCA: its description, or a GUID map (file or node annotations) when it has none.

An HCA's description is `<hostname> <device>` (`a08-p1-dgx-04-c01 mlx5_5`) once rdma-ndd or the driver has
set it. Until then it is the adapter's default (`MT4129 ConnectX7   Mellanox Technologies`), which names no
host; such HCAs are mapped by GUID. A GUID map comes from a file (`--guid-map`) or from the node
annotation `topolabel.dev/ib-node-guids` that an agent writes from `/sys/class/infiniband/*/node_guid`.
Both hold entries `GUID` or `DEVICE=GUID` (GUIDs as `0x...`, plain hex or `/sys`'s `xxxx:xxxx:xxxx:xxxx`).

Each of these is a claim some node could have made up: a node writes its own annotation, and the host of an
HCA sets its description. So no claim beats another: an HCA that two of them give to different nodes (two
annotations, the map and an annotation, a description naming a node whose own annotation does not list the
HCA) belongs to none of them, and each node named is a problem marked as a claim. One node can then never
move another by claiming its HCAs; at worst the HCA goes unused and the nodes keep their labels.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from itertools import compress, repeat
from typing import Any, Callable, Mapping, Sequence, cast

from labeler.errors import InputError
from labeler.io.nodes import Node

from .fabric import Fabric
from .options import ANNOTATION
from .parse import parse_guid

# Descriptions an adapter ships with (no host in them), and host names an image boots with before it is named.
_DEFAULT_DESC = re.compile(r"^$|^MT[0-9]+\s|(?i:(mellanox|nvidia) technologies)\s*$")
GENERIC_HOSTS = frozenset({"localhost", "localhost.localdomain", "ubuntu", "debian", "(none)", "unknown"})
AGGREGATION = "aggregation node"  # SHARP aggregation nodes: CAs inside switches, not hosts


@dataclass(frozen=True)
class Owner:
    """Who an HCA belongs to according to a GUID map, and its device name when the map says."""

    node: str
    device: str | None = None


@dataclass
class Hcas:
    """The fabric's host HCAs, sorted by GUID, as columns (no object per HCA: there are tens of thousands).

    `hosts[i]` is HCA i's host (a node name) or None, then `unknown[i]` says why."""

    nodes: list[int]
    guids: list[int]
    descs: list[str]
    hosts: list[str | None] = field(default_factory=list)
    devices: list[str | None] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.nodes)

    def label(self, i: int) -> str:
        return f"HCA 0x{self.guids[i]:016x} ({self.descs[i]!r})"

    def counted(self, pattern: re.Pattern | None) -> dict[int, str]:
        """Fabric node -> host of the HCAs that place their host: a host known, and the device matching the
        pattern (one whose device name is unknown counts too); in GUID order."""
        if pattern is None:
            return cast("dict[int, str]", dict(compress(zip(self.nodes, self.hosts), self.hosts)))  # hosts, no None
        return {node: host for node, host, device in zip(self.nodes, self.hosts, self.devices)
                if host and (device is None or pattern.search(device))}


def links(fabric: Fabric, node: int) -> list[tuple[int, int, int]]:
    """An HCA's switch links as (switch, switch port, own port), by switch GUID (for reports about it)."""
    found = [(peer, peer_port, port) for port, (peer, peer_port, _) in fabric.ports[node].items()
             if fabric.kinds[peer] == "switch"]
    return sorted(found, key=lambda link: (fabric.guids[link[0]], link[1], link[2]))


@dataclass
class GuidMap:
    """GUID -> the nodes that claim it (a file and/or node annotations), with the entries that could not be
    read. `annotated`: nodes that published their own GUIDs (an annotation lists all of a node's HCAs)."""

    claims: dict[int, dict[str, Owner]] = field(default_factory=lambda: defaultdict(dict))
    errors: list[tuple[str, str]] = field(default_factory=list)  # (node, message)
    by_node: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    annotated: set[str] = field(default_factory=set)

    def add(self, node: str, value: Any, origin: str, own: bool = False) -> None:
        """Add one node's entries: a string (`mlx5_0=0x..., mlx5_1=...`), a list of them, or an int GUID.
        `own`: the node published them itself (its annotation)."""
        items = value if isinstance(value, list) else [value]
        for item in items:
            for entry in (re.split(r"[\s,]+", item.strip()) if isinstance(item, str) else [item]):
                if entry == "":
                    continue
                try:
                    device, guid = _entry(entry)
                except InputError as exc:
                    self.errors.append((node, f"{origin}: {exc}"))
                    continue
                self.claims[guid].setdefault(node, Owner(node, device))
                self.by_node[node].add(guid)
        if own:
            self.annotated.add(node)

    def claimants(self, guids: Sequence[int]) -> dict[str, Owner]:
        """Every node that claims one of `guids` (an HCA's node and port GUIDs)."""
        found: dict[str, Owner] = {}
        for guid in guids:
            for node, owner in self.claims.get(guid, {}).items():
                found.setdefault(node, owner)
        return found


def _entry(entry: Any) -> tuple[str | None, int]:
    if isinstance(entry, int) and not isinstance(entry, bool):
        return None, entry
    if not isinstance(entry, str):
        raise InputError(f"{entry!r} is not a GUID")
    device, sep, guid = entry.rpartition("=")
    return (device or None) if sep else None, parse_guid(guid)


def guid_map_from(data: Any, origin: str) -> GuidMap:
    """A `--guid-map` document: a mapping of node (or host) name to its entries."""
    if not isinstance(data, Mapping):
        raise InputError(f"{origin}: expected a mapping of node name to GUIDs "
                         "(`gpu-001: [mlx5_0=0x0c42a10300b4e3f0, ...]`)")
    found = GuidMap()
    for node, value in data.items():
        found.add(str(node), value, origin)
    return found


MAX_ANNOTATION = 4096  # 32 HCAs as `mlx5_NN=0x<16 hex digits>`, with room to spare; a node writes its own


def add_annotations(guids: GuidMap, nodes: Sequence[Node], key: str = ANNOTATION) -> None:
    for node in nodes:
        value = node.annotations.get(key)
        if value and len(value) > MAX_ANNOTATION:
            guids.errors.append((node.name, f"annotation {key}: {len(value)} characters, more than {MAX_ANNOTATION}"))
        elif value:
            guids.add(node.name, value, f"annotation {key}", own=True)


def describe(desc: str) -> tuple[str | None, str | None, str]:
    """(host, device, why no host) from an HCA description."""
    if _DEFAULT_DESC.search(desc.strip()):
        return None, None, "default description, no host name"
    host, _, device = desc.strip().partition(" ")
    if host.lower() in GENERIC_HOSTS:
        return None, device.strip() or None, f"description names the generic host {host!r}"
    return host, device.strip() or None, ""


def describe_all(descs: Sequence[str]) -> tuple[list[str | None], list[str | None], list[str]]:
    """`describe` of every description, as (hosts, devices, whys) columns.

    Whole columns at once when no description is a vendor default, names a generic host or holds a line
    end (so every one splits into host and device as it stands); otherwise one at a time."""
    stripped = list(map(str.strip, descs))
    joined = "\n".join(stripped)
    if stripped and joined.count("\n") == len(stripped) - 1 and not _maybe_default(joined):
        hosts, _, devices = zip(*map(str.partition, stripped, repeat(" ")))
        if GENERIC_HOSTS.isdisjoint("\n".join(hosts).lower().split("\n")):
            devices = tuple(map(str.strip, devices))
            return list(hosts), [d or None for d in devices] if "" in devices else list(devices), [""] * len(descs)
    hosts_, devices_, whys = zip(*map(describe, descs)) if descs else ((), (), ())
    return list(hosts_), list(devices_), list(whys)


def _maybe_default(joined: str) -> bool:
    """Whether any of the stripped descriptions joined by newlines may be a default one: an empty line, a line
    starting `MT`, `technologies` in any case anywhere, or any letter outside ASCII (which `(?i)` may take for
    one of its letters). Plain string searches, not the expression tried at every position."""
    text = f"\n{joined}\n"
    return "\n\n" in text or "\nMT" in text or not joined.isascii() or "technologies" in joined.lower()


def host_hcas(fabric: Fabric) -> tuple[Hcas, int]:
    """Every host HCA, and how many SHARP aggregation nodes were left out."""
    kinds, descs, guids = fabric.kinds, fabric.descs, fabric.guids
    cas = [node for node, kind in enumerate(kinds) if kind == "ca"]
    aggregation = 0
    if AGGREGATION in "\n".join(map(descs.__getitem__, cas)).lower():
        kept = [node for node in cas if AGGREGATION not in descs[node].lower()]
        aggregation, cas = len(cas) - len(kept), kept
    cas.sort(key=guids.__getitem__)
    return Hcas(cas, list(map(guids.__getitem__, cas)), list(map(descs.__getitem__, cas))), aggregation


def assign_owners(hcas: Hcas, fabric: Fabric, guids: GuidMap,
                  resolve: Callable[[str], str | None]) -> list[tuple[str, str]]:
    """Set each HCA's host (a node name via `resolve(name)`) and device; returns (node, message) for each node
    in a contested claim (see the module's docstring), which the caller reports as claims.

    HCAs whose description is shared with another HCA cannot be told apart and stay unknown.
    """
    hosts, devices, whys = describe_all(hcas.descs)
    shared = Counter(hcas.descs) if len(set(hcas.descs)) < len(hcas.descs) else None
    if shared is None and not guids.claims and not guids.annotated and resolve is str.lower and None not in hosts:
        # the usual case, whole columns at once: every HCA names its host, and hosts are node names as they are
        hcas.hosts[:] = "\n".join(cast("list[str]", hosts)).lower().split("\n")
        hcas.devices, hcas.unknown = devices, whys
        return []
    contested: list[tuple[str, str]] = []
    port_guids = _port_guids_by_node(fabric) if guids.claims else {}
    for i, desc in enumerate(hcas.descs):
        host, device, why = hosts[i], devices[i], whys[i]
        if host and shared and shared[desc] > 1:
            host, why = None, f"description is on {shared[desc]} HCAs"
        owners = guids.claimants((hcas.guids[i], *port_guids.get(hcas.nodes[i], ()))) if guids.claims else {}
        named = (resolve(host) or host) if host else None
        mapped = {resolve(node) or node: owner for node, owner in owners.items()}
        disowned = named is not None and named in guids.annotated and named not in mapped
        claims = {**mapped, **({named: Owner(named, device)} if named and (mapped or disowned) else {})}
        owner_host: str | None = None
        if len(claims) > 1 or disowned:
            device = device or next(iter(claims.values())).device
            why = f"claimed by {', '.join(sorted(claims))}" + (" (not in its own annotation)" if disowned else "")
            for node in sorted(claims):
                contested.append((node, _contest(hcas.label(i), node, named, mapped, disowned)))
        elif mapped:
            owner_host, owner = next(iter(mapped.items()))
            device, why = owner.device or device, ""
        elif host:
            owner_host, why = named, ""
        hcas.hosts.append(owner_host)
        hcas.devices.append(device)
        hcas.unknown.append(why)
    return contested


def _contest(label: str, node: str, named: str | None, mapped: Mapping[str, Owner], disowned: bool) -> str:
    """The problem of one node in a contested claim on the HCA `label` names."""
    how = " and ".join((["a GUID map entry or annotation"] if node in mapped else [])
                       + (["the HCA's description"] if node == named else []))
    others = sorted(set(mapped) | ({named} if named else set()) - {node})
    why = (f"by {how}, but its own {ANNOTATION} annotation does not list it" if disowned and node == named
           else f"by {how}, and also to {', '.join(others)}")
    return (f"{label} is given to this node {why}; it counts for no node and their labels stay as they are "
            "(correct the GUID map, the annotation or the HCA's description)")


def _port_guids_by_node(fabric: Fabric) -> dict[int, list[int]]:
    """Node -> its port GUIDs, in the order the input gave them."""
    found: dict[int, list[int]] = defaultdict(list)
    for (node, _), port_guid in fabric.port_guids.items():
        found[node].append(port_guid)
    return found


def name_resolver(nodes: Sequence[Node]) -> Callable[[str], str | None]:
    """name -> Kubernetes node name (exact, else the short name case-insensitively).

    Without nodes every host stands for itself, lower-cased as Kubernetes node names are.
    """
    if not nodes:
        return str.lower
    exact = {n.name for n in nodes}
    short: dict[str, list[str]] = defaultdict(list)
    for n in nodes:
        short[n.name.split(".", 1)[0].lower()].append(n.name)

    def resolve(name: str) -> str | None:
        if name in exact:
            return name
        matches = short.get(name.split(".", 1)[0].lower(), [])
        return matches[0] if len(matches) == 1 else None

    return resolve
