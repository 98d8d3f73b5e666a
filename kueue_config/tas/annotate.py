"""Write the queue label and TAS annotations where Kueue reads them, editing ruamel round-trip data in place.

The queue goes on the top object's `metadata.labels`; the topology request goes on every pod template
(`podset-required-topology` or `-preferred-topology`, optionally a slice level and size). Misplaced or
conflicting keys are removed first, so the result passes `topolabel job check`. Two PodSets where one
is a single pod (LeaderWorkerSet leader, PyTorchJob Master, Ray head with one worker group) share a
`podset-group-name`, which makes Kueue place them in the same domain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ruamel.yaml.comments import CommentedMap

from labeler.errors import TopologyError

from .workloads import (GROUP_NAME, MODES, PREFERRED, QUEUE_LABEL, REQUIRED, SLICE_CONSTRAINTS, SLICE_REQUIRED,
                        SLICE_SIZE, TAS_ANNOTATIONS, Path, PodSet, Workload, lookup, path_str)


@dataclass(frozen=True)
class TASRequest:
    """What a user asks for: a queue, a level key, required or preferred, and an optional slice layer."""

    queue: str
    level: str
    preferred: bool = False
    slice_size: int | None = None
    slice_level: str | None = None


def _mapping(parent: Any, key: str, after: Sequence[str] = (), before: Sequence[str] = ()) -> Any:
    """parent[key], created as an empty mapping right after the last of `after` present, else right before the
    first of `before` present (a new pod template `metadata` goes before its `spec`), else at the end."""
    if parent.get(key) is None:
        keys = list(parent)
        after_at = [i + 1 for i, k in enumerate(keys) if k in after]
        before_at = [i for i, k in enumerate(keys) if k in before]
        at = max(after_at) if after_at else min(before_at) if before_at else None
        if at is not None and hasattr(parent, "insert"):
            parent.insert(at, key, CommentedMap())
        else:
            parent[key] = CommentedMap()
    return parent[key]


def _drop(meta: Any, keys: Sequence[str], section: str = "annotations") -> list[str]:
    """Remove `keys` from meta[section]; drop the section when it ends up empty. Returns what was removed."""
    found = meta.get(section) if meta is not None else None
    if not found:
        return []
    removed = [k for k in keys if k in found]
    for key in removed:
        del found[key]
    if removed and not found:
        del meta[section]
    return removed


def _drop_empty(obj: Any, path: Path) -> None:
    """Remove the mapping at `path` if nothing is left in it (a `metadata: {}` the user did not write)."""
    parent = lookup(obj, path[:-1])
    if parent is not None and path[-1] in parent and not parent[path[-1]]:
        del parent[path[-1]]


def _slice_targets(podsets: list[PodSet], size: int, ref: str) -> list[PodSet]:
    """PodSets that take the slice: count a multiple of `size`. Smaller ones (a 1-pod Master) are skipped."""
    targets, bad = [], []
    for ps in podsets:
        if ps.count >= size and ps.count % size == 0:
            targets.append(ps)
        elif ps.count > size:
            bad.append(f"{ps.name} ({ps.count} pods)")
    if bad:
        raise TopologyError(f"{ref}: slice size {size} does not divide the pod count of {', '.join(bad)}")
    if not targets:
        raise TopologyError(f"{ref}: slice size {size} is larger than every PodSet "
                            f"({', '.join(f'{p.name}={p.count}' for p in podsets)})")
    return targets


def group_pair(podsets: list[PodSet]) -> tuple[PodSet, PodSet] | None:
    """The two PodSets to group so they share a domain: exactly two, one of them a single pod (Kueue's rule)."""
    if len(podsets) == 2 and any(ps.count == 1 for ps in podsets):
        return podsets[0], podsets[1]
    return None


def annotate(workload: Workload, request: TASRequest, keys: Sequence[str] | None = None) -> list[str]:
    """Annotate one workload in place; the notes say what changed, for the user to read."""
    if request.slice_size is not None and request.slice_size < 1:
        raise TopologyError("--slice-size must be at least 1")
    if request.slice_size and not request.slice_level:
        raise TopologyError("--slice-size needs --slice-within LEVEL")
    if request.slice_level and not request.slice_size:
        raise TopologyError("--slice-within needs --slice-size N")
    if keys is not None and request.slice_level and keys.index(request.slice_level) < keys.index(request.level):
        raise TopologyError(f"slice level {request.slice_level} is above the level {request.level}; "
                            "a slice must fit inside the domain")
    notes: list[str] = []
    meta = _mapping(workload.obj, "metadata")
    removed = _drop(meta, [QUEUE_LABEL, *TAS_ANNOTATIONS])
    for key in removed:
        notes.append(f"{workload.ref}: removed annotation {key} from metadata (Kueue ignores it there)")
    _mapping(meta, "labels", after=("name", "generateName", "namespace"))[QUEUE_LABEL] = request.queue
    notes.append(f"{workload.ref}: metadata.labels[{QUEUE_LABEL}] = {request.queue}")
    for path in workload.inner_meta:
        for key in _drop(lookup(workload.obj, path), TAS_ANNOTATIONS):
            notes.append(f"{workload.ref}: removed {key} from {path_str(path)} (Kueue reads pod templates only)")
        _drop_empty(workload.obj, path)

    podsets = [ps for ps in workload.podsets if ps.annotatable]
    sliced = _slice_targets(podsets, request.slice_size, workload.ref) if request.slice_size else []
    pair = None if sliced else group_pair(podsets)
    mode = PREFERRED if request.preferred else REQUIRED
    for ps in podsets:
        tmeta = _mapping(ps.template, "metadata", before=("spec",))
        replaced = _drop(tmeta, [*MODES, SLICE_REQUIRED, SLICE_SIZE, SLICE_CONSTRAINTS, GROUP_NAME])
        _drop(tmeta, [QUEUE_LABEL], "labels")
        if replaced:
            notes.append(f"{workload.ref}: PodSet {ps.name}: replaced {', '.join(replaced)}")
        notes_for = [f"{mode}={request.level}"]
        values: dict[str, str] = {mode: request.level}
        if ps in sliced:
            values[SLICE_REQUIRED] = str(request.slice_level)
            values[SLICE_SIZE] = str(request.slice_size)
            notes_for.append(f"slices of {request.slice_size} within {request.slice_level}")
        elif request.slice_size:
            notes_for.append(f"no slice ({ps.count} pod(s) < slice size {request.slice_size})")
        if pair and ps in pair:
            values[GROUP_NAME] = f"{pair[0].name}-{pair[1].name}"
            notes_for.append(f"group {values[GROUP_NAME]} (placed in the same domain as the other PodSet)")
        annotations = _mapping(tmeta, "annotations", after=("labels", "name"))
        annotations.update(values)
        notes.append(f"{workload.ref}: PodSet {ps.name} ({ps.count} pod(s)) at {path_str(ps.path)}: "
                     + "; ".join(notes_for))
    for ps in workload.podsets:
        if not ps.annotatable:
            notes.append(f"{workload.ref}: PodSet {ps.name} ({ps.count} pod) has no template in the file to annotate;"
                         " if every flavor of the queue is a TAS flavor Kueue places it anywhere in the Topology "
                         "(implied TAS), else kube-scheduler does")
    return notes
