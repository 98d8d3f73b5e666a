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
      clusterQueues:                   # see labeler/settings/queues.py and docs/gitops.md
        - {name: team-a, cohort: research, quota: {nvidia.com/gpu: {fraction: 0.5, step: 8}}}
      cohorts: [{name: research}]
      localQueues: [{name: gpu, namespaces: [team-a], clusterQueue: team-a}]
    health:                            # fabric health -> isolation (docs/health.md)
      enabled: true
      taint: {effect: NoSchedule}
      domains: [{level: leafgroup, nodes: 2}]
    export:                            # per output format, its options (as its flags; exporters.<format>)
      slurm:
        format: yaml
        topologies:                    # topology.yaml's named topologies (docs/exports.md)
          - {name: gpu, plugin: block, nodeSelector: {nvidia.com/gpu.present: "true"}, clusterDefault: true}

Every problem in a file is reported at once, each at its path (`source.preset`, `kueue.clusterQueues[0].name`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import InputError
from ..io.documents import read_document
from ..topology.isolation import COUNTERS, DomainRule, Policy
from ..topology.model import DEFAULT_PREFIX, Ownership, ownership
from ..topology.names import camel, snake
from ..topology.plan import MAX_CHANGE_FRACTION
from .queues import Amounts, ClusterQueueConfig, CohortConfig, LocalQueueConfig, ObjectName, kueue_issues
from .validation import Issue, Loc, did_you_mean, file_order, issues, model_issues, one_line


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


TAINT_PREFIX = "topolabel.dev/"  # the operator writes only taints under it (docs/health.md, the admission policy)


class TaintConfig(_Model):
    """The taint isolated nodes get. Without this section no taint is written (the condition still is)."""

    key: str = Field(TAINT_PREFIX + "fabric-degraded", description=f"Taint key; must start with {TAINT_PREFIX}")
    effect: Literal["NoSchedule", "NoExecute"] = Field("NoSchedule", description="NoExecute also evicts the pods "
                                                                                 "that do not tolerate it")
    node_selector: dict[str, str] = Field(default_factory=dict, alias="nodeSelector",
                                          description="Taint only nodes carrying these labels (default: every node)")

    @field_validator("key")
    @classmethod
    def _owned_key(cls, value: str) -> str:
        name = value.removeprefix(TAINT_PREFIX)
        if not value.startswith(TAINT_PREFIX) or not re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?",
                                                                   name):
            raise ValueError(f"must be {TAINT_PREFIX}<name>, the name at most 63 characters of letters, digits, "
                             "'-', '_' or '.'")
        return value


class DomainRuleConfig(_Model):
    """Quarantine a whole domain of `level` when `nodes` of its nodes, or `fraction` of them, are degraded."""

    level: str = Field(description="A level name (its key is keyPrefix + name, or as `levels` says) or a label key")
    nodes: int | None = Field(None, ge=1)
    fraction: float | None = Field(None, gt=0, le=1)


class ConditionConfig(_Model):
    """A node condition another tool sets (node-problem-detector, NVSentinel) that counts as a bad observation."""

    type: str
    status: str = Field("True", description="The status that is bad (default True: a problem condition)")


class HealthConfig(_Model):
    """Fabric health: when observations take nodes (or domains) out of placement (docs/health.md)."""

    enabled: bool = Field(False, description="The operator evaluates fabric health and writes the FabricHealthy "
                                             "node condition (and the taint, when `taint` is given)")
    degrade_after: int = Field(3, alias="degradeAfter", ge=1, le=100,
                               description="Bad observations within `window` that degrade a node")
    window: float = Field(1800.0, gt=0, description="Seconds over which bad observations are counted")
    recover_after: float = Field(3600.0, alias="recoverAfter", ge=0,
                                 description="Seconds without a bad observation before a degraded node is healthy")
    max_isolated_fraction: float = Field(0.1, alias="maxIsolatedFraction", ge=0, le=1,
                                         description="The brake: never more than this share of the nodes (or of a "
                                                     "level's domains) isolated; past it nothing new is isolated")
    uplink_loss: float = Field(0.5, alias="uplinkLoss", gt=0, le=1,
                               description="A leaf that lost this share of the uplinks its peers have takes every "
                                           "node behind it")
    domains: list[DomainRuleConfig] = Field(default_factory=list, description="Per-level quarantine rules")
    counters: dict[str, int] = Field(default_factory=lambda: dict(COUNTERS),
                                     description="Port error counter -> the increase per window that is bad")
    conditions: list[ConditionConfig] = Field(default_factory=list)
    agent: bool = Field(True, description="Read the port records the agents publish (topolabel agent --ib-health)")
    fabric: str | None = Field(None, description="The published fabric to read (the collector's; `*`: the only "
                                                 "one); default: the infiniband source's, if it reads one")
    fabric_namespace: str | None = Field(None, alias="fabricNamespace",
                                         description="Where the collector publishes (default: the source's)")
    taint: TaintConfig | None = None

    @field_validator("counters")
    @classmethod
    def _known_counters(cls, value: dict[str, int]) -> dict[str, int]:
        for name, limit in value.items():
            if name not in COUNTERS:
                raise ValueError(f"unknown counter {name!r}" + did_you_mean(name, COUNTERS))
            if limit < 1:
                raise ValueError(f"{name}: the increase that is bad must be at least 1")
        return value

    def issues(self, loc: Loc) -> list[Issue]:
        return [Issue((*loc, "domains", i), "give `nodes`, `fraction` or both")
                for i, rule in enumerate(self.domains) if rule.nodes is None and rule.fraction is None]


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
    export: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Options of `topolabel export` per output format (docs/exports.md): the "
                                          "same names as its flags; the operator does not use them")
    health: HealthConfig = Field(default_factory=HealthConfig)

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

    def level_key(self, level: str) -> str:
        """The label key of a level given by name (or given as a key already: it holds a '/')."""
        return level if "/" in level else self.label_overrides().get(level) or self.key_prefix + level

    def health_policy(self) -> Policy:
        h = self.health
        return Policy(h.degrade_after, h.window, h.recover_after, h.max_isolated_fraction,
                      tuple(DomainRule(r.level, self.level_key(r.level), r.nodes, r.fraction) for r in h.domains))


OptionModels = Mapping[str, type[BaseModel]]  # source type or output format -> the model of its options


def load_config(path: str | Path | None, sources: OptionModels | None = None,
                exporters: OptionModels | None = None) -> Config:
    """The config at `path` (defaults when None), with errors naming the file and every bad key."""
    if path is None:
        return Config()
    data = read_document(path) or {}
    return parse_config(data, str(path), sources, exporters)


def parse_config(data: Any, origin: str, sources: OptionModels | None = None,
                 exporters: OptionModels | None = None) -> Config:
    """A valid config, or an `InputError` listing every problem at its path. With `sources` and `exporters`
    (the option models of each source type and output format), their sections' options are checked too."""
    cfg, found = config_issues(data, sources, exporters)
    if cfg is None or found:
        raise InputError(f"{origin}: {one_line(found)}")
    return cfg


def config_issues(data: Any, sources: OptionModels | None = None,
                  exporters: OptionModels | None = None) -> tuple[Config | None, list[Issue]]:
    """Every problem in a config document at once: the shape, the source's and exports' options,
    cross-references."""
    cfg, found = model_issues(Config, data)
    if sources is not None and isinstance(data, Mapping) and isinstance(data.get("source"), Mapping):
        found += source_issues(data["source"], sources)
    if exporters is not None and isinstance(data, Mapping) and isinstance(data.get("export"), Mapping):
        found += export_issues(data["export"], exporters)
    if cfg is not None:
        found += cfg.kueue.issues(cfg.pools.resources, ("kueue",))
        found += cfg.health.issues(("health",))
    found.sort(key=lambda i: file_order(data, i.loc))
    return (None if found else cfg), found


def source_issues(section: Mapping[str, Any], sources: OptionModels) -> list[Issue]:
    """The `source` section's options checked against its type's model, at paths under `source`."""
    kind = section.get("type")
    if not isinstance(kind, str):
        return []  # the model already reports a missing or non-string type
    if kind not in sources:
        return [Issue(("source", "type"), f"unknown source {kind!r}" + did_you_mean(kind, sources))]
    return options_issues(sources[kind], {k: v for k, v in section.items() if k != "type"}, ("source",))


def export_issues(section: Mapping[str, Any], exporters: OptionModels) -> list[Issue]:
    """Each output format's options in the `export` section checked against its model, at paths under
    `export.<name>`; only the formats named are looked up (`exporters` may load each model when asked)."""
    found = []
    for name, options in section.items():
        if name not in exporters:
            found.append(Issue(("export", name), "unknown output format" + did_you_mean(str(name), exporters)))
        elif isinstance(options, Mapping):
            found += options_issues(exporters[name], options, ("export", name), own=())
    return found


def options_issues(model: type[BaseModel], options: Mapping[str, Any], prefix: Loc,
                   own: tuple[str, ...] = ("type",)) -> list[Issue]:
    """A source's options, as a config writes them (camelCase), checked against its model, at paths under
    `prefix`; `own` are the other keys allowed beside them (suggested for a typo too)."""
    written = {snake(k): k for k in options}
    _, found = model_issues(model, {snake(k): v for k, v in options.items()}, prefix, written)
    known = [*own, *(camel(name) for name in model.model_fields)]
    return [Issue(i.loc, "unknown key" + did_you_mean(str(i.loc[-1]), known))
            if i.message.startswith("unknown key") and len(i.loc) == len(prefix) + 1 else i for i in found]


def validation_details(exc: ValidationError, model: type[BaseModel]) -> str:
    """Pydantic's errors on one line, each at its path (a problem of the whole input: its message alone)."""
    found = issues(exc, model.model_json_schema(by_alias=True))
    return "; ".join(str(i) if i.loc else i.message for i in found)
