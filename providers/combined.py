"""Several sources composed into one hierarchy: e.g. block and leaf group from InfiniBand or AWS, and the
NVLink domain from the GPU Operator's `nvidia.com/gpu.clique` label.

    source:
      type: combined
      sources:
        - {type: infiniband, ibnetdiscover: fabric.txt}           # all of its levels
        - {type: labels, preset: nvlink, levels: [nvlink], missing: node}
      order: [block, leafgroup, nvlink]                            # optional; default: as listed

Per part: `levels` picks levels (a list, or a mapping {its name: new name} to rename clashes), `missing`
says what a node the part did not place gets: `problem` (default: the node is not placed), `node` (its
own domain, right for accelerator domains of nodes that are not multi-node NVLink systems) or `parent`
(the value of the level above it). Kueue needs a tree, so when a finer domain does not sit inside one coarser
domain (an NVLink domain split across two leaves) the error says so and lists the orders that do nest.

Levels from node labels and annotations (the `labels` source: the GPU Operator's clique label, the agent's
clique annotation) are self-reported: a node, its kubelet or its agent can write them. Such a level never
fails the whole source and never moves a node into another domain without corroboration: where a
self-reported domain is split across coarser domains, its nodes outside the domain's strict majority are
problems for themselves alone (all of them when no parent holds a majority), and the rest is placed.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from itertools import permutations
from typing import Any, Literal, Mapping

from pydantic import ConfigDict, Field, field_validator, model_validator

from labeler.errors import SourceError, TopologyError
from labeler.settings.config import options_issues
from labeler.settings.config_schema import options_schema
from labeler.settings.validation import did_you_mean
from labeler.topology.model import Discovery, Level, check_tree
from labeler.topology.names import camel, snake

from .base import Options, Source, SourceContext, parse_options
from .registry import SOURCES, get_source

NAME = "combined"
MAX_PERMUTED_LEVELS = 7  # 5,040 orders; beyond that only single-level removals are suggested
SELF_REPORTED = {"labels"}  # parts whose evidence the nodes themselves can write


def _part_schema(schema: dict[str, Any]) -> None:
    """A part is written flat: its own keys (`levels`, `missing`) beside its source's options, so its JSON
    schema is one object per source type. (Sources' options are flat: they add no definitions.)"""
    own = {k: v for k, v in schema.get("properties", {}).items() if k not in ("type", "options")}
    schema.clear()
    schema["oneOf"] = [options_schema(name, get_source(name).options, {}, own=own) for name in SOURCES if name != NAME]


class Part(Options):
    model_config = ConfigDict(json_schema_extra=_part_schema)
    type: str
    levels: list[str] | dict[str, str] | None = None
    missing: Literal["problem", "node", "parent"] = "problem"
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _options_fit_the_source(self) -> "Part":
        """The part's options are checked when the config is read, as the top-level source's are."""
        if self.type == NAME:
            raise ValueError("a combined source cannot contain another combined source")
        if self.type not in SOURCES:
            raise ValueError(f"unknown source {self.type!r}" + did_you_mean(self.type, SOURCES))
        own = ("type", *(k for k in Part.model_fields if k != "options"))
        found = options_issues(get_source(self.type).options, {camel(k): v for k, v in self.options.items()}, (),
                               own)
        if found:
            raise ValueError("; ".join(map(str, found)))
        return self


class CombinedOptions(Options):
    sources: list[Part] = Field(min_length=2)
    order: list[str] | None = None

    @field_validator("sources", mode="before")
    @classmethod
    def _split_part_options(cls, parts: Any) -> Any:
        """Each part is written flat (`{type: labels, preset: nvlink}`); keep the source's own keys apart."""
        if not isinstance(parts, list):
            return parts
        own = set(Part.model_fields) - {"options"}
        return [{**{k: v for k, v in p.items() if k in own},
                 "options": {snake(k): v for k, v in p.items() if k not in own}} if isinstance(p, dict) else p
                for p in parts]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Combined sources are configured in the config file only (`source: {type: combined, ...}`)."""


def discover(ctx: SourceContext) -> Discovery:
    opts = parse_options(CombinedOptions, ctx)
    answers = [(part, _run_part(part, ctx)) for part in opts.sources]
    columns = _columns(answers)
    available = [column[0] for column in columns]
    order = opts.order or available
    _check_order(order, available, ctx.origin)
    result = Discovery(NAME, tuple(order))
    for part, found in answers:
        result.problems.extend(p for p in found.problems if p.node is None)
    by_name = {name: (part, found, index) for name, part, found, index in columns}
    nodes = sorted({n for _, found in answers for n in found.paths} | {n.name for n in ctx.nodes})
    for node in nodes:
        path, why = _path(node, order, by_name)
        if why:
            result.problem(why, node)
        else:
            result.paths[node] = path
    _drop_uncorroborated(result, {i for i, name in enumerate(order) if by_name[name][0].type in SELF_REPORTED})
    _require_tree(result, ctx.origin)
    return result


def _drop_uncorroborated(found: Discovery, self_reported: set[int]) -> None:
    """Make each node whose self-reported level contradicts the majority of its domain a problem of its own.

    For each pair of adjacent levels one of which is self-reported, a domain (of the finer level) that sits
    under several parents keeps the nodes under the parent holding a strict majority of it; the others (all
    of them without a majority) are taken out and reported, each naming what it claims and where it sits.
    """
    names = found.level_names
    for depth in range(1, len(names)):
        if not {depth - 1, depth} & self_reported:
            continue
        parents: dict[str, Counter[str]] = defaultdict(Counter)
        for path in found.paths.values():
            parents[path[depth]][path[depth - 1]] += 1
        hint = ""
        for node in sorted(found.paths):
            value, parent = found.paths[node][depth], found.paths[node][depth - 1]
            counts = parents[value]
            if len(counts) < 2:
                continue
            (top, most), = counts.most_common(1)
            if parent == top and most * 2 > sum(counts.values()):
                continue
            hint = hint or nesting_orders(found)
            found.problem(f"its {names[depth]} {value!r} sits under {names[depth - 1]} {parent!r}, but the "
                          f"{names[depth]}'s other nodes under {', '.join(sorted(set(counts) - {parent}))}; "
                          "not corroborated, so left as it is", node)
            del found.paths[node]
        if hint:
            found.problem(f"{names[depth]} domains that span several {names[depth - 1]}s were left out. {hint}")


def _run_part(part: Part, ctx: SourceContext) -> Discovery:
    part_ctx = SourceContext(nodes=ctx.nodes, options=part.options, origin=f"{ctx.origin} ({part.type})")
    return get_source(part.type).discover(part_ctx)


def _columns(answers: list[tuple[Part, Discovery]]) -> list[tuple[str, Part, Discovery, int]]:
    """(output level name, part, its discovery, index of the level in that discovery), in listed order."""
    columns = []
    for part, found in answers:
        chosen = part.levels if part.levels is not None else list(found.level_names)
        renames = chosen if isinstance(chosen, dict) else {name: name for name in chosen}
        for source_name, new_name in renames.items():
            if source_name not in found.level_names:
                raise SourceError(f"combined: source {part.type} has no level {source_name!r} "
                                  f"(it has {', '.join(found.level_names)})")
            columns.append((new_name, part, found, found.level_names.index(source_name)))
    names = [c[0] for c in columns]
    clashes = sorted({n for n in names if names.count(n) > 1})
    if clashes:
        raise SourceError(f"combined: level name(s) {', '.join(clashes)} come from more than one source; "
                          "rename with levels: {their-name: new-name}")
    return columns


def _check_order(order: list[str], available: list[str], origin: str) -> None:
    unknown = [n for n in order if n not in available]
    if unknown or len(set(order)) != len(order):
        raise SourceError(f"{origin}: order {order} must name each of {available} at most once")


def _path(node: str, order: list[str], columns: Mapping[str, tuple[Part, Discovery, int]]) -> tuple[tuple[str, ...], str]:
    """The node's value at each level, or why it has none."""
    values: list[str] = []
    for name in order:
        part, found, index = columns[name]
        known = found.paths.get(node)
        if known is not None:
            values.append(known[index])
        elif part.missing == "node":
            values.append(node)
        elif part.missing == "parent" and values:
            values.append(values[-1])
        else:
            reason = next((p.message for p in found.problems if p.node == node), "not placed")
            return (), f"{part.type} has no {name} for it ({reason})"
    return tuple(values), ""


def _require_tree(found: Discovery, origin: str) -> None:
    levels = [Level(name, name) for name in found.level_names]
    errors = check_tree(levels, found.paths)
    if not errors:
        return
    hint = nesting_orders(found)
    raise TopologyError(f"{origin}: the combined levels do not nest: " + "; ".join(errors[:5])
                        + (f" (and {len(errors) - 5} more)" if len(errors) > 5 else "")
                        + f". {hint}")


def nesting_orders(found: Discovery) -> str:
    """Orders of the levels (or of all but one) under which every domain has one parent."""
    names = found.level_names

    def nests(order: tuple[str, ...]) -> bool:
        idx = [names.index(n) for n in order]
        paths = {node: tuple(p[i] for i in idx) for node, p in found.paths.items()}
        return not check_tree([Level(n, n) for n in order], paths)

    if len(names) <= MAX_PERMUTED_LEVELS:
        good = [o for o in permutations(names) if nests(o)]
        if good:
            return "Orders that nest: " + "; ".join(" > ".join(o) for o in good)
    dropped = [tuple(n for n in names if n != skip) for skip in names]
    good = [o for o in dropped if nests(o)]
    if good:
        return "No order of all levels nests; without one level: " + "; ".join(" > ".join(o) for o in good)
    return "No order nests, even without one level."


SOURCE = Source(NAME, CombinedOptions, add_arguments, discover)
