"""Run options (flags of `topolabel run`) and the topolabel config the operator works with.

The config comes from the TopologyLabeler custom resource's `spec` when that exists, else from `--config`;
source flags override either, exactly as for `topolabel discover`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from labeler.cluster.timeouts import Timeouts
from labeler.settings.config import Config
from providers.base import Source

from ..pipeline import parse_spec, read_config, source_options

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True)
class RunOptions:
    kubeconfig: str | None = None
    context: str | None = None
    config_path: str | None = None
    flags: Mapping[str, Any] = field(default_factory=dict)
    name: str = "default"  # the TopologyLabeler this operator reads
    namespace: str = "default"  # where its leader-election Lease is
    resync: float = 300.0
    source_timeout: float = 120.0
    debounce: float = 0.5
    http_host: str = "0.0.0.0"
    http_port: int = 8080
    timeouts: Timeouts = Timeouts()
    leader_election: bool = False  # hold the Lease `topolabel-operator` in `namespace` before working
    capacity_metrics: bool = False  # export free capacity per flavor and level (needs `list pods`)


@dataclass(frozen=True)
class Settings:
    cfg: Config
    source: Source
    options: dict[str, Any]
    origin: str


def resolve(opts: RunOptions, spec: Mapping[str, Any] | None) -> Settings:
    """Settings from the resource's spec (or the config file when there is none) and the flags.

    Raises `InputError` for a bad config and `SourceError` for a bad or missing source.
    """
    if spec is not None:
        origin = f"TopologyLabeler {opts.name}"
        cfg = parse_spec(dict(spec), origin)
    else:
        origin = opts.config_path or "flags"
        cfg = read_config(opts.config_path)
    source, options = source_options(cfg, opts.flags)
    return Settings(cfg, source, options, origin)


def operator_namespace() -> str:
    """The namespace the operator runs in: $POD_NAMESPACE, the service account's, else `default`."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"
