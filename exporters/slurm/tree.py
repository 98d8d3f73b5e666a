"""topology/tree: every domain a switch, listed children first, joined by a root switch when asked."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from labeler.errors import TopologyError
from labeler.topology.labelvalues import short_hash
from labeler.topology.model import Level

from ..domains import Domain, natural
from ..hostlist import compress
from .names import UNSAFE

MAX_SWITCH_NAME = 64


@dataclass
class Switch:
    name: str
    height: int
    switches: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)


def _simplify(domain: Domain) -> Domain:
    children = [_simplify(c) for c in domain.children]
    if len(children) == 1:
        return Domain(domain.depth, domain.value, domain.nodes, children[0].children)
    if all(not c.children and len(c.nodes) == 1 for c in children):
        children = []
    return Domain(domain.depth, domain.value, domain.nodes, children)


def switches(forest: list[Domain], levels: tuple[Level, ...], root: str | None = "root",
             stable: bool = False) -> list[Switch]:
    """Switches with children listed before their parents (so Slurm resolves them in one pass).

    `stable`: one switch per domain and every name `<level>-<value>`, so a node joining or leaving a domain
    that stays changes no switch (the merges and the bare names depend on how many nodes a domain holds).
    """
    tops = forest if stable else [_simplify(d) for d in forest]
    domains = [d for top in tops for d in top.walk()]
    seen = Counter(d.value for d in domains)
    names = {id(d): _switch_name(d, levels, stable or seen[d.value] > 1) for d in domains}
    if root and len(tops) > 1:
        if UNSAFE.search(root) or not 0 < len(root) <= MAX_SWITCH_NAME:
            raise TopologyError(f"root switch name {root!r} must be 1-{MAX_SWITCH_NAME} characters without "
                                "whitespace or , [ ] = # \" \\")
        top = Domain(-1, root, [n for t in tops for n in t.nodes], tops)
        domains.append(top)
        names[id(top)] = root
    taken = Counter(names.values())
    clash = sorted(n for n, count in taken.items() if count > 1)
    if clash:
        raise TopologyError(f"switch name(s) {', '.join(clash[:3])} would be defined twice (a value equals "
                            "another level's '<level>-<value>' name or the root); rename a level or --root-switch")
    out = [Switch(names[id(d)], _height(d), [names[id(c)] for c in d.children],
                  [] if d.children else list(d.nodes)) for d in domains]
    return sorted(out, key=lambda s: (s.height, natural(s.name)))


def _switch_name(domain: Domain, levels: tuple[Level, ...], qualify: bool) -> str:
    """The label value, prefixed with its level when another level uses the same value; 64 characters."""
    name = f"{levels[domain.depth].name}-{domain.value}" if qualify else domain.value
    if len(name) <= MAX_SWITCH_NAME:
        return name
    return f"{name[:MAX_SWITCH_NAME - 9].rstrip('-.')}-{short_hash(name)}"


def _height(domain: Domain) -> int:
    return 1 + max((_height(c) for c in domain.children), default=-1)


def tree_conf(switch_list: list[Switch]) -> str:
    lines = []
    for sw in switch_list:
        members = f"Switches={compress(sw.switches)}" if sw.switches else f"Nodes={compress(sw.nodes)}"
        lines.append(f"SwitchName={sw.name} {members}\n")
    return "".join(lines)
