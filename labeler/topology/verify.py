"""Drift and disagreement: current labels against a fresh discovery, and one source against another.

Labels and a fresh discovery of the same source use the same names, so values are compared directly.
Two different sources name domains differently (a cloud id against a switch name), so their groupings are
compared instead: each domain of one is matched to the domain of the other that shares most nodes with it
(greedily, largest overlaps first, one to one), and a node is a disagreement when its two domains are not
a matched pair. A domain one source splits and the other merges thus shows up, with both answers.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..errors import TopologyError
from ..io.nodes import Node
from .model import Snapshot


@dataclass(frozen=True)
class Disagreement:
    node: str
    level: str
    a: str | None
    b: str | None


@dataclass
class Report:
    a: str
    b: str
    compared: int
    disagreements: list[Disagreement] = field(default_factory=list)
    only_in_a: list[str] = field(default_factory=list)
    only_in_b: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "compared": self.compared,
                "disagreements": [{"node": d.node, "level": d.level, self.a: d.a, self.b: d.b}
                                  for d in self.disagreements],
                "only_in_" + self.a: self.only_in_a, "only_in_" + self.b: self.only_in_b}


def label_drift(snapshot: Snapshot, nodes: Sequence[Node]) -> Report:
    """Nodes whose labels differ from what a fresh discovery says they should carry."""
    cluster = {n.name: n for n in nodes}
    report = Report("labels", "discovery", 0, only_in_b=sorted(set(snapshot.nodes) - set(cluster)))
    for name in sorted(set(snapshot.nodes) & set(cluster)):
        report.compared += 1
        labels = cluster[name].labels
        for level in snapshot.levels:
            want = snapshot.nodes[name][level.name]
            have = labels.get(level.label)
            if have != want:
                report.disagreements.append(Disagreement(name, level.name, have, want))
    return report


def stale(report: Report) -> list[Disagreement]:
    """Disagreements on labels a node already carries (drift), leaving out labels not written yet."""
    return [d for d in report.disagreements if d.a is not None]


def default_pairs(a: Snapshot, b: Snapshot) -> list[tuple[str, str]]:
    """Levels with the same name; else levels aligned from the finest up (leaf with leaf, block with block)."""
    same = [lv.name for lv in a.levels if lv.name in {x.name for x in b.levels}]
    if same:
        return [(n, n) for n in same]
    depth = min(len(a.levels), len(b.levels))
    return [(a.levels[-i].name, b.levels[-i].name) for i in range(depth, 0, -1)]


def compare_sources(a: Snapshot, b: Snapshot, pairs: Sequence[tuple[str, str]] | None = None,
                    names: tuple[str, str] = ("a", "b")) -> Report:
    """Nodes that two sources place differently, level pair by level pair."""
    pairs = list(pairs or default_pairs(a, b))
    for la, lb in pairs:
        if la not in {lv.name for lv in a.levels} or lb not in {lv.name for lv in b.levels}:
            raise TopologyError(f"level pair {la}={lb}: {names[0]} has levels {[lv.name for lv in a.levels]}, "
                                f"{names[1]} has {[lv.name for lv in b.levels]}")
    common = sorted(set(a.nodes) & set(b.nodes))
    report = Report(names[0], names[1], len(common), only_in_a=sorted(set(a.nodes) - set(b.nodes)),
                    only_in_b=sorted(set(b.nodes) - set(a.nodes)))
    for la, lb in pairs:
        placed = [(n, a.nodes[n][la], b.nodes[n][lb]) for n in common]
        matched = match_domains(Counter((x, y) for _, x, y in placed))
        label = la if la == lb else f"{la}={lb}"
        report.disagreements.extend(Disagreement(n, label, x, y) for n, x, y in placed if matched.get(x) != y)
    return report


def match_domains(overlaps: Counter[tuple[str, str]]) -> dict[str, str]:
    """One-to-one matching of domains, largest overlaps first (ties broken by name, so runs agree)."""
    matched: dict[str, str] = {}
    taken: set[str] = set()
    for (x, y), _ in sorted(overlaps.items(), key=lambda item: (-item[1], item[0])):
        if x not in matched and y not in taken:
            matched[x] = y
            taken.add(y)
    return matched
