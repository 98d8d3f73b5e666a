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

    def selected(self, fabric: Fabric) -> set[int]:
        """The fabric nodes it selects (a router by GUID only)."""
        found = {fabric.index[guid] for guid in self.guids if guid in fabric.index}
        found.update(node for (node, _), port_guid in fabric.port_guids.items() if port_guid in self.guids)
        if self.pattern is not None:
            search = self.pattern.search
            found.update(node for node, (kind, desc) in enumerate(zip(fabric.kinds, fabric.descs))
                         if kind != "router" and search(desc))
        return found


def exclude(fabric: Fabric, exclusion: Exclusion) -> tuple[Fabric, str | None]:
    """The fabric without the selected nodes and their cables, and a notice of what went (None: nothing).

    An HCA left without a cable goes too: every link it had led into the left-out part, so it belongs to that
    network (a host's storage HCA when the storage leaves are selected). Nodes and cables keep their order.
    """
    if not exclusion:
        return fabric, None
    gone = exclusion.selected(fabric)
    if not gone:
        return fabric, "--ib-exclude/--ib-exclude-guids select nothing in the fabric: check the pattern and GUIDs"
    cables = [cable for cable in fabric.cables if cable[0] not in gone and cable[2] not in gone]
    cabled = {end for a, _, b, _, _ in cables for end in (a, b)}
    stranded = {node for node, kind in enumerate(fabric.kinds)
                if kind == "ca" and node not in gone and node not in cabled and fabric.ports[node]}
    left_out = gone | stranded
    kept = [node for node in range(len(fabric)) if node not in left_out]
    new = dict(zip(kept, range(len(kept))))
    switches = sum(1 for node in gone if fabric.kinds[node] == "switch")
    return Fabric([fabric.guids[n] for n in kept], [fabric.kinds[n] for n in kept], [fabric.descs[n] for n in kept],
                  [fabric.nports[n] for n in kept], [(new[a], pa, new[b], pb, rate) for a, pa, b, pb, rate in cables],
                  list(fabric.rates), {(new[n], port): guid for (n, port), guid in fabric.port_guids.items() if n in new}), (
        f"left out of placement (--ib-exclude/--ib-exclude-guids): {switches} switch(es) and {len(gone) - switches} "
        f"HCA(s) selected, {len(stranded)} HCA(s) cabled only to them, {len(fabric.cables) - len(cables)} cable(s)")
