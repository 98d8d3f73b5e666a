"""The topology as people look at it: per flavor, domains per level with free and total accelerators.

The numbers come from the same tree `fit` uses (the flavor's Ready, schedulable, labelled nodes), so what
`show` draws is what Kueue can place into. Domain values are often long hashes (GKE's block ids); each
domain gets a short name that is unique among its siblings, and keeps its full value and node names.
A level where every domain holds one node (a `host` level, the hostname) repeats the node list, so the
default view stops above it.

Nodes with a NoSchedule or NoExecute taint the flavor does not tolerate (fabric health's isolation taint, a
cordon by taint) are counted and marked; as in Kueue, which checks taints per node when the hostname is the
lowest level, their capacity is then not free. Nodes whose FabricHealthy condition is False (topolabel, or
another tool, isolated them) are marked too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from rich.markup import escape
from rich.tree import Tree

from .tree import Domain, Exclusions, Leaf, TASTree

SHORT = 12  # characters of a long value kept in its short name
KEEP = 24  # values up to this long (node names, readable domain names) are shown whole


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
    tainted: int = 0  # nodes with an untolerated NoSchedule/NoExecute taint
    isolated: int = 0  # nodes whose FabricHealthy condition is False

    def __post_init__(self) -> None:
        self.name = self.name or self.value

    def to_dict(self) -> dict[str, Any]:
        """The `-o json` form (by hand: `dataclasses.asdict` takes seconds on 10,000 nodes)."""
        return {"level": self.level, "value": self.value, "name": self.name, "nodes": self.nodes, "free": self.free,
                "total": self.total, "placed": self.placed, "tainted": self.tainted, "isolated": self.isolated,
                "node_names": self.node_names,
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
    """Each value, or its first characters and an ellipsis when long, grown until unique among `values`."""
    out: dict[str, str] = {}
    for value in values:
        if len(value) <= KEEP:
            out[value] = value
    long = [v for v in values if v not in out]
    size = SHORT
    while long:
        cut = {v: v[:size] + "…" for v in long}
        clash = {c for c in cut.values() if list(cut.values()).count(c) > 1 or c in out.values()}
        for v, c in cut.items():
            if c not in clash:
                out[v] = c
        long = [v for v in long if v not in out]
        size += 4
    return out


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
    view.tainted = sum(1 for n in view.node_names if n in marks.tainted)
    view.isolated = sum(1 for n in view.node_names if n in marks.isolated)
    children = sorted(domain.children, key=lambda d: d.values)
    names = short_names([c.values[-1] for c in children])
    view.children = [_view(c, tree, resource, placed, marks) for c in children]
    for child in view.children:
        child.name = names[child.value]
    return view


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
    roots = sorted(tree.roots, key=lambda d: d.values)
    names = short_names([r.values[-1] for r in roots])
    views = [_view(r, tree, resource, placed, marks) for r in roots]
    for view in views:
        view.name = names[view.value]
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


def _label(view: DomainView, resource: str) -> str:
    share = view.free / view.total if view.total else 0
    colour = "green" if share >= 0.5 else "yellow" if share > 0 else "red"
    unit = short_level(resource)
    text = (f"[dim]{escape(short_level(view.level))}[/] [bold]{escape(view.name)}[/]  "
            f"[{colour}]{view.free}/{view.total} {escape(unit)} free[/]  [dim]{view.nodes} node(s)")
    names = ", ".join(view.node_names) if view.nodes <= 3 else node_span(view.node_names)
    text += f": {escape(names)}[/]"
    text += marks_text(view, "[red]", "[/]")
    if view.placed:
        text += f"  [bold cyan]<- {view.placed} pod(s) of the job[/]"
    return text


def marks_text(view: DomainView, start: str = "", end: str = "") -> str:
    """`  2 tainted (no TAS capacity), 2 fabric-isolated`, or nothing."""
    parts = [f"{view.tainted} tainted (no TAS capacity)" if view.tainted else "",
             f"{view.isolated} fabric-isolated" if view.isolated else ""]
    text = ", ".join(p for p in parts if p)
    return f"  {start}{text}{end}" if text else ""


def rich_tree(fv: FlavorView) -> Tree:
    """The flavor's tree down to its display depth, each domain with free/total and its node names."""
    nodes, free, total = fv.totals
    title = (f"[bold]flavor {escape(fv.flavor)}[/] (Topology {escape(fv.topology)}): {nodes} node(s), "
             f"{free}/{total} {escape(short_level(fv.resource))} free")
    if fv.placed:
        title += f"  [bold cyan]job: {fv.placed} pod(s) here[/]"
    root = Tree(title)

    def add(parent: Tree, view: DomainView, level: int) -> None:
        branch = parent.add(_label(view, fv.resource))
        if level + 1 < fv.depth:
            for child in view.children:
                add(branch, child, level + 1)

    for view in fv.domains:
        add(root, view, 0)
    return root
