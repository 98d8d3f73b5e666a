"""The topology model every source produces and every consumer reads.

A snapshot is ordered levels (coarsest first), one value per level for each placed node, and the problems
met on the way. Its dict form is the fixed snapshot format that `topolabel discover -o json` prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Iterable, Mapping, Sequence

# Level names that hold an accelerator (multi-node NVLink) domain: the labels source's `nvlink` preset
# (`nvidia.com/gpu.clique`), AWS's UltraServer `capacity-block` and Topograph's `accelerator`. Exports treat them as the unit a job
# should stay inside (Slurm's block).
ACCELERATOR_LEVELS = ("nvlink", "capacity-block", "accelerator")


@dataclass(frozen=True)
class Level:
    """One level of the hierarchy: a short name (`block`) and the node label key that carries it."""

    name: str
    label: str


DEFAULT_PREFIX = "topolabel.dev/"


@dataclass(frozen=True)
class Ownership:
    """The node label keys topolabel may write and remove: an allowlist, never "anything not someone else's".
    Keys under its prefixes (topolabel.dev/, and the config's keyPrefix) and the keys a config names one by one
    (`levels[].label`); the operator's admission policy allows the same set (manifests/admission-policy.yaml)."""

    prefixes: tuple[str, ...] = (DEFAULT_PREFIX,)
    keys: frozenset[str] = frozenset()

    def owns(self, key: str) -> bool:
        """Whether `key` is one of these keys, or its prefix (through the '/'; "" for a key without one) is one
        of these prefixes."""
        prefix, slash, _ = key.rpartition("/")
        return key in self.keys or (prefix + slash) in self.prefixes

    def problem(self, key: str) -> str | None:
        """Why topolabel may not write `key` (None when it may)."""
        if self.owns(key):
            return None
        named = ", ".join([*(p or "(no prefix)" for p in self.prefixes), *sorted(self.keys)])
        return (f"is not topolabel's to write: it writes only keys under or named {named} (a config's keyPrefix "
                "and levels[].label add to them: pass that config)")


def ownership(prefix: str = DEFAULT_PREFIX, keys: Iterable[str] = ()) -> Ownership:
    """What a config owns: topolabel's own prefix, its keyPrefix, and the keys it names."""
    return Ownership(tuple(dict.fromkeys((DEFAULT_PREFIX, prefix))), frozenset(keys))


@dataclass(frozen=True)
class Problem:
    """Something a user should act on: a node that could not be placed, a degraded link, a notice. `claim`: the
    node is in a contested claim (an HCA, chassis or switch that two sources give to different nodes); a plan
    counts such nodes with the ones it would rewrite (`plan.check_share`)."""

    source: str
    message: str
    node: str | None = None
    claim: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"node": self.node} if self.node is not None else {}
        out.update(source=self.source, message=self.message)
        if self.claim:
            out["claim"] = True
        return out


@dataclass
class Snapshot:
    """Placement of nodes in the hierarchy; `nodes[node][level.name]` is a valid label value."""

    levels: tuple[Level, ...]
    nodes: dict[str, dict[str, str]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The snapshot file's document, to write out: the nodes' values are the snapshot's own mappings, not a
        copy of each."""
        return {
            "levels": [{"name": lv.name, "label": lv.label} for lv in self.levels],
            "nodes": dict(zip(order := sorted(self.nodes), map(self.nodes.__getitem__, order))),
            "problems": [p.to_dict() for p in self.problems],
        }

    def strings(self, values: bool = True) -> dict[str, str]:
        """Its node names and (with `values`) values, each as its own key and value: for node records read after
        it to share (1,000,000 nodes: a name and a host value a node, 150 MB; the table itself about 40 MB per
        million strings, so values only for records that keep them)."""
        found = dict(zip(self.nodes, self.nodes))
        for lv in self.levels if values else ():
            column = list(map(itemgetter(lv.name), self.nodes.values()))
            found.update(zip(column, column))
        return found

    def path(self, node: str) -> tuple[str, ...]:
        """The node's values, coarsest first."""
        values = self.nodes[node]
        return tuple(values[lv.name] for lv in self.levels)

    def labels_for(self, node: str) -> dict[str, str]:
        """The node labels that place `node`: label key to value."""
        values = self.nodes[node]
        return {lv.label: values[lv.name] for lv in self.levels}


@dataclass
class Discovery:
    """A source's raw answer: level names coarsest first, each node's raw path, and problems.

    `local_names` says a domain name is only unique inside its parent (rack "r1" in every row), so the
    domain's identity is its whole path; otherwise a name is the domain's identity across the cluster.
    """

    source: str
    level_names: tuple[str, ...]
    paths: dict[str, tuple[str, ...]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    local_names: bool = False

    def problem(self, message: str, node: str | None = None, claim: bool = False) -> None:
        self.problems.append(Problem(self.source, message, node, claim))


def check_tree(levels: Iterable[Level], paths: Mapping[str, tuple[str, ...]]) -> list[str]:
    """Errors for every domain with more than one parent; Kueue TAS needs a strict tree."""
    levels = tuple(levels)
    if is_tree(list(zip(*paths.values()))):
        return []
    parents: list[dict[str, dict[str, str]]] = [{} for _ in levels]
    for node in sorted(paths):
        path = paths[node]
        for depth in range(1, len(levels)):
            seen = parents[depth].setdefault(path[depth], {})
            seen.setdefault(path[depth - 1], node)
    errors = []
    for depth in range(1, len(levels)):
        for value in sorted(parents[depth]):
            owners = parents[depth][value]
            if len(owners) > 1:
                where = ", ".join(f"{levels[depth - 1].name} {p!r} (node {n})" for p, n in sorted(owners.items()))
                errors.append(f"{levels[depth].name} {value!r} sits under more than one {levels[depth - 1].name}: {where}")
    return errors


def is_tree(columns: Sequence[Sequence[str]]) -> bool:
    """Whether every domain has one parent, from each level's values (one per node, coarsest level first): as
    many (parent, domain) pairs as domains at every level. Whole columns at a time, no loop per node."""
    return all(_one_parent_each(parent, child) for parent, child in zip(columns, columns[1:]))


def _one_parent_each(parent: Sequence[str], child: Sequence[str]) -> bool:
    """Whether each distinct value of `child` sits beside one value of `parent`: each domain's last parent
    seen is every one of its nodes' parent (a domain per node, as hosts are, has one parent without that). No
    pair is built per node: 1,000,000 nodes, 100 MB less."""
    parent_of = dict(zip(child, parent))
    return len(parent_of) == len(child) or list(map(parent_of.__getitem__, child)) == list(parent)
