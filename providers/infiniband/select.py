"""Leaving part of a fabric out of placement: a storage fabric's switches and HCAs, picked by description or GUID.

GPU hosts often have HCAs on two InfiniBand networks, compute and storage. When one subnet manager (or UFM)
sees both, the storage leaves join every host's leaf set and the leaf groups come out wrong. The selection
works on the fabric model alone (nodes and cables, `providers.infiniband.fabric`), so it applies the same to
a parsed `ibnetdiscover` output, a published fabric and a UFM fabric, whatever reads them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .fabric import Fabric


@dataclass(frozen=True)
class Exclusion:
    """Switches and HCAs to leave out: those whose description matches `pattern`, or whose node or port GUID is
    in `guids`."""

    pattern: re.Pattern | None = None
    guids: frozenset[int] = frozenset()

    def __bool__(self) -> bool:
        return self.pattern is not None or bool(self.guids)

    def matches(self, guid: int, data: dict) -> bool:
        if guid in self.guids or not self.guids.isdisjoint(data["port_guids"].values()):
            return True
        return self.pattern is not None and data["kind"] != "router" and bool(self.pattern.search(data["desc"]))


def exclude(fabric: Fabric, exclusion: Exclusion) -> tuple[Fabric, str | None]:
    """The fabric without the selected nodes and their cables, and a notice of what went (None: nothing).

    An HCA left without a cable goes too: every link it had led into the left-out part, so it belongs to that
    network (a host's storage HCA when the storage leaves are selected). Nodes and cables keep their order.
    """
    if not exclusion:
        return fabric, None
    nodes = fabric.nodes
    gone = {guid for guid, data in nodes.items() if exclusion.matches(guid, data)}
    cables = [cable for cable in fabric.cables if cable[0] not in gone and cable[1] not in gone]
    cabled = {end for u, v, _ in cables for end in (u, v)}
    stranded = {guid for guid, data in nodes.items()
                if guid not in gone and data["kind"] == "ca" and guid not in cabled and fabric.adj[guid]}
    left_out = gone | stranded
    kept = {guid: data for guid, data in nodes.items() if guid not in left_out}
    if not gone:
        return fabric, "--ib-exclude/--ib-exclude-guids select nothing in the fabric: check the pattern and GUIDs"
    switches = sum(1 for guid in gone if nodes[guid]["kind"] == "switch")
    return Fabric(kept, cables), (
        f"left out of placement (--ib-exclude/--ib-exclude-guids): {switches} switch(es) and {len(gone) - switches} "
        f"HCA(s) selected, {len(stranded)} HCA(s) cabled only to them, {len(fabric.cables) - len(cables)} cable(s)")
