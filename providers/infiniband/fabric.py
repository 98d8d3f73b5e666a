"""The fabric as the placement reads it: nodes by GUID, cables, and each node's cables by peer.

Not a networkx graph: importing networkx and building its MultiGraph of an 8,192-HCA fabric cost more than
the whole inference (about 0.15 + 0.1 CPU s of a 0.5 s discovery), and the placement needs only the
adjacency. `edges` and `number_of_edges` keep networkx.MultiGraph's names and order, so reports come out in
the order they always did.
"""

from __future__ import annotations

from typing import Iterator

# Nodes (GUID -> attributes, in the order the output lists them) and cables (in the same order): what the
# fabric is built from, and what the InfiniBand collector publishes (providers.infiniband.published).
Nodes = dict[int, dict]
Cables = list[tuple[int, int, dict]]


class Fabric:
    """Nodes (`kind`, `desc`, `nports`, `port_guids`), cables (`ends` {GUID: port}, `width`, `speed`), and
    `adj`: node -> peer -> the cables between them, peers in the order their first cable was listed."""

    __slots__ = ("nodes", "cables", "adj")

    def __init__(self, nodes: Nodes, cables: Cables) -> None:
        self.nodes = nodes
        self.cables = cables
        adj: dict[int, dict[int, list[dict]]] = {guid: {} for guid in nodes}
        for u, v, data in cables:
            peers = adj[u]
            if v in peers:
                peers[v].append(data)
            else:
                peers[v] = adj[v][u] = [data]  # one list for both ends (a loop has one end)
        self.adj = adj

    def between(self, u: int, v: int) -> list[dict]:
        """The cables between two nodes, in the order they were listed."""
        return self.adj[u].get(v, [])

    def number_of_edges(self) -> int:
        return len(self.cables)

    def edges(self, node: int | None = None, data: bool = False) -> Iterator[tuple]:
        """(node, peer[, cable]) for one node's cables, or every cable once: by node in order, then by peer."""
        seen: set[int] = set()
        for here in (self.adj if node is None else (node,)):
            for peer, cables in self.adj[here].items():
                if peer not in seen:
                    for cable in cables:
                        yield (here, peer, cable) if data else (here, peer)
            if node is None:
                seen.add(here)
