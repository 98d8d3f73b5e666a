"""The last good topology, and how fresh answers join it.

The operator labels from the last discovery that succeeded and passed the plan's safety checks; a failed,
timed-out or refused discovery leaves it in place. A node that a later discovery does not place keeps its
last good placement, so a partial answer neither strips labels nor shrinks Kueue quotas. A node that joins
is placed by asking a per-node source about that node alone and merging the answer into the last good raw
discovery, so its label values are exactly what a full discovery would give.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Mapping

from labeler.errors import TopologyError
from labeler.io.nodes import Node
from labeler.settings.config import Config
from labeler.topology.model import Discovery, Snapshot

from ..pipeline import place


@dataclass
class Topology:
    found: Discovery | None = None
    snapshot: Snapshot | None = None

    def candidate(self, cfg: Config, found: Discovery, cluster: Mapping[str, Node]) -> tuple[Discovery, Snapshot]:
        """A full discovery's snapshot, with the last good placement kept for nodes it left out.

        When the kept placements no longer fit the new tree (a rack moved to another row), the new answer
        is used alone; the plan's safety rules still keep those nodes' labels. The cluster's nodes carry
        the values written before, which existing domains keep.
        """
        carried = carry_over(self.found, found, cluster)
        if carried is not found:
            try:
                return carried, place(cfg, carried, list(cluster.values()))
            except TopologyError:
                pass
        return found, place(cfg, found, list(cluster.values()))

    def adopt(self, found: Discovery, snapshot: Snapshot) -> None:
        self.found, self.snapshot = found, snapshot

    def join(self, cfg: Config, answer: Discovery, asked: Collection[str], cluster: Collection[Node]) -> bool:
        """Merge a per-node answer for `asked` into the last good topology; the `cluster`'s existing domains
        keep their values, so a joining domain whose name collides with one is the one that gets a hash.

        False when it cannot be merged (no last good discovery, or the answer has other levels): a full
        discovery is needed. A `TopologyError` means the answer would break the tree; nothing changes.
        """
        if self.found is None or not compatible(self.found, answer):
            return False
        merged = merge(self.found, answer, asked)
        self.adopt(merged, place(cfg, merged, list(cluster)))
        return True


def compatible(last: Discovery | None, found: Discovery) -> bool:
    """Raw paths of two answers can be mixed only when they describe the same levels the same way."""
    return (last is not None and last.source == found.source and last.level_names == found.level_names
            and last.local_names == found.local_names)


def carry_over(last: Discovery | None, found: Discovery, cluster: Collection[str]) -> Discovery:
    """`found` plus the last good paths of cluster nodes it does not place (itself when there are none)."""
    if last is None or not compatible(last, found):
        return found
    kept = sorted(n for n in cluster if n in last.paths and n not in found.paths)
    if not kept:
        return found
    out = Discovery(found.source, found.level_names, dict(found.paths), list(found.problems), found.local_names)
    for name in kept:
        out.paths[name] = last.paths[name]
    out.problem(f"{len(kept)} node(s) not placed by this discovery keep their last good placement "
                f"(e.g. {', '.join(kept[:3])})")
    return out


def merge(last: Discovery, answer: Discovery, asked: Collection[str]) -> Discovery:
    """The last good discovery with `answer`'s paths and problems for the `asked` nodes."""
    asked = set(asked)
    paths = dict(last.paths)
    paths.update(answer.paths)
    problems = [p for p in last.problems if p.node not in asked] + answer.problems
    return Discovery(last.source, last.level_names, paths, list(dict.fromkeys(problems)), last.local_names)
