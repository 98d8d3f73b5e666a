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
      clusterQueue: gpu
      localQueues: [{name: gpu, namespaces: [team-a]}]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .documents import read_document
from .errors import InputError
from .placement import DEFAULT_PREFIX


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class LevelConfig(_Model):
    name: str
    label: str | None = None


class SourceConfig(BaseModel):
    """`type` picks the source; every other key is that source's option (checked by the source)."""

    model_config = ConfigDict(extra="allow")
    type: str

    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class PlanConfig(_Model):
    max_change_fraction: float = Field(0.25, alias="maxChangeFraction", ge=0, le=1)


class ApplyConfig(_Model):
    concurrency: int = Field(16, ge=1, le=256)
    retries: int = Field(5, ge=0, le=20)


class PoolConfig(_Model):
    label: str = "nvidia.com/gpu.product"
    fallback_labels: list[str] = Field(default_factory=lambda: ["node.kubernetes.io/instance-type"],
                                       alias="fallbackLabels")
    resources: list[str] = Field(default_factory=lambda: ["cpu", "memory", "nvidia.com/gpu"])
    taint_keys: list[str] = Field(
        default_factory=lambda: ["nvidia.com/gpu", "amd.com/gpu", "aws.amazon.com/neuron", "google.com/tpu"],
        alias="taintKeys")


class LocalQueueConfig(_Model):
    name: str
    namespaces: list[str]


class KueueConfig(_Model):
    topology_name: str = Field("default", alias="topologyName")
    hostname_level: bool = Field(True, alias="hostnameLevel")
    cluster_queue: str = Field("gpu", alias="clusterQueue")
    cohort: str | None = None
    local_queues: list[LocalQueueConfig] = Field(default_factory=list, alias="localQueues")


class Config(_Model):
    key_prefix: str = Field(DEFAULT_PREFIX, alias="keyPrefix")
    levels: list[LevelConfig] = Field(default_factory=list)
    source: SourceConfig | None = None
    plan: PlanConfig = Field(default_factory=PlanConfig)
    apply: ApplyConfig = Field(default_factory=ApplyConfig)
    pools: PoolConfig = Field(default_factory=PoolConfig)
    kueue: KueueConfig = Field(default_factory=KueueConfig)

    @field_validator("key_prefix")
    @classmethod
    def _prefix_ends_with_slash(cls, value: str) -> str:
        if value and not value.endswith("/"):
            raise ValueError("must end with '/', e.g. 'topolabel.dev/'")
        return value

    def label_overrides(self) -> dict[str, str]:
        return {lv.name: lv.label for lv in self.levels if lv.label}


def load_config(path: str | Path | None) -> Config:
    """The config at `path` (defaults when None), with errors naming the file and the key."""
    if path is None:
        return Config()
    data = read_document(path) or {}
    return parse_config(data, str(path))


def parse_config(data: Any, origin: str) -> Config:
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"{origin}: {validation_details(exc, '(top)')}") from None


def validation_details(exc: ValidationError, top: str) -> str:
    """Pydantic's errors on one line, each as `dotted.key: message` (`top` when the whole input is wrong)."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or top}: {e['msg']}" for e in exc.errors())
