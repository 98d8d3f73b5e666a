"""Kubernetes node names as Slurm NodeNames: a rewrite rule, and the names Slurm's hostlists cannot hold."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from labeler.errors import TopologyError
from labeler.topology.model import Problem

SOURCE = "slurm-export"
UNSAFE = re.compile(r'[\s,\[\]=#"\\]')  # breaks a hostlist or a key=value line
_TRAILING_DIGITS = re.compile(r"[0-9]+$")


@dataclass(frozen=True)
class NameRule:
    """How a Kubernetes node name becomes a Slurm NodeName: the first regex match replaced, then the domain cut."""

    pattern: str = ""
    replacement: str = ""
    strip_domain: bool = False

    @classmethod
    def parse(cls, spec: str | None, strip_domain: bool = False) -> "NameRule":
        """From `REGEX=REPLACEMENT` (split at the last '=', since node names never hold one)."""
        if not spec:
            return cls(strip_domain=strip_domain)
        pattern, sep, replacement = spec.rpartition("=")
        if not sep or not pattern:
            raise TopologyError(f"--slurm-name {spec!r}: expected REGEX=REPLACEMENT, e.g. '^(.*)-gpu$=\\1'")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise TopologyError(f"--slurm-name {spec!r}: bad regular expression: {exc}") from None
        return cls(pattern, replacement, strip_domain)

    def apply(self, node: str) -> str:
        name = node
        if self.pattern:
            try:
                name = re.sub(self.pattern, self.replacement, name, count=1)
            except (re.error, IndexError) as exc:
                raise TopologyError(f"--slurm-name {self.pattern}={self.replacement}: {exc}") from None
        return name.split(".", 1)[0] if self.strip_domain else name


def name_problem(name: str) -> str | None:
    """Why `name` cannot be a Slurm node name in a hostlist, or None."""
    if not name:
        return "is empty"
    if UNSAFE.search(name):
        return "holds whitespace or one of , [ ] = # \" \\"
    digits = _TRAILING_DIGITS.search(name)
    if digits and int(digits.group()) >= 2**64:
        return "ends in a number too large for Slurm's hostlist (at most 2^64-1)"
    return None


def slurm_names(nodes: Iterable[str], rule: NameRule) -> tuple[dict[str, str], list[Problem]]:
    """Kubernetes node name -> Slurm name; unusable names become problems, two nodes on one name an error."""
    names: dict[str, str] = {}
    owner: dict[str, str] = {}
    problems = []
    for node in sorted(nodes):
        name = rule.apply(node)
        bad = name_problem(name)
        if bad:
            problems.append(Problem(SOURCE, f"Slurm name {name!r} {bad}; the node is left out", node))
            continue
        if name in owner:
            raise TopologyError(f"nodes {owner[name]!r} and {node!r} both become Slurm node {name!r}; "
                                "change --slurm-name / --strip-domain")
        owner[name] = node
        names[node] = name
    return names, problems
