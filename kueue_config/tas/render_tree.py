"""The topology as people look at it: per flavor, domains per level with free and total accelerators.

The numbers come from the same tree `fit` uses (the flavor's Ready, schedulable, labelled nodes), so what
`show` draws is what Kueue can place into. Domain values are the source's names (a switch, a rack), or
long hashes (GKE's block ids). Each domain gets a display name unique among its siblings: its value when
short, else the value shortened in the middle; a hash whose nodes share a name prefix no sibling's nodes
share is named by that prefix (`gke-a4-b01-*`), which says which nodes it holds. Siblings are in natural
order of those names (b2 before b10). A level where every domain holds one node (a `host` level, the
hostname) repeats the node list, so the default view stops above it.

Nodes with a NoSchedule or NoExecute taint the flavor does not tolerate (fabric health's isolation taint, a
cordon by taint) are counted and marked; as in Kueue, which checks taints per node when the hostname is the
lowest level, their capacity is then not free. Nodes whose FabricHealthy condition is False (topolabel, or
another tool, isolated them) are marked too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from labeler.display import elide, natural_key

from .tree import Domain, Exclusions, Leaf, TASTree

SHORT = 9  # characters a shortened value starts at (`30e6…c2f1`), grown until unique among its siblings
KEEP = 24  # values up to this long (node names, readable domain names) are shown whole
_HASH = re.compile(r"^[0-9a-f]{12,}$|^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$")


@dataclass
class DomainView:
    """One domain for display: level key, full value, short name, nodes, free/total of one resource, a job's pods."""

    level: str
    value: str
    nodes: int
    free: int
    total: int
    children: list["DomainView"] = field(default_factory=list)
    name: str = ""
    node_names: list[str] = field(default_factory=list)
    placed: int = 0
    idle: int = 0  # nodes with all of the resource free
    tainted: int = 0  # nodes with an untolerated NoSchedule/NoExecute taint
    isolated: int = 0  # nodes whose FabricHealthy condition is False

    def __post_init__(self) -> None:
        self.name = self.name or self.value

    def to_dict(self) -> dict[str, Any]:
        """The `-o json` form (by hand: `dataclasses.asdict` takes seconds on 10,000 nodes)."""
        return {"level": self.level, "value": self.value, "name": self.name, "nodes": self.nodes, "free": self.free,
                "total": self.total, "idle": self.idle, "placed": self.placed, "tainted": self.tainted,
                "isolated": self.isolated, "node_names": self.node_names,
                "children": [c.to_dict() for c in self.children]}

    @property
    def used_share(self) -> float:
        return (self.total - self.free) / self.total if self.total else 0.0


@dataclass
class FlavorView:
    """One flavor's tree: its Topology, the top-level domains (down to the leaves), and what was left out."""

    flavor: str
    topology: str
    keys: tuple[str, ...]
    resource: str
    domains: list[DomainView]
    depth: int
    excluded: Exclusions = field(default_factory=Exclusions)
    placed: int = 0

    @property
    def totals(self) -> tuple[int, int, int]:
        return totals(self.domains)


def _leaves(domain: Domain) -> Iterable[Leaf]:
    if isinstance(domain, Leaf):
        yield domain
        return
    for child in domain.children:
        yield from _leaves(child)


def short_names(values: Sequence[str]) -> dict[str, str]:
    """Each value, or when long, shortened in the middle, grown until unique among `values`."""
    out: dict[str, str] = {v: v for v in values if len(v) <= KEEP}
    long = [v for v in values if v not in out]
    size = SHORT
    while long:
        cut = {v: elide(v, size) for v in long}
        taken = list(cut.values())
        for v, c in cut.items():
            if taken.count(c) == 1 and c not in out.values():
                out[v] = c
        long = [v for v in long if v not in out]
        size += 2
    return out


def node_prefix(names: Sequence[str]) -> str:
    """The '-'-separated prefix every name shares (`gke-a4-b01-` for gke-a4-b01-s00-n000 ... s01-n007)."""
    if not names:
        return ""
    first, last = min(names), max(names)
    common = 0
    while common < min(len(first), len(last)) and first[common] == last[common]:
        common += 1
    return first[:first.rfind("-", 0, common) + 1]


def display_names(views: Sequence["DomainView"]) -> dict[str, str]:
    """Sibling domains' display names: `short_names`, except that hash values are named by the node-name
    prefix their nodes share when it is longer than what all the siblings share and no sibling's node
    starts with it."""
    names = short_names([v.value for v in views])
    if len(views) < 2:
        return names
    everyone = node_prefix([n for v in views for n in v.node_names[:1] + v.node_names[-1:]])
    for view in views:
        prefix = node_prefix(view.node_names)
        if not _HASH.match(view.value) or len(prefix) <= len(everyone):
            continue
        if not any(n.startswith(prefix) for other in views if other is not view for n in other.node_names):
            names[view.value] = prefix + "*"
    return names


@dataclass(frozen=True)
class Marks:
    """Nodes to mark: with an untolerated NoSchedule/NoExecute taint, and fabric-isolated (condition False)."""

    tainted: frozenset[str] = frozenset()
    isolated: frozenset[str] = frozenset()


def _view(domain: Domain, tree: TASTree, resource: str, placed: Mapping[str, int], marks: Marks) -> DomainView:
    leaves = list(_leaves(domain))
    level = len(domain.values) - 1
    blocked = marks.tainted if tree.hostname_lowest else frozenset()  # Kueue's per-node taint check
    view = DomainView(tree.keys[level], domain.values[-1], sum(lf.node_count for lf in leaves),
                      sum(max(lf.free.get(resource, 0), 0) for lf in leaves if lf.id not in blocked),
                      sum(lf.total.get(resource, 0) for lf in leaves))
    view.node_names = sorted(name for lf in leaves for name in lf.node_names)
    view.placed = sum(placed.get(lf.id, 0) for lf in leaves)
    view.idle = sum(lf.node_count for lf in leaves if lf.total.get(resource, 0) and lf.id not in blocked and
                    lf.free.get(resource, 0) >= lf.total.get(resource, 0))
    view.tainted = sum(1 for n in view.node_names if n in marks.tainted)
    view.isolated = sum(1 for n in view.node_names if n in marks.isolated)
    view.children = _named([_view(c, tree, resource, placed, marks) for c in domain.children])
    return view


def _named(views: list[DomainView]) -> list[DomainView]:
    """Sibling views with their display names, in natural order of those names."""
    names = display_names(views)
    for view in views:
        view.name = names[view.value]
    return sorted(views, key=lambda v: (natural_key(v.name), v.value))


def default_depth(tree: TASTree) -> int:
    """Levels to draw: down to the last one above the first level where every domain holds a single node."""
    for idx, level in enumerate(tree.levels):
        if level and all(sum(lf.node_count for lf in _leaves(d)) == 1 for d in level.values()):
            return max(idx, 1)
    return len(tree.keys)


def flavor_view(flavor: str, topology: str, tree: TASTree, resource: str, depth: int | None = None,
                placed: Mapping[str, int] | None = None, marks: Marks = Marks()) -> FlavorView:
    """The flavor's domains, full depth (the leaves); `depth` says how many levels a picture shows."""
    placed = placed or {}
    views = _named([_view(r, tree, resource, placed, marks) for r in tree.roots])
    shown = default_depth(tree) if depth is None else max(1, min(depth, len(tree.keys)))
    return FlavorView(flavor, topology, tree.keys, resource, views, shown, tree.excluded,
                      sum(v.placed for v in views))


def totals(views: Sequence[DomainView]) -> tuple[int, int, int]:
    """(nodes, free, total) over the top-level domains."""
    return (sum(v.nodes for v in views), sum(v.free for v in views), sum(v.total for v in views))


def short_level(key: str) -> str:
    return key.rsplit("/", 1)[-1]


def node_span(names: Sequence[str]) -> str:
    """`gke-a4-b01-s00-n000 … s01-n007` for a sorted list of names: the last without the first's common
    '-'-separated prefix; the name itself for one."""
    if not names:
        return ""
    first, last = names[0], names[-1]
    if len(names) == 1:
        return first
    common = 0
    while common < min(len(first), len(last)) and first[common] == last[common]:
        common += 1
    cut = first.rfind("-", 0, common) + 1
    return f"{first} … {last[cut:]}"


def _numbers(view: DomainView, resource: str) -> str:
    text = f"{view.free}/{view.total} {short_level(resource)} free  {view.idle}/{view.nodes} nodes free"
    text += marks_text(view)
    return text + (f"  <- {view.placed} pod(s) of the job" if view.placed else "")


def marks_text(view: DomainView) -> str:
    """`  2 tainted (no TAS capacity), 1 fabric-isolated`, or nothing."""
    parts = [f"{view.tainted} tainted (no TAS capacity)" if view.tainted else "",
             f"{view.isolated} fabric-isolated" if view.isolated else ""]
    text = ", ".join(p for p in parts if p)
    return f"  {text}" if text else ""


def text_tree(fv: FlavorView, width: int, wide: bool = False) -> list[str]:
    """The flavor's tree down to its display depth as lines of at most `width` characters (any with `wide`):
    each domain with free/total and its node count; its node names after it when the line has room, else
    on a line of their own beneath it, else (too narrow for them whole) left out. The first line is the
    flavor's headline, for the caller to wrap."""
    nodes, free, total = fv.totals
    lines = [f"flavor {fv.flavor} (Topology {fv.topology}): {nodes} node(s), {free}/{total} "
             f"{short_level(fv.resource)} free" + (f"  job: {fv.placed} pod(s) here" if fv.placed else "")]

    def add(view: DomainView, level: int, lead: str, last: bool) -> None:
        branch, under = ("└── ", "    ") if last else ("├── ", "│   ")
        head = f"{lead}{branch}{short_level(view.level)} {view.value if wide else view.name}  {_numbers(view, fv.resource)}"
        span = ", ".join(view.node_names) if view.nodes <= 3 else node_span(view.node_names)
        if view.name.endswith("*") and not wide:  # named by its nodes' prefix: the range says little more
            lines.append(head)
        elif wide or len(head) + 2 + len(span) <= width:
            lines.append(f"{head}: {span}")
        else:
            lines.append(head)
            beneath = f"{lead}{under}{'│   ' if level + 1 < fv.depth and view.children else '    '}{span}"
            if len(beneath) <= width:
                lines.append(beneath.rstrip())
        if level + 1 < fv.depth:
            for i, child in enumerate(view.children):
                add(child, level + 1, lead + under, i == len(view.children) - 1)

    for i, view in enumerate(fv.domains):
        add(view, 0, "", i == len(fv.domains) - 1)
    return lines
