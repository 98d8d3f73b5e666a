"""What Kueue v0.19 would reject, or silently ignore, in a job's queue label and TAS annotations.

Each finding says what happens, in `effect`:
- `rejected`: the API server or Kueue's webhook refuses the object (`jobframework.ValidateTASPodSetRequest`,
  the slice-size upper bound, `ValidatePodSetGroupingTopology` for the kinds that call it, the elastic-job
  rule); the messages quote Kueue's.
- `no-workload`: the job is accepted, but the Workload Kueue builds breaks its CRD schema (a level or
  group name too long), so it is never created and the job stays suspended.
- `pending`: the Workload is created and never admitted (a level no flavor's Topology has).
- `stuck`: admitted, but some pods keep their scheduling gate and never start.
- `ignored`: Kueue never sees the annotation or label.
- `note`: Kueue does something the author may not expect.
Each finding names the object, the path and the fix.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Iterable, Mapping, Sequence

from labeler.topology.labelvalues import qualified_name_problems

from .annotations import MAX_LAYERS, Constraint, go_bool, go_int32, go_uint64, parse_constraints
from .gates import Gates
from .setup import level_names
from .workloads import (ELASTIC_JOB, GROUP_NAME, MODES, PREFERRED, QUEUE_LABEL, REQUIRED, SLICE_CONSTRAINTS,
                        SLICE_REQUIRED, SLICE_SIZE, TAS_ANNOTATIONS, UNCONSTRAINED, Path, PodSet, Workload, lookup,
                        path_str)

ERROR, WARNING = "error", "warning"
REJECTED, NO_WORKLOAD, PENDING, STUCK, IGNORED, NOTE = "rejected", "no-workload", "pending", "stuck", "ignored", "note"
MAX_LEVEL_KEY = 63  # Workload schema: topologyRequest.required/preferred/podSetSliceRequiredTopology
MAX_GROUP_NAME = 256  # Workload schema: topologyRequest.podSetGroupName
# Kinds whose webhook runs ValidatePodSetGroupingTopology (batch Job and Kubeflow jobs do not).
GROUP_CHECKED = ("JobSet", "LeaderWorkerSet", "RayCluster", "RayJob")


@dataclass(frozen=True)
class Finding:
    severity: str
    object: str
    path: str
    message: str
    fix: str
    effect: str = REJECTED

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class LintContext:
    """What is known about where the job goes: the level keys of each Topology its queue reaches, TAS-only."""

    keys: tuple[tuple[str, ...], ...] | None = None
    tas_only: bool | None = None
    gates: Gates = field(default_factory=Gates)


def _ann_path(template_path: Path, key: str) -> str:
    """Where a pod template's annotation `key` sits."""
    return path_str((*template_path, "metadata", "annotations", key))


class _PodSetCheck:
    """The checks on one pod template, in the order Kueue's webhook runs them."""

    def __init__(self, w: Workload, ps: PodSet, ctx: LintContext) -> None:
        self.w, self.ps, self.ctx = w, ps, ctx
        self.ann = {str(k): v for k, v in ps.annotations.items()}
        self.text = {k: str(v) for k, v in self.ann.items()}
        self.out: list[Finding] = []

    def add(self, key: str | None, message: str, fix: str, effect: str = REJECTED, severity: str = ERROR) -> None:
        where = _ann_path(self.ps.path, key) if key else path_str((*self.ps.path, "metadata", "annotations"))
        self.out.append(Finding(severity, self.w.ref, where, message, fix, effect))

    def run(self) -> list[Finding]:
        self.strings()
        self.modes()
        for key in (REQUIRED, PREFERRED, SLICE_REQUIRED):
            if key in self.ann:
                self.level(key, self.text[key])
        self.group()
        self.slices()
        if SLICE_CONSTRAINTS in self.ann:
            self.layers()
        self.elastic()
        labels = (self.ps.template.get("metadata") or {}).get("labels") or {}
        if QUEUE_LABEL in labels:
            self.out.append(Finding(WARNING, self.w.ref, path_str((*self.ps.path, "metadata", "labels", QUEUE_LABEL)),
                                    "queue label on a pod template: Kueue reads it only on the top object",
                                    f"move it to metadata.labels[{QUEUE_LABEL}]", IGNORED))
        return self.out

    def strings(self) -> None:
        for key in TAS_ANNOTATIONS:
            if key in self.ann and not isinstance(self.ann[key], str):
                self.add(key, f"value {self.ann[key]!r} is not a string; the API server rejects non-string "
                         "annotations", f'quote it: "{self.ann[key]}"')

    def modes(self) -> None:
        modes = [m for m in MODES if m in self.ann]
        if len(modes) > 1:
            self.add(None, "must not contain more than one topology annotation: "
                     f'["{REQUIRED}", "{PREFERRED}", "{UNCONSTRAINED}"] (Kueue rejects the job; found '
                     + ", ".join(modes) + ")", "keep exactly one of required, preferred, unconstrained")
        if UNCONSTRAINED in self.ann and go_bool(self.text[UNCONSTRAINED]) is None:
            self.add(UNCONSTRAINED, f"{self.text[UNCONSTRAINED]!r} must be a boolean value (Kueue rejects the job)",
                     'use "true"')

    def level(self, key: str, value: str, where: str | None = None) -> None:
        where = where or key
        problems = qualified_name_problems(value)
        for problem in problems:
            self.add(where, f"level {value!r} {problem} (Kueue rejects the job)",
                     "use a node label key, as listed in the Topology (`topolabel show` prints them)")
        if len(value) > MAX_LEVEL_KEY and not problems:
            self.add(where, f"level {value!r} is {len(value)} characters; the Workload accepts at most "
                     f"{MAX_LEVEL_KEY}, so Kueue cannot create it and the job stays suspended",
                     f"use a node label key of at most {MAX_LEVEL_KEY} characters", NO_WORKLOAD)
        keys = self.ctx.keys
        if keys is not None and not any(value in k for k in keys):
            named = next((level_names(k).get(value) for k in keys if level_names(k).get(value)), None)
            fix = f"use the label key {named}" if named else "use one of " + ", ".join(dict.fromkeys(
                key for k in keys for key in k))
            self.add(where, f"level {value!r} is not in the Topology of any flavor of the queue: Kueue finds no "
                     "flavor with that level and the workload stays pending", fix, PENDING)

    def group(self) -> None:
        if GROUP_NAME not in self.ann:
            return
        name = self.text[GROUP_NAME]
        if go_uint64(name) is not None:
            self.add(GROUP_NAME, f"group name {name!r} must not be a number (Kueue rejects the job)",
                     "use a word, e.g. leader-worker")
        for other in (SLICE_SIZE, SLICE_REQUIRED):
            if other in self.ann:
                self.add(GROUP_NAME, f"may not be set when '{other}' is specified (Kueue rejects the job)",
                         "remove the group name or the slice annotations")
        if REQUIRED not in self.ann and PREFERRED not in self.ann:
            self.add(GROUP_NAME, f"may not be set when neither '{PREFERRED}' nor '{REQUIRED}' is specified "
                     "(Kueue rejects the job)", f"add {REQUIRED} or {PREFERRED}")
        elif len(name) > MAX_GROUP_NAME:
            self.add(GROUP_NAME, f"group name is {len(name)} characters; the Workload accepts at most "
                     f"{MAX_GROUP_NAME}, so Kueue cannot create it and the job stays suspended",
                     f"use a name of at most {MAX_GROUP_NAME} characters", NO_WORKLOAD)

    def slices(self) -> None:
        has_level, has_size = SLICE_REQUIRED in self.ann, SLICE_SIZE in self.ann
        count = self.ps.count
        if has_size:
            raw = self.text[SLICE_SIZE]
            size = go_int32(raw)
            if size is None:
                self.add(SLICE_SIZE, f"slice size {raw!r} must be a numeric value (Kueue parses it with Go's "
                         "strconv.ParseInt: digits and an optional sign, nothing else) and rejects the job",
                         f'give a divisor of {count} as a quoted string, e.g. "{count}"')
            elif size < 1:
                self.add(SLICE_SIZE, f"slice size {raw!r} must be greater than or equal to 1 (Kueue rejects the job)",
                         f"use a divisor of {count}")
            elif size > count:
                self.add(SLICE_SIZE, f"slice size {raw!r} must not be greater than pod set count {count} "
                         "(Kueue rejects the job)", f"use a divisor of {count}")
            elif has_level:
                self.divides(SLICE_SIZE, size)
        if has_level and not has_size:
            self.add(SLICE_SIZE, f"{SLICE_SIZE} must be set when '{SLICE_REQUIRED}' is specified (the slice "
                     "size is missing; Kueue rejects the job)", f"add {SLICE_SIZE}: a divisor of the PodSet's "
                     f"{count} pods")
        if has_size and not has_level:
            self.add(SLICE_SIZE, f"may not be set when '{SLICE_REQUIRED}' is not specified (Kueue rejects the job)",
                     f"add {SLICE_REQUIRED}: <level> or remove the slice size")
        if has_level and self.ctx.keys is not None:
            self.below(self.text[SLICE_REQUIRED], SLICE_REQUIRED)

    def divides(self, key: str, size: int) -> None:
        count = self.ps.count
        if count % size:
            self.add(key, f"slice size {size} does not divide the PodSet's {count} pods: Kueue places "
                     f"{count // size * size} and the other {count % size} never start",
                     f"use a divisor of {count}", STUCK)

    def below(self, slice_level: str, key: str) -> None:
        """The slice level must be at or below the PodSet's level in every Topology that has both."""
        level = self.text.get(REQUIRED) or self.text.get(PREFERRED)
        for keys in self.ctx.keys or ():
            if level in keys and slice_level in keys and keys.index(slice_level) < keys.index(level):
                self.add(key, f"podset slice topology {slice_level} is above the podset topology {level}: Kueue "
                         "cannot place it and the workload stays pending",
                         "choose a slice level at or below the PodSet level", PENDING)
                return

    def layers(self) -> None:
        key = SLICE_CONSTRAINTS
        if not self.ctx.gates.multi_layer:
            self.add(key, "the TASMultiLayerTopology feature gate must be enabled to use this annotation",
                     "remove it, or enable the gate in Kueue's configuration")
            return
        for other in (SLICE_REQUIRED, SLICE_SIZE):
            if other in self.ann:
                self.add(key, f"may not be set when '{other}' is specified (Kueue rejects the job)",
                         "keep one form of slice request")
        if GROUP_NAME in self.ann:
            self.add(GROUP_NAME, f"may not be set when '{key}' is specified (Kueue rejects the job)",
                     "remove the group name or the constraints")
        raw = self.text[key]
        try:
            layers = parse_constraints(raw)
        except ValueError as exc:
            self.add(key, f"must be a valid JSON array: {exc} (Kueue rejects the job)",
                     '[{"topology": "<level key>", "size": <pods>}, ...], outermost layer first')
            return
        if not 1 <= len(layers) <= MAX_LAYERS:
            self.add(key, f"topology constraints must contain between 1 and {MAX_LAYERS} entries (got "
                     f"{len(layers)}; Kueue rejects the job)", "give one to three layers, outermost first")
            return
        self.layer_values(key, layers)

    def layer_values(self, key: str, layers: list[Constraint]) -> None:
        bad = False
        for i, layer in enumerate(layers):
            self.level(key, layer.topology, key)
            if layer.size < 1:
                bad = True
                self.add(key, f"layer {i}: size {layer.size} must be greater than or equal to 1 (Kueue rejects the "
                         "job)", "give each layer a positive pod count")
        seen: dict[str, int] = {}
        for i, layer in enumerate(layers):
            if layer.topology in seen:
                self.add(key, f"layer {i}: duplicate topology {layer.topology} (also at index {seen[layer.topology]};"
                         " Kueue rejects the job)", "give each layer its own level")
            seen.setdefault(layer.topology, i)
        for i in range(len(layers) - 1):
            inner = layers[i + 1].size
            if inner > 0 and layers[i].size % inner:
                bad = True
                self.add(key, f"layer {i + 1}: size {inner} must evenly divide the parent layer size "
                         f"{layers[i].size} (Kueue rejects the job)", "make each size a divisor of the one above")
        count = self.ps.count
        if layers[0].size > count:
            self.add(key, f"layer 0: size {layers[0].size} must not be greater than pod set count {count} "
                     "(Kueue rejects the job)", f"use a divisor of {count}")
        elif not bad:
            self.divides(key, layers[0].size)
            self.order(key, layers)

    def order(self, key: str, layers: list[Constraint]) -> None:
        """Layers coarsest first, each finer than the one above (Kueue checks this only when it schedules)."""
        self.below(layers[0].topology, key)
        for keys in self.ctx.keys or ():
            idx = [keys.index(layer.topology) if layer.topology in keys else None for layer in layers]
            for i in range(1, len(layers)):
                above, here = idx[i - 1], idx[i]
                if above is not None and here is not None and here <= above:
                    self.add(key, f"additional slice layer topology {layers[i].topology} must be at a lower level "
                             f"than {layers[i - 1].topology}: Kueue cannot place it and the workload stays pending",
                             "list the layers from the coarsest level to the finest", PENDING)
                    return

    def elastic(self) -> None:
        annotations = (self.w.obj.get("metadata") or {}).get("annotations") or {}
        if self.w.kind != "Job" or str(annotations.get(ELASTIC_JOB)) != "true":
            return
        if not self.ctx.gates["ElasticJobsViaWorkloadSlices"]:
            return
        for key in (REQUIRED, PREFERRED):
            if key in self.ann:
                mode = "required" if key == REQUIRED else "preferred"
                self.add(key, f"{mode} topology is not supported with elastic jobs (Kueue rejects the job)",
                         f"use {UNCONSTRAINED}: \"true\", or remove {ELASTIC_JOB}")


def _meta_findings(w: Workload) -> Iterable[Finding]:
    meta = w.obj.get("metadata") or {}
    annotations, labels = meta.get("annotations") or {}, meta.get("labels") or {}
    if QUEUE_LABEL in annotations:
        yield Finding(ERROR, w.ref, path_str(("metadata", "annotations", QUEUE_LABEL)),
                      "the queue name is an annotation; Kueue reads only the label, so the job is not queued",
                      f"move it to metadata.labels[{QUEUE_LABEL}]", IGNORED)
    elif QUEUE_LABEL not in labels:
        yield Finding(WARNING, w.ref, "metadata.labels",
                      "no queue label: Kueue leaves the job alone unless the namespace has a default LocalQueue",
                      f"add metadata.labels[{QUEUE_LABEL}]: <LocalQueue name>", IGNORED)
    targets = ", ".join(path_str((*ps.path, "metadata", "annotations")) for ps in w.podsets if ps.annotatable)
    for where in [("metadata",), *w.inner_meta]:
        found = (lookup(w.obj, where) or {}).get("annotations") or {}
        for key in TAS_ANNOTATIONS:
            if key in found:
                yield Finding(ERROR, w.ref, path_str((*where, "annotations", key)),
                              "TAS annotation on the object, not on its pod template: Kueue ignores it",
                              f"move it to {targets}", IGNORED)


def _grouped(ps: PodSet) -> str | None:
    """The PodSet's group as the Workload carries it: only beside a required or preferred topology."""
    ann = ps.annotations
    if GROUP_NAME in ann and (REQUIRED in ann or PREFERRED in ann):
        return str(ann[GROUP_NAME])
    return None


def _group_findings(w: Workload) -> Iterable[Finding]:
    groups: dict[str, list[PodSet]] = defaultdict(list)
    for ps in w.podsets:
        name = _grouped(ps)
        if name is not None and ps.annotatable:
            groups[name].append(ps)
    checked = w.kind in GROUP_CHECKED
    for name, members in groups.items():
        where = ", ".join(_ann_path(ps.path, GROUP_NAME) for ps in members)
        if len(members) != 2:
            if checked:
                yield Finding(ERROR, w.ref, where, f"group {name!r}: can only define groups of exactly 2 pod sets, "
                              f"got: {len(members)} pod set(s) (Kueue rejects the job)",
                              "give the group name to exactly two PodSets")
            elif len(members) == 1:
                yield Finding(WARNING, w.ref, where, f"group {name!r} has only this PodSet: Kueue accepts it and "
                              "places the PodSet on its own, as if it had no group name", "remove the group name",
                              NOTE)
            continue
        a, b = members
        requests = {tuple((m, ps.annotations.get(m)) for m in (REQUIRED, PREFERRED)) for ps in members}
        if a.count != 1 and b.count != 1:
            if checked:
                yield Finding(ERROR, w.ref, where, f"group {name!r}: can only define groups where at least one pod "
                              f"set has only 1 replica, got: {a.count} replica(s) and {b.count} replica(s) in the "
                              "group (Kueue rejects the job)", "remove the group name")
            else:
                leader = a if b.count > a.count else b  # Kueue's findLeaderAndWorkers
                yield Finding(ERROR, w.ref, where, f"group {name!r}: neither PodSet has 1 pod ({a.name} {a.count}, "
                              f"{b.name} {b.count}). Kueue accepts it, but its scheduler treats {leader.name} as a "
                              f"one-pod leader: it places 1 of its {leader.count} pods beside the other PodSet, and "
                              f"the other {leader.count - 1} keep their scheduling gate and never start",
                              "remove the group name (or give the group a one-pod PodSet)", STUCK)
        if len(requests) > 1:
            if checked:
                yield Finding(ERROR, w.ref, where, f"group {name!r}: must specify '{REQUIRED}' or '{PREFERRED}' "
                              "topology consistent with the other PodSet of the group (Kueue rejects the job)",
                              "give both the same topology annotation")
            else:
                workers = b if b.count > a.count else a
                yield Finding(WARNING, w.ref, where, f"group {name!r}: the two PodSets ask for different "
                              f"topologies; Kueue accepts it and places both by {workers.name}'s request, ignoring "
                              "the other's", "give both the same topology annotation", NOTE)


def _coverage_findings(w: Workload, ctx: LintContext) -> Iterable[Finding]:
    placed = [ps for ps in w.podsets if any(k in ps.annotations for k in (*MODES, SLICE_REQUIRED, SLICE_CONSTRAINTS))]
    annotations_path = path_str((*w.podsets[0].path, "metadata", "annotations"))
    fix = "topolabel job annotate FILE --queue Q --within LEVEL"
    if not placed:
        if ctx.tas_only:
            message = ("no TAS annotation: every flavor of the queue is a TAS flavor, so Kueue applies implied TAS - "
                       "it places the pods anywhere in the Topology, fullest domains first, with no compactness")
        elif ctx.tas_only is None:
            message = ("no TAS annotation: Kueue places the pods without topology on a non-TAS flavor, or, if every "
                       "flavor of the queue is a TAS flavor, anywhere in the Topology (implied TAS)")
        else:
            message = ("no TAS annotation: Kueue admits the job on a flavor without topology and kube-scheduler "
                       "places the pods")
        yield Finding(WARNING, w.ref, annotations_path, message, fix, NOTE)
        return
    for ps in w.podsets:
        if ps.annotatable and ps not in placed:
            yield Finding(WARNING, w.ref, path_str((*ps.path, "metadata", "annotations")),
                          f"PodSet {ps.name} has no topology request; it may land in another domain than the rest",
                          f"give it the same {REQUIRED} or {PREFERRED}", NOTE)


def lint(workloads: Sequence[Workload], ctx: LintContext | None = None) -> list[Finding]:
    """Findings for every workload; `ctx.keys` (the Topologies' levels) enables the level checks."""
    ctx = ctx or LintContext()
    out: list[Finding] = []
    for w in workloads:
        out.extend(_meta_findings(w))
        for ps in w.podsets:
            if ps.annotatable:
                out.extend(_PodSetCheck(w, ps, ctx).run())
        out.extend(_group_findings(w))
        out.extend(_coverage_findings(w, ctx))
    return out


def rejections(findings: Sequence[Finding]) -> list[Finding]:
    """The findings that stop Kueue before it places anything (the object or its Workload is refused)."""
    return [f for f in findings if f.effect in (REJECTED, NO_WORKLOAD)]


def summary(findings: Sequence[Finding]) -> Mapping[str, int]:
    return {sev: sum(f.severity == sev for f in findings) for sev in (ERROR, WARNING)}

