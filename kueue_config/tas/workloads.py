"""Where Kueue finds the pod templates of each workload kind, and how many pods it counts for each.

Kueue turns a job into one Workload with one PodSet per pod template; the PodSet's count is what TAS
places. The rules here follow Kueue v0.19's integrations (`pkg/controller/jobs/*`): a Job counts
min(parallelism, completions), a JobSet replicatedJob counts replicas x that, a PyTorchJob replica spec
counts its replicas (Master first, then Worker), a LeaderWorkerSet makes one Workload per replica with a
leader PodSet of 1 and a worker PodSet of size-1 (or one `main` PodSet of `size` without a leader
template), and a RayCluster/RayJob has a head of 1 plus replicas x numOfHosts per worker group (a RayJob
in K8sJobMode adds a one-pod submitter).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from labeler.errors import InputError, TopologyError
from labeler.io.documents import entry, kind_of, mapping, sequence, string_map, text

PREFIX = "kueue.x-k8s.io/"
QUEUE_LABEL = PREFIX + "queue-name"
REQUIRED = PREFIX + "podset-required-topology"
PREFERRED = PREFIX + "podset-preferred-topology"
UNCONSTRAINED = PREFIX + "podset-unconstrained-topology"
SLICE_REQUIRED = PREFIX + "podset-slice-required-topology"
SLICE_SIZE = PREFIX + "podset-slice-size"
SLICE_CONSTRAINTS = PREFIX + "podset-slice-required-topology-constraints"
GROUP_NAME = PREFIX + "podset-group-name"
MODES = (REQUIRED, PREFERRED, UNCONSTRAINED)
TAS_ANNOTATIONS = (*MODES, SLICE_REQUIRED, SLICE_SIZE, SLICE_CONSTRAINTS, GROUP_NAME)
ELASTIC_JOB = PREFIX + "elastic-job"  # on the top object: "true" makes it an elastic job (workload slices)

# What KubeRay runs as the submitter when a RayJob gives no submitterPodTemplate (Kueue copies it).
DEFAULT_SUBMITTER = {"spec": {"containers": [{"name": "ray-job-submitter",
                                              "resources": {"requests": {"cpu": "500m", "memory": "200Mi"}}}]}}

Path = tuple[str | int, ...]


@dataclass
class PodSet:
    """One pod template as Kueue sees it: its PodSet name, where it sits, and the pods it counts.

    `template` is the live mapping inside the document (so annotating it edits the file); it is None
    for a PodSet Kueue synthesises (a RayJob's default submitter), which cannot carry annotations.
    """

    name: str
    path: Path
    count: int
    template: Any
    synthetic_spec: Mapping[str, Any] | None = None

    @property
    def annotatable(self) -> bool:
        return self.template is not None

    @property
    def spec(self) -> Mapping[str, Any]:
        if self.template is None:
            return self.synthetic_spec or {}
        return self.template.get("spec") or {}

    @property
    def annotations(self) -> Mapping[str, str]:
        if self.template is None:
            return {}
        return (self.template.get("metadata") or {}).get("annotations") or {}


@dataclass
class Workload:
    """A top-level object Kueue manages: its kind, name, PodSets, and the metadata that must not carry TAS.

    `workloads` is how many Kueue Workloads the object makes (a LeaderWorkerSet makes one per replica,
    each with the same PodSets); `inner_meta` lists metadata paths between the object and its pod
    templates (a JobSet's Job templates) where TAS annotations would be ignored.
    """

    kind: str
    name: str
    namespace: str | None
    obj: Any
    podsets: list[PodSet]
    workloads: int = 1
    inner_meta: list[Path] = field(default_factory=list)

    @property
    def ref(self) -> str:
        return f"{self.kind}/{self.name}"


def path_str(path: Path) -> str:
    """`spec.replicatedJobs[0].template` from ('spec', 'replicatedJobs', 0, 'template')."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif "." in part or "/" in part:
            out += f'["{part}"]'
        else:
            out += f".{part}" if out else part
    return out


def _int(value: Any, default: int, where: str) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise TopologyError(f"{where}: expected an integer, got {str(value)[:40]!r}")
    return value


def _job_pods(job_spec: Mapping[str, Any], where: str) -> int:
    parallelism = _int(job_spec.get("parallelism"), 1, f"{where}.parallelism")
    completions = _int(job_spec.get("completions"), parallelism, f"{where}.completions")
    return min(parallelism, completions)


def lookup(obj: Any, path: Path) -> Any:
    """The value at `path`, None where the path ends early; a step into a list or scalar of the wrong
    kind is a `TopologyError` naming where."""
    for i, part in enumerate(path):
        if obj is None:
            return None
        if isinstance(part, int) and isinstance(obj, list):
            obj = obj[part] if part < len(obj) else None
        elif isinstance(part, str) and isinstance(obj, Mapping):
            obj = obj.get(part)
        else:
            kind = "a list" if isinstance(part, int) else "a mapping"
            raise TopologyError(f"{path_str(path[:i]) or '(top)'} must be {kind}, not {kind_of(obj)}")
    return obj


def check_pod_spec(spec: Any, where: str) -> None:
    """The fields of a pod spec that fit and show read, with the types the API server would insist on;
    anything else is an error naming the field (so no later step meets a list where a mapping belongs)."""
    spec = mapping(spec, where)
    for section in ("containers", "initContainers"):
        for i, container in enumerate(sequence(spec.get(section), f"{where}.{section}")):
            at = f"{where}.{section}[{i}]"
            container = entry(container, at)
            resources = mapping(container.get("resources"), f"{at}.resources")
            for kind in ("limits", "requests"):
                string_map(resources.get(kind), f"{at}.resources.{kind}")
            if container.get("restartPolicy") is not None:
                text(container["restartPolicy"], f"{at}.restartPolicy")
    string_map(spec.get("overhead"), f"{where}.overhead")
    string_map(spec.get("nodeSelector"), f"{where}.nodeSelector")
    for i, toleration in enumerate(sequence(spec.get("tolerations"), f"{where}.tolerations")):
        string_map(entry(toleration, f"{where}.tolerations[{i}]"), f"{where}.tolerations[{i}]")
    if spec.get("nodeName") is not None:
        text(spec["nodeName"], f"{where}.nodeName")
    at = f"{where}.affinity.nodeAffinity"
    affinity = mapping(mapping(spec.get("affinity"), f"{where}.affinity").get("nodeAffinity"), at)
    at += ".requiredDuringSchedulingIgnoredDuringExecution"
    required = mapping(affinity.get("requiredDuringSchedulingIgnoredDuringExecution"), at)
    for i, term in enumerate(sequence(required.get("nodeSelectorTerms"), f"{at}.nodeSelectorTerms")):
        term_at = f"{at}.nodeSelectorTerms[{i}]"
        for j, expr in enumerate(sequence(entry(term, term_at).get("matchExpressions"), f"{term_at}.matchExpressions")):
            _check_expression(entry(expr, f"{term_at}.matchExpressions[{j}]"), f"{term_at}.matchExpressions[{j}]")


def _check_expression(expr: Mapping[str, Any], where: str) -> None:
    for name in ("key", "operator"):
        if expr.get(name) is not None:
            text(expr[name], f"{where}.{name}")
    for value in sequence(expr.get("values"), f"{where}.values"):
        text(value, f"{where}.values[]")


def check_metadata(meta: Any, where: str) -> None:
    """Labels and annotations as Kubernetes has them: mappings of strings."""
    meta = mapping(meta, where)
    for section in ("labels", "annotations"):
        string_map(meta.get(section), f"{where}.{section}")


def _template(obj: Any, path: Path, ref: str) -> Any:
    found = lookup(obj, path)
    if not isinstance(found, Mapping):
        raise TopologyError(f"{ref}: no pod template at {path_str(path)}")
    try:
        check_metadata(found.get("metadata"), f"{ref} {path_str((*path, 'metadata'))}")
        check_pod_spec(found.get("spec"), f"{ref} {path_str((*path, 'spec'))}")
    except InputError as exc:
        raise TopologyError(str(exc)) from None
    return found


def _list(obj: Any, path: Path, ref: str) -> list[Any]:
    return sequence(lookup(obj, path), f"{ref} {path_str(path)}")


def _batch_job(obj: Any, ref: str) -> tuple[list[PodSet], int, list[Path]]:
    spec = mapping(obj.get("spec"), f"{ref} spec")
    path: Path = ("spec", "template")
    return [PodSet("main", path, _job_pods(spec, f"{ref} spec"), _template(obj, path, ref))], 1, []


def _jobset(obj: Any, ref: str) -> tuple[list[PodSet], int, list[Path]]:
    podsets: list[PodSet] = []
    inner: list[Path] = []
    for i, rjob in enumerate(_list(obj, ("spec", "replicatedJobs"), ref)):
        where = f"{ref} spec.replicatedJobs[{i}]"
        rjob = mapping(rjob, where)
        job_spec = mapping(lookup(rjob, ("template", "spec")), f"{where}.template.spec")
        count = _int(rjob.get("replicas"), 1, f"{where}.replicas") * _job_pods(job_spec, f"{where}.template.spec")
        path: Path = ("spec", "replicatedJobs", i, "template", "spec", "template")
        podsets.append(PodSet(str(rjob.get("name") or i).lower(), path, count, _template(obj, path, ref)))
        inner.append(("spec", "replicatedJobs", i, "template", "metadata"))
    if not podsets:
        raise TopologyError(f"{ref}: spec.replicatedJobs is empty")
    return podsets, 1, inner


def _pytorchjob(obj: Any, ref: str) -> tuple[list[PodSet], int, list[Path]]:
    specs = mapping(lookup(obj, ("spec", "pytorchReplicaSpecs")), f"{ref} spec.pytorchReplicaSpecs")
    podsets = []
    for rtype in ("Master", "Worker"):  # Kueue's order; other keys are not PodSets
        if rtype in specs:
            where = f"{ref} spec.pytorchReplicaSpecs.{rtype}"
            path: Path = ("spec", "pytorchReplicaSpecs", rtype, "template")
            count = _int(mapping(specs[rtype], where).get("replicas"), 1, f"{where}.replicas")
            podsets.append(PodSet(rtype.lower(), path, count, _template(obj, path, ref)))
    if not podsets:
        raise TopologyError(f"{ref}: spec.pytorchReplicaSpecs has neither Master nor Worker")
    return podsets, 1, []


def _leaderworkerset(obj: Any, ref: str) -> tuple[list[PodSet], int, list[Path]]:
    lwt: Path = ("spec", "leaderWorkerTemplate")
    size = _int(lookup(obj, (*lwt, "size")), 1, f"{ref} spec.leaderWorkerTemplate.size")
    replicas = _int(lookup(obj, ("spec", "replicas")), 1, f"{ref} spec.replicas")
    worker: Path = (*lwt, "workerTemplate")
    if lookup(obj, (*lwt, "leaderTemplate")) is None:
        return [PodSet("main", worker, size, _template(obj, worker, ref))], replicas, []
    leader: Path = (*lwt, "leaderTemplate")
    return [PodSet("leader", leader, 1, _template(obj, leader, ref)),
            PodSet("worker", worker, size - 1, _template(obj, worker, ref))], replicas, []


def _ray_podsets(obj: Any, base: Path, ref: str) -> list[PodSet]:
    head: Path = (*base, "headGroupSpec", "template")
    podsets = [PodSet("head", head, 1, _template(obj, head, ref))]
    for i, group in enumerate(_list(obj, (*base, "workerGroupSpecs"), ref)):
        where = f"{ref} {path_str((*base, 'workerGroupSpecs', i))}"
        group = mapping(group, where)
        count = _int(group.get("replicas"), 1, f"{where}.replicas")
        hosts = _int(group.get("numOfHosts"), 1, f"{where}.numOfHosts")
        path: Path = (*base, "workerGroupSpecs", i, "template")
        podsets.append(PodSet(str(group.get("groupName") or f"group-{i}").lower(), path,
                              count * max(hosts, 1), _template(obj, path, ref)))
    return podsets


def _raycluster(obj: Any, ref: str) -> tuple[list[PodSet], int, list[Path]]:
    return _ray_podsets(obj, ("spec",), ref), 1, []


def _rayjob(obj: Any, ref: str) -> tuple[list[PodSet], int, list[Path]]:
    if lookup(obj, ("spec", "rayClusterSpec")) is None:
        raise TopologyError(f"{ref}: no spec.rayClusterSpec (a RayJob on an existing cluster has no PodSets "
                            "of its own)")
    podsets = _ray_podsets(obj, ("spec", "rayClusterSpec"), ref)
    if (lookup(obj, ("spec", "submissionMode")) or "K8sJobMode") == "K8sJobMode":
        path: Path = ("spec", "submitterPodTemplate")
        template = lookup(obj, path)
        podsets.append(PodSet("submitter", path, 1, template,
                              None if template is not None else DEFAULT_SUBMITTER["spec"]))
    return podsets, 1, []


def _kueue_workload(obj: Any, ref: str) -> tuple[list[PodSet], int, list[Path]]:
    """A Kueue Workload itself (what `topolabel why` reads): its PodSets as the job controller made them."""
    podsets = []
    for i, ps in enumerate(_list(obj, ("spec", "podSets"), ref)):
        where = f"{ref} spec.podSets[{i}]"
        ps = mapping(ps, where)
        path: Path = ("spec", "podSets", i, "template")
        podsets.append(PodSet(str(ps.get("name") or i), path, _int(ps.get("count"), 1, f"{where}.count"),
                              _template(obj, path, ref)))
    return podsets, 1, []


# (API group, kind) -> reader; the versions Kueue v0.19 serves are batch/v1, jobset.x-k8s.io/v1alpha2,
# kubeflow.org/v1, leaderworkerset.x-k8s.io/v1 and ray.io/v1.
KINDS = {
    ("batch", "Job"): _batch_job,
    ("jobset.x-k8s.io", "JobSet"): _jobset,
    ("kubeflow.org", "PyTorchJob"): _pytorchjob,
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): _leaderworkerset,
    ("ray.io", "RayCluster"): _raycluster,
    ("ray.io", "RayJob"): _rayjob,
}


def supported() -> str:
    return ", ".join(kind for _, kind in KINDS)


def queue_name(workload: Workload) -> str | None:
    """The LocalQueue the job names (its queue-name label; a Workload's spec.queueName)."""
    meta = workload.obj.get("metadata") or {}
    if workload.kind == "Workload":
        return str((workload.obj.get("spec") or {}).get("queueName") or "") or None
    return str((meta.get("labels") or {}).get(QUEUE_LABEL) or "") or None


def workload_of(obj: Any, origin: str = "job", kinds: Mapping[tuple[str, str], Any] = KINDS) -> Workload | None:
    """The Workload view of one object, or None for an object Kueue does not manage (a ConfigMap)."""
    if not isinstance(obj, Mapping):
        return None
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    kind = str(obj.get("kind") or "")
    reader = kinds.get((group, kind))
    if reader is None:
        return None
    meta = mapping(obj.get("metadata"), f"{origin}: {kind} metadata")
    name = str(meta.get("name") or meta.get("generateName") or "(unnamed)")
    ref = f"{origin}: {kind}/{name}"
    namespace = meta.get("namespace")
    try:
        check_metadata(meta, f"{ref} metadata")
        if namespace is not None:
            text(namespace, f"{ref} metadata.namespace")
    except InputError as exc:
        raise TopologyError(str(exc)) from None
    try:
        podsets, replicas, inner = reader(obj, ref)
        for path in inner:
            check_metadata(lookup(obj, path), f"{ref} {path_str(path)}")
    except InputError as exc:  # a lookup through a scalar: name the object
        raise TopologyError(str(exc) if str(exc).startswith(origin) else f"{ref}: {exc}") from None
    return Workload(kind, name, None if namespace is None else str(namespace), obj, podsets, replicas, inner)


def from_kueue_workload(obj: Any, origin: str) -> Workload:
    """A Kueue Workload object read like a job, its PodSets as the job controller made them."""
    found = workload_of(obj, origin, {("kueue.x-k8s.io", "Workload"): _kueue_workload})
    if found is None:
        raise TopologyError(f"{origin}: not a kueue.x-k8s.io Workload")
    return found


def workloads_in(documents: Sequence[Any], origin: str) -> list[Workload]:
    """Every managed object in a file's documents; a file with none is an error naming the kinds known."""
    found = [w for w in (workload_of(doc, origin) for doc in documents) if w is not None]
    if not found:
        raise TopologyError(f"{origin}: no workload of a supported kind ({supported()})")
    return found


def with_count(workload: Workload, podset: str, count: int) -> Any | None:
    """A copy of the job's object with `count` pods in PodSet `podset` (the fields its kind counts with),
    or None when the kind cannot say it simply (a JobSet whose replicas do not divide it, Ray)."""
    import copy

    obj = copy.deepcopy(workload.obj)
    ps = next(p for p in workload.podsets if p.name == podset)
    if workload.kind == "Job":
        obj["spec"]["parallelism"] = obj["spec"]["completions"] = count
    elif workload.kind == "JobSet":
        rjob = lookup(obj, ps.path[:3])
        replicas = _int(rjob.get("replicas"), 1, "replicas")
        if count % replicas:
            return None
        spec = rjob["template"]["spec"]
        spec["parallelism"] = spec["completions"] = count // replicas
    elif workload.kind == "PyTorchJob":
        lookup(obj, ps.path[:3])["replicas"] = count
    elif workload.kind == "LeaderWorkerSet":
        obj["spec"]["leaderWorkerTemplate"]["size"] = count + (1 if podset == "worker" else 0)
    elif workload.kind == "Workload":  # what `why` reads: the PodSet's count (the job's own field says the same)
        lookup(obj, ps.path[:3])["count"] = count
    else:
        return None
    return obj
