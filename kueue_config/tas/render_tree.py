"""The topology as people look at it: domains per level with free and total accelerators, as a rich tree.

The numbers come from the same tree `fit` uses (Ready, schedulable, labelled nodes of the flavor), so
what `show` draws is what Kueue can place into.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from rich.tree import Tree

from .tree import Domain, Leaf, TASTree


@dataclass
class DomainView:
    """One domain for display: its level, value, nodes, and free/total of one resource."""

    level: str
    name: str
    nodes: int
    free: int
    total: int
    children: list["DomainView"] = field(default_factory=list)


def _leaves(domain: Domain) -> Iterable[Leaf]:
    if isinstance(domain, Leaf):
        yield domain
        return
    for child in domain.children:
        yield from _leaves(child)


def _view(domain: Domain, tree: TASTree, depth: int, resource: str) -> DomainView:
    leaves = list(_leaves(domain))
    level = len(domain.values) - 1
    view = DomainView(tree.keys[level], domain.values[-1], sum(lf.node_count for lf in leaves),
                      sum(max(lf.free.get(resource, 0), 0) for lf in leaves),
                      sum(lf.total.get(resource, 0) for lf in leaves))
    if level + 1 < depth:
        view.children = [_view(c, tree, depth, resource) for c in sorted(domain.children, key=lambda d: d.values)]
    return view


def domain_views(tree: TASTree, resource: str, depth: int | None = None) -> list[DomainView]:
    """Top-level domains down to `depth` levels (default: every level but the per-node hostname level)."""
    if depth is None:
        depth = len(tree.keys) - 1 if tree.hostname_lowest and len(tree.keys) > 1 else len(tree.keys)
    depth = max(1, min(depth, len(tree.keys)))
    return [_view(d, tree, depth, resource) for d in sorted(tree.roots, key=lambda d: d.values)]


def totals(views: Sequence[DomainView]) -> tuple[int, int, int]:
    """(nodes, free, total) over the top-level domains."""
    return (sum(v.nodes for v in views), sum(v.free for v in views), sum(v.total for v in views))


def short_level(key: str) -> str:
    return key.rsplit("/", 1)[-1]


def _label(view: DomainView, resource: str) -> str:
    share = view.free / view.total if view.total else 0
    colour = "green" if share >= 0.5 else "yellow" if share > 0 else "red"
    unit = short_level(resource)
    return (f"[dim]{short_level(view.level)}[/] [bold]{view.name}[/]  "
            f"[{colour}]{view.free}/{view.total} {unit} free[/]  [dim]{view.nodes} node(s)[/]")


def rich_tree(views: Sequence[DomainView], title: str, resource: str) -> Tree:
    nodes, free, total = totals(views)
    root = Tree(f"[bold]{title}[/]: {nodes} node(s), {free}/{total} {short_level(resource)} free")

    def add(parent: Tree, view: DomainView) -> None:
        branch = parent.add(_label(view, resource))
        for child in view.children:
            add(branch, child)

    for view in views:
        add(root, view)
    return root
