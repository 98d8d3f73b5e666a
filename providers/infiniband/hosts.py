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
from typing import Any, Callable, Mapping, Sequence

from labeler.errors import InputError
from labeler.nodes import Node

from .options import ANNOTATION
from .fabric import Fabric
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
class Hca:
    """A host HCA in the fabric and the switch ports it is cabled to: (switch GUID, switch port, own port)."""

    guid: int
    desc: str
    port_guids: tuple[int, ...]
    links: list[tuple[int, int, int]]
    host: str | None = None
    device: str | None = None
    unknown: str = ""  # why `host` is None

    @property
    def label(self) -> str:
        return f"HCA 0x{self.guid:016x} ({self.desc!r})"


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


def host_hcas(fabric: Fabric) -> tuple[list[Hca], int]:
    """Every host HCA with its switch links, and how many SHARP aggregation nodes were left out."""
    nodes = fabric.nodes
    links: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for u, v, data in fabric.cables:
        ku, kv = nodes[u]["kind"], nodes[v]["kind"]
        if ku == "ca" and kv == "switch":
            links[u].append((v, data["ends"][v], data["ends"][u]))
        elif kv == "ca" and ku == "switch":
            links[v].append((u, data["ends"][u], data["ends"][v]))
    hcas, aggregation = [], 0
    for guid in sorted(nodes):
        data = nodes[guid]
        if data["kind"] != "ca":
            continue
        if AGGREGATION in data["desc"].lower():
            aggregation += 1
            continue
        hcas.append(Hca(guid, data["desc"], tuple(data["port_guids"].values()), sorted(links[guid])))
    return hcas, aggregation


def assign_owners(hcas: Sequence[Hca], guids: GuidMap, resolve: Callable[[str], str | None]) -> list[tuple[str, str]]:
    """Set each HCA's host (a node name via `resolve(name)`) and device; returns (node, message) for each node
    in a contested claim (see the module's docstring), which the caller reports as claims.

    HCAs whose description is shared with another HCA cannot be told apart and stay unknown.
    """
    contested: list[tuple[str, str]] = []
    shared = Counter(h.desc for h in hcas)
    for hca in hcas:
        host, device, why = describe(hca.desc)
        if host and shared[hca.desc] > 1:
            host, why = None, f"description is on {shared[hca.desc]} HCAs"
        owners = guids.claimants((hca.guid, *hca.port_guids)) if guids.claims else {}
        named = (resolve(host) or host) if host else None
        mapped = {resolve(node) or node: owner for node, owner in owners.items()}
        disowned = named is not None and named in guids.annotated and named not in mapped
        claims = {**mapped, **({named: Owner(named, device)} if named and (mapped or disowned) else {})}
        if len(claims) > 1 or disowned:
            hca.device = device or next(iter(claims.values())).device
            hca.unknown = f"claimed by {', '.join(sorted(claims))}" + (" (not in its own annotation)" if disowned else "")
            for node in sorted(claims):
                contested.append((node, _contest(hca, node, named, mapped, disowned)))
        elif mapped:
            node, owner = next(iter(mapped.items()))
            hca.host, hca.device = node, owner.device or device
        elif host:
            hca.host, hca.device = named, device
        else:
            hca.device, hca.unknown = device, why
    return contested


def _contest(hca: Hca, node: str, named: str | None, mapped: Mapping[str, Owner], disowned: bool) -> str:
    """The problem of one node in a contested claim on `hca`."""
    how = " and ".join((["a GUID map entry or annotation"] if node in mapped else [])
                       + (["the HCA's description"] if node == named else []))
    others = sorted(set(mapped) | ({named} if named else set()) - {node})
    why = (f"by {how}, but its own {ANNOTATION} annotation does not list it" if disowned and node == named
           else f"by {how}, and also to {', '.join(others)}")
    return (f"{hca.label} is given to this node {why}; it counts for no node and their labels stay as they are "
            "(correct the GUID map, the annotation or the HCA's description)")


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
