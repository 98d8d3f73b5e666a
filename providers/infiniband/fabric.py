"""The fabric model: an InfiniBand fabric's nodes and the cables between their ports, as columns.

Every input of the InfiniBand source makes one: `ibnetdiscover` output (providers.infiniband.parse), the
fabric the collector publishes (providers.infiniband.published), and any other inventory of a fabric (a UFM
export) or a filter of one (leaving out a storage fabric). The placement (place, hosts, tiers, health) reads
nothing else.

Nodes are numbered 0..n-1 in the order the input first names them (ibnetdiscover: a node's own record, or a
port line naming it as the far end), and each column holds one value per node:

    guids[i]    node GUID (int)
    kinds[i]    "switch", "ca" (an HCA, or a SHARP aggregation node inside a switch) or "router"
    descs[i]    description (`MF0;A09-P1-IBLEAF-04-04:MQM9701/U1`, `a08-p1-dgx-04-c01 mlx5_5`)
    nports[i]   port count from the node's own record, None when the input has no record of it

Cables, each once, in the order the input first lists them:

    cables[c]   (a, port_a, b, port_b, rate): node and port at each end (a is the end whose record listed
                it first; a == b for a port cabled to another port of its own node), and an index into
    rates[r]    (width, speed): lanes (4) or None, speed ("HDR", ...) or None when the input says `?`

    port_guids  {(node, port): port GUID} for the ports whose GUID the input gives, in the order given

Derived on the way in, and kept because every step of the placement asks for it:

    ports[i]    {port: (peer node, peer port, cable)}: node i's cabled ports, in cable order
    index       {GUID: node}

Columns and tuples rather than a dict per node and per cable: an 8,192-HCA fabric has 17,000 cables and
8,600 nodes, and the objects alone cost more than reading them (issue 33).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

Cable = tuple[int, int, int, int, int]  # (a, port_a, b, port_b, rate)
Rate = tuple["int | None", "str | None"]  # (width, speed)
PortEnd = tuple[int, int, int]  # (peer node, peer port, cable)


@dataclass
class Fabric:
    """A fabric as columns (this module's docstring says what each holds)."""

    guids: list[int]
    kinds: list[str]
    descs: list[str]
    nports: list[int | None]
    cables: list[Cable]
    rates: list[Rate]
    port_guids: dict[tuple[int, int], int] = field(default_factory=dict)
    ports: list[dict[int, PortEnd]] = field(default_factory=list, repr=False, compare=False)
    index: dict[int, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """`ports` from the cables, unless the maker has them already (the reader fills them as it reads)."""
        if len(self.ports) != len(self.guids):
            self.ports = [{} for _ in self.guids]
            for c, (a, pa, b, pb, _) in enumerate(self.cables):
                self.ports[a][pa] = (b, pb, c)
                self.ports[b][pb] = (a, pa, c)
        self.index = dict(zip(self.guids, range(len(self.guids))))

    def __len__(self) -> int:
        return len(self.guids)

    def rate(self, cable: int) -> Rate:
        return self.rates[self.cables[cable][4]]

    def peers(self, node: int) -> dict[int, list[int]]:
        """Node's peers -> the cables to each, peers in the order of their first cable (as networkx's
        MultiGraph built from the cables in order had them)."""
        found: dict[int, list[int]] = {}
        for peer, _, cable in sorted(self.ports[node].values(), key=_cable_of):
            cables = found.setdefault(peer, [])
            if not cables or cables[-1] != cable:  # a cable between two ports of one node is listed at both
                cables.append(cable)
        return found

    def edges(self) -> Iterator[tuple[int, int, int]]:
        """(node, peer, cable) for every cable once: by node in order, then by peer in the order of its first
        cable, then by cable (the order of networkx.MultiGraph.edges, which reports used to follow)."""
        seen: set[int] = set()
        for node in range(len(self.guids)):
            for peer, cables in self.peers(node).items():
                if peer not in seen:
                    for cable in cables:
                        yield node, peer, cable
            seen.add(node)


def _cable_of(end: PortEnd) -> int:
    return end[2]
