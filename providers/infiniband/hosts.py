"""Which host owns each HCA: its description, or a GUID map (file or node annotations) when it has none.

An HCA's description is `<hostname> <device>` (`a08-p1-dgx-04-c01 mlx5_5`) once rdma-ndd or the driver has
set it. Until then it is the adapter's default (`MT4129 ConnectX7   Mellanox Technologies`), which names no
host; such HCAs are mapped by GUID. A GUID map comes from a file (`--guid-map`) or from the node
annotation `topolabel.dev/ib-node-guids` that an agent writes from `/sys/class/infiniband/*/node_guid`.
Both hold entries `GUID` or `DEVICE=GUID` (GUIDs as `0x...`, plain hex or `/sys`'s `xxxx:xxxx:xxxx:xxxx`).
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
    """GUID -> owner from a file and/or node annotations, with the entries that could not be read."""

    owners: dict[int, Owner] = field(default_factory=dict)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (node, message)
    by_node: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))

    def add(self, node: str, value: Any, origin: str) -> None:
        """Add one node's entries: a string (`mlx5_0=0x..., mlx5_1=...`), a list of them, or an int GUID."""
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
                self.owners[guid] = Owner(node, device)
                self.by_node[node].add(guid)


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
            guids.add(node.name, value, f"annotation {key}")


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


def assign_owners(hcas: Sequence[Hca], guids: GuidMap, resolve: Callable[[str], str | None]) -> list[str]:
    """Set each HCA's host (a node name via `resolve(name)`) and device; returns notices on conflicts.

    A GUID map wins over the description: the agent read the GUID on the host itself, while a description
    can be stale. HCAs whose description is shared with another HCA cannot be told apart and stay unknown.
    """
    notices = []
    shared = Counter(h.desc for h in hcas)
    owners = guids.owners
    for hca in hcas:
        host, device, why = describe(hca.desc)
        if host and shared[hca.desc] > 1:
            host, why = None, f"description is on {shared[hca.desc]} HCAs"
        owner = next((owners[g] for g in (hca.guid, *hca.port_guids) if g in owners), None) if owners else None
        if owner is not None:
            mapped = resolve(owner.node) or owner.node
            named = resolve(host) if host else None
            if named and named != mapped:
                notices.append(f"{hca.label}: description says host {host!r}, GUID map says {owner.node!r}; "
                               "using the GUID map")
            hca.host, hca.device = mapped, owner.device or device
        elif host:
            hca.host, hca.device = resolve(host) or host, device
        else:
            hca.device, hca.unknown = device, why
    return notices


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
