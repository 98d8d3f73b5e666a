"""`topolabel.yaml`: one config for the CLI and the operator; flags override it.

    keyPrefix: topolabel.dev/          # label keys are keyPrefix + level name ...
    levels:                            # ... unless a level's key is given here
      - {name: block, label: example.com/block}
    source: {type: labels, preset: gke}
    plan: {maxChangeFraction: 0.25}
    apply: {concurrency: 16, retries: 5}
    pools:
      label: nvidia.com/gpu.product
      fallbackLabels: [node.kubernetes.io/instance-type]
      resources: [cpu, memory, nvidia.com/gpu]
    kueue:
      topologyName: default
      clusterQueue: gpu                # one ClusterQueue (in `cohort`), or several:
      clusterQueues:                   # see labeler/queues.py and docs/gitops.md
        - {name: team-a, cohort: research, quota: {nvidia.com/gpu: {fraction: 0.5, step: 8}}}
      cohorts: [{name: research}]
      localQueues: [{name: gpu, namespaces: [team-a], clusterQueue: team-a}]
    export:
      slurm:
        topologies:                    # topology.yaml's named topologies (docs/exports.md)
          - {name: gpu, plugin: block, nodeSelector: {nvidia.com/gpu.present: "true"}, clusterDefault: true}

Every problem in a file is reported at once, each at its path (`source.preset`, `kueue.clusterQueues[0].name`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .documents import read_document
from .errors import InputError
from .names import camel, snake
from .model import DEFAULT_PREFIX, Ownership, ownership
from .plan import MAX_CHANGE_FRACTION
from .queues import Amounts, ClusterQueueConfig, CohortConfig, LocalQueueConfig, ObjectName, kueue_issues
from .validation import Issue, Loc, did_you_mean, issues, model_issues, one_line


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class LevelConfig(_Model):
    """The label key of one level, by the level's name."""

    name: str
    label: str | None = Field(None, description="The node label key (default: keyPrefix + name)")


class SourceConfig(BaseModel):
    """`type` picks the source; every other key is that source's option (checked by the source)."""

    model_config = ConfigDict(extra="allow")
    type: str

    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class PlanConfig(_Model):
    max_change_fraction: float = Field(MAX_CHANGE_FRACTION, alias="maxChangeFraction", ge=0, le=1,
                                       description="Refuse a plan that rewrites or removes labels on more than this "
                                                   "share of nodes")


class ApplyConfig(_Model):
    concurrency: int = Field(16, ge=1, le=256, description="Node patches in flight")
    retries: int = Field(5, ge=0, le=20, description="Retries per patch on 409, 429 and 5xx")


class PoolConfig(_Model):
    """Node pools: one ResourceFlavor per value of the pool label."""

    label: str = Field("nvidia.com/gpu.product", description="One pool (ResourceFlavor) per value of this label")
    fallback_labels: list[str] = Field(default_factory=lambda: ["node.kubernetes.io/instance-type"],
                                       alias="fallbackLabels")
    resources: list[str] = Field(default_factory=lambda: ["cpu", "memory", "nvidia.com/gpu"],
                                 description="Resources the ClusterQueues hold quota for")
    taint_keys: list[str] = Field(
        default_factory=lambda: ["nvidia.com/gpu", "amd.com/gpu", "aws.amazon.com/neuron", "google.com/tpu"],
        alias="taintKeys", description="Taints the ResourceFlavors tolerate")


class KueueConfig(_Model):
    """One ClusterQueue (`clusterQueue`, `cohort`), or several (`clusterQueues`), with Cohorts and LocalQueues."""

    topology_name: str = Field("default", alias="topologyName", description="Base name of the Topology "
                                                                             "(a hash of its levels is appended)")
    hostname_level: bool = Field(True, alias="hostnameLevel",
                                 description="kubernetes.io/hostname as the Topology's last level")
    cluster_queue: ObjectName = Field("gpu", alias="clusterQueue",
                                      description="The one ClusterQueue's name, when clusterQueues is not given")
    cohort: ObjectName | None = Field(None, description="The one ClusterQueue's cohort")
    quota: Amounts = Field(default_factory=dict, description="Default nominalQuota per resource for every "
                                                             "ClusterQueue and pool (default: the capacity)")
    cluster_queues: list[ClusterQueueConfig] | None = Field(None, alias="clusterQueues", min_length=1)
    cohorts: list[CohortConfig] = Field(default_factory=list)
    local_queues: list[LocalQueueConfig] = Field(default_factory=list, alias="localQueues")

    def queues(self) -> list[ClusterQueueConfig]:
        """The ClusterQueues to generate: `clusterQueues`, or the one `clusterQueue` (in its cohort)."""
        if self.cluster_queues is not None:
            return self.cluster_queues
        return [ClusterQueueConfig(name=self.cluster_queue, cohort=self.cohort)]

    def default_queue(self) -> str | None:
        """The ClusterQueue a LocalQueue without `clusterQueue` feeds (None when there are several)."""
        queues = self.queues()
        return queues[0].name if len(queues) == 1 else None

    def issues(self, resources: list[str], loc: Loc) -> list[Issue]:
        found = []
        if self.cluster_queues is not None:
            found += [Issue((*loc, key), "describes the one ClusterQueue; with clusterQueues, give each its "
                                         "name and cohort there") for key in ("clusterQueue", "cohort")
                      if snake(key) in self.model_fields_set]
        found += [Issue((*loc, "quota", r), "not one of pools.resources" + did_you_mean(r, resources))
                  for r in self.quota if r not in resources]
        return found + kueue_issues(self.queues(), self.cohorts, self.local_queues, resources,
                                    self.default_queue(), loc)


class SlurmTopologyConfig(_Model):
    """One named topology of topology.yaml (`topolabel export slurm --format yaml`); checked by the exporter."""

    name: str
    plugin: Literal["tree", "block", "flat"] = "tree"
    node_selector: dict[str, str] = Field(default_factory=dict, alias="nodeSelector")
    cluster_default: bool = Field(False, alias="clusterDefault")
    block_level: str | None = Field(None, alias="blockLevel")
    block_sizes: list[int] = Field(default_factory=list, alias="blockSizes")


class SlurmExportConfig(_Model):
    topologies: list[SlurmTopologyConfig] = Field(default_factory=list)


class ExportConfig(_Model):
    """Options of `topolabel export` (docs/exports.md); the operator does not use them."""

    slurm: SlurmExportConfig = Field(default_factory=SlurmExportConfig)


class Config(_Model):
    """topolabel.yaml, and the spec of the TopologyLabeler custom resource."""

    key_prefix: str = Field(DEFAULT_PREFIX, alias="keyPrefix",
                            description="Label keys are keyPrefix + level name unless a level names its key")
    levels: list[LevelConfig] = Field(default_factory=list)
    source: SourceConfig | None = None
    plan: PlanConfig = Field(default_factory=PlanConfig)
    apply: ApplyConfig = Field(default_factory=ApplyConfig)
    pools: PoolConfig = Field(default_factory=PoolConfig)
    kueue: KueueConfig = Field(default_factory=KueueConfig)
    export: ExportConfig = Field(default_factory=ExportConfig)

    @field_validator("key_prefix")
    @classmethod
    def _prefix_ends_with_slash(cls, value: str) -> str:
        if value and not value.endswith("/"):
            raise ValueError("must end with '/', e.g. 'topolabel.dev/'")
        return value

    def label_overrides(self) -> dict[str, str]:
        return {lv.name: lv.label for lv in self.levels if lv.label}

    def ownership(self) -> Ownership:
        """The label keys this config lets topolabel write and remove (`model.Ownership`)."""
        return ownership(self.key_prefix, self.label_overrides().values())


OptionModels = Mapping[str, type[BaseModel]]  # source type -> the model of its options


def load_config(path: str | Path | None, sources: OptionModels | None = None) -> Config:
    """The config at `path` (defaults when None), with errors naming the file and every bad key."""
    if path is None:
        return Config()
    data = read_document(path) or {}
    return parse_config(data, str(path), sources)


def parse_config(data: Any, origin: str, sources: OptionModels | None = None) -> Config:
    """A valid config, or an `InputError` listing every problem at its path. With `sources` (the option
    models of each source type), the `source` section's options are checked too."""
    cfg, found = config_issues(data, sources)
    if cfg is None or found:
        raise InputError(f"{origin}: {one_line(found)}")
    return cfg


def config_issues(data: Any, sources: OptionModels | None = None) -> tuple[Config | None, list[Issue]]:
    """Every problem in a config document at once: the shape, the source's options, cross-references."""
    cfg, found = model_issues(Config, data)
    if sources is not None and isinstance(data, Mapping) and isinstance(data.get("source"), Mapping):
        found += source_issues(data["source"], sources)
    if cfg is not None:
        found += cfg.kueue.issues(cfg.pools.resources, ("kueue",))
    order = [f.alias or name for name, f in Config.model_fields.items()]
    found.sort(key=lambda i: order.index(i.loc[0]) if i.loc and i.loc[0] in order else len(order))
    return (None if found else cfg), found


def source_issues(section: Mapping[str, Any], sources: OptionModels) -> list[Issue]:
    """The `source` section's options checked against its type's model, at paths under `source`."""
    kind = section.get("type")
    if not isinstance(kind, str):
        return []  # the model already reports a missing or non-string type
    if kind not in sources:
        return [Issue(("source", "type"), f"unknown source {kind!r}" + did_you_mean(kind, sources))]
    return options_issues(sources[kind], {k: v for k, v in section.items() if k != "type"}, ("source",))


def options_issues(model: type[BaseModel], options: Mapping[str, Any], prefix: Loc,
                   own: tuple[str, ...] = ("type",)) -> list[Issue]:
    """A source's options, as a config writes them (camelCase), checked against its model, at paths under
    `prefix`; `own` are the other keys allowed beside them (suggested for a typo too)."""
    written = {snake(k): k for k in options}
    _, found = model_issues(model, {snake(k): v for k, v in options.items()}, prefix, written)
    known = [*own, *(camel(name) for name in model.model_fields)]
    return [Issue(i.loc, "unknown key" + did_you_mean(str(i.loc[-1]), known))
            if i.message.startswith("unknown key") else i for i in found]


def validation_details(exc: ValidationError, model: type[BaseModel], top: str = "(options)") -> str:
    """Pydantic's errors on one line, each at its path (`top` when the whole input is wrong)."""
    found = issues(exc, model.model_json_schema(by_alias=True))
    return "; ".join(str(i) if i.loc else f"{top}: {i.message}" for i in found)
