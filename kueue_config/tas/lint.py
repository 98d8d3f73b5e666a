"""What Kueue v0.19 would reject, or silently ignore, in a job's queue label and TAS annotations.

Rejections follow Kueue's webhooks (`jobframework.ValidateTASPodSetRequest`, the slice upper bound and
PodSet-group rules); silent failures are the ones that cost an hour: a queue name given as an
annotation, TAS annotations on the Job instead of the pod template, a level the flavor's Topology lacks
(the Workload stays pending), a slice size that does not divide the pod count (the rest never start).
Each finding names the object, the path and the fix.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Iterable, Mapping, Sequence

from labeler.labelvalues import key_problems

from .setup import level_names
from .workloads import (GROUP_NAME, MODES, PREFERRED, QUEUE_LABEL, REQUIRED, SLICE_CONSTRAINTS, SLICE_REQUIRED,
                        SLICE_SIZE, TAS_ANNOTATIONS, UNCONSTRAINED, Path, PodSet, Workload, ascii_int, lookup, path_str)

ERROR, WARNING = "error", "warning"
BOOLEANS = {"1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"}  # Go ParseBool


@dataclass(frozen=True)
class Finding:
    severity: str
    object: str
    path: str
    message: str
    fix: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def _key_path(path: Path, section: str, key: str) -> str:
    return path_str((*path, section, key))


def _ann_path(template_path: Path, key: str) -> str:
    """Where a pod template's annotation `key` sits."""
    return path_str((*template_path, "metadata", "annotations", key))


def _meta_findings(w: Workload) -> Iterable[Finding]:
    meta = w.obj.get("metadata") or {}
    annotations, labels = meta.get("annotations") or {}, meta.get("labels") or {}
    if QUEUE_LABEL in annotations:
        yield Finding(ERROR, w.ref, _key_path(("metadata",), "annotations", QUEUE_LABEL),
                      "the queue name is an annotation; Kueue reads only the label, so the job is not queued",
                      f"move it to metadata.labels[{QUEUE_LABEL}]")
    elif QUEUE_LABEL not in labels:
        yield Finding(WARNING, w.ref, "metadata.labels",
                      "no queue label: Kueue leaves the job alone unless the namespace has a default LocalQueue",
                      f"add metadata.labels[{QUEUE_LABEL}]: <LocalQueue name>")
    targets = ", ".join(path_str((*ps.path, "metadata", "annotations")) for ps in w.podsets if ps.annotatable)
    for where in [("metadata",), *w.inner_meta]:
        found = (lookup(w.obj, where) or {}).get("annotations") or {}
        for key in TAS_ANNOTATIONS:
            if key in found:
                yield Finding(ERROR, w.ref, _key_path(where, "annotations", key),
                              "TAS annotation on the object, not on its pod template: Kueue ignores it",
                              f"move it to {targets}")


def _level_findings(w: Workload, ps: PodSet, key: str, value: str, keys: Sequence[str] | None) -> Iterable[Finding]:
    where = _ann_path(ps.path, key)
    for problem in key_problems(value):
        yield Finding(ERROR, w.ref, where, f"level {value!r} {problem}", "use a node label key of at most 63 "
                      "characters, as listed in the Topology (`topolabel show` prints them)")
    if keys is not None and value not in keys:
        named = level_names(keys).get(value)
        fix = f"use the label key {named}" if named else f"use one of {', '.join(keys)}"
        yield Finding(ERROR, w.ref, where, f"level {value!r} is not in the flavor's Topology: Kueue finds no "
                      "flavor with that level and the workload stays pending", fix)


def _slice_findings(w: Workload, ps: PodSet, keys: Sequence[str] | None) -> Iterable[Finding]:
    ann = ps.annotations
    size_path = _ann_path(ps.path, SLICE_SIZE)
    if SLICE_CONSTRAINTS in ann and (SLICE_REQUIRED in ann or SLICE_SIZE in ann):
        yield Finding(ERROR, w.ref, _ann_path(ps.path, SLICE_CONSTRAINTS),
                      f"{SLICE_CONSTRAINTS} cannot be combined with {SLICE_REQUIRED}/{SLICE_SIZE}",
                      "keep one form of slice request")
    if SLICE_REQUIRED in ann and SLICE_SIZE not in ann:
        yield Finding(ERROR, w.ref, size_path, f"{SLICE_REQUIRED} is set but the slice size is missing",
                      f"add {SLICE_SIZE}: a divisor of the PodSet's {ps.count} pods")
    if SLICE_SIZE not in ann:
        return
    if SLICE_REQUIRED not in ann:
        yield Finding(ERROR, w.ref, size_path, f"{SLICE_SIZE} without {SLICE_REQUIRED} is rejected",
                      f"add {SLICE_REQUIRED}: <level> or remove the slice size")
    raw = str(ann[SLICE_SIZE])
    size = ascii_int(raw)
    if size is None or size < 1:
        yield Finding(ERROR, w.ref, size_path, f"slice size {raw!r} is not a positive integer",
                      f"give a divisor of {ps.count} as a quoted string, e.g. \"{ps.count}\"")
    elif size > ps.count:
        yield Finding(ERROR, w.ref, size_path, f"slice size {size} is larger than the PodSet's {ps.count} pods; "
                      "Kueue rejects it", f"use a divisor of {ps.count}")
    elif ps.count % size:
        yield Finding(ERROR, w.ref, size_path, f"slice size {size} does not divide the PodSet's {ps.count} pods: "
                      f"Kueue places {ps.count // size * size} and the other {ps.count % size} never start",
                      f"use a divisor of {ps.count}")
    level = ann.get(REQUIRED) or ann.get(PREFERRED)
    slice_level = ann.get(SLICE_REQUIRED)
    if keys is not None and level in keys and slice_level in keys and keys.index(slice_level) < keys.index(level):
        yield Finding(ERROR, w.ref, _ann_path(ps.path, SLICE_REQUIRED),
                      f"slice level {slice_level} is above the PodSet level {level}; Kueue refuses to place it",
                      "choose a slice level at or below the PodSet level")


def _podset_findings(w: Workload, ps: PodSet, keys: Sequence[str] | None) -> Iterable[Finding]:
    ann = ps.annotations
    apath = path_str((*ps.path, "metadata", "annotations"))
    for key in TAS_ANNOTATIONS:
        if key in ann and not isinstance(ann[key], str):
            yield Finding(ERROR, w.ref, _ann_path(ps.path, key), f"value {ann[key]!r} is not a string; "
                          "the API server rejects non-string annotations", f'quote it: "{ann[key]}"')
    modes = [m for m in MODES if m in ann]
    if len(modes) > 1:
        yield Finding(ERROR, w.ref, apath, "more than one of " + ", ".join(modes) + ": Kueue rejects the job",
                      "keep exactly one of required, preferred, unconstrained")
    if UNCONSTRAINED in ann and str(ann[UNCONSTRAINED]) not in BOOLEANS:
        yield Finding(ERROR, w.ref, _ann_path(ps.path, UNCONSTRAINED),
                      f"{ann[UNCONSTRAINED]!r} is not a boolean", 'use "true"')
    for key in (REQUIRED, PREFERRED, SLICE_REQUIRED):
        if key in ann:
            yield from _level_findings(w, ps, key, str(ann[key]), keys)
    yield from _slice_findings(w, ps, keys)
    if GROUP_NAME in ann:
        gpath = _ann_path(ps.path, GROUP_NAME)
        if ascii_int(ann[GROUP_NAME]) is not None:
            yield Finding(ERROR, w.ref, gpath, "a PodSet group name must not be a number", "use a word, e.g. leader-worker")
        if SLICE_REQUIRED in ann or SLICE_SIZE in ann:
            yield Finding(ERROR, w.ref, gpath, "a PodSet group cannot be combined with slice annotations",
                          "remove the group name or the slice annotations")
        if REQUIRED not in ann and PREFERRED not in ann:
            yield Finding(ERROR, w.ref, gpath, "a PodSet group needs a required or preferred topology",
                          f"add {REQUIRED} or {PREFERRED}")
    labels = (ps.template.get("metadata") or {}).get("labels") or {}
    if QUEUE_LABEL in labels:
        yield Finding(WARNING, w.ref, path_str((*ps.path, "metadata", "labels", QUEUE_LABEL)),
                      "queue label on a pod template: Kueue reads it only on the top object",
                      f"move it to metadata.labels[{QUEUE_LABEL}]")


def _group_findings(w: Workload) -> Iterable[Finding]:
    groups: dict[str, list[PodSet]] = defaultdict(list)
    for ps in w.podsets:
        if GROUP_NAME in ps.annotations and (REQUIRED in ps.annotations or PREFERRED in ps.annotations):
            groups[str(ps.annotations[GROUP_NAME])].append(ps)
    for name, members in groups.items():
        where = ", ".join(_ann_path(ps.path, GROUP_NAME) for ps in members)
        if len(members) != 2:
            yield Finding(ERROR, w.ref, where, f"group {name!r} has {len(members)} PodSet(s); Kueue needs exactly 2",
                          "give the group name to exactly two PodSets")
            continue
        if all(ps.count != 1 for ps in members):
            yield Finding(ERROR, w.ref, where, f"group {name!r}: one of its two PodSets must have 1 pod "
                          f"(they have {members[0].count} and {members[1].count})", "remove the group name")
        requests = {tuple((m, ps.annotations.get(m)) for m in (REQUIRED, PREFERRED)) for ps in members}
        if len(requests) > 1:
            yield Finding(ERROR, w.ref, where, f"group {name!r}: both PodSets must request the same required or "
                          "preferred level", "give both the same topology annotation")


def _coverage_findings(w: Workload) -> Iterable[Finding]:
    placed = [ps for ps in w.podsets if any(m in ps.annotations for m in MODES) or SLICE_REQUIRED in ps.annotations]
    if not placed:
        yield Finding(WARNING, w.ref, path_str((*w.podsets[0].path, "metadata", "annotations")),
                      "no TAS annotation on any pod template: Kueue places the pods without topology",
                      "topolabel job annotate FILE --queue Q --within LEVEL")
        return
    for ps in w.podsets:
        if ps.annotatable and ps not in placed:
            yield Finding(WARNING, w.ref, path_str((*ps.path, "metadata", "annotations")),
                          f"PodSet {ps.name} has no topology request; it may land in another domain than the rest",
                          f"give it the same {REQUIRED} or {PREFERRED}")


def lint(workloads: Sequence[Workload], keys: Sequence[str] | None = None) -> list[Finding]:
    """Findings for every workload; `keys` (the Topology's levels) enables the level checks."""
    out: list[Finding] = []
    for w in workloads:
        out.extend(_meta_findings(w))
        for ps in w.podsets:
            if ps.annotatable:
                out.extend(_podset_findings(w, ps, keys))
        out.extend(_group_findings(w))
        out.extend(_coverage_findings(w))
    return out


def summary(findings: Sequence[Finding]) -> Mapping[str, int]:
    return {sev: sum(f.severity == sev for f in findings) for sev in (ERROR, WARNING)}
