"""The output contract: what an exporter is and what it produces.

An exporter module defines `EXPORTER = Exporter(...)`; `exporters.registry` finds it by name, and
`topolabel export` adds one subcommand per exporter. An exporter is pure: a snapshot and options in, text
or Kubernetes objects out. The command decides where the result goes (stdout, a directory).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from labeler.config import Config
from labeler.model import Problem, Snapshot
from labeler.nodes import Node


@dataclass
class Export:
    """An exporter's result: a text file (Slurm) or Kubernetes objects (Volcano, KAI, NFD, Slinky), and problems
    met; `annotations` are node annotations the export wants written (node -> key -> value; Slinky's dynamic
    topology), which the command writes only when asked to."""

    text: str = ""
    objects: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    annotations: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Exporter:
    """One output format. `objects`: it produces Kubernetes objects, which may also go to a directory.

    `add_arguments` adds its flags; `export` gets the snapshot, the config, the parsed flags by dest name, and
    the cluster's nodes when the command was given them (`--nodes`, `--kubeconfig`), else none. `annotates`:
    its result may hold node annotations (the command then offers `--annotate-nodes`).
    """

    name: str
    help: str
    objects: bool
    add_arguments: Callable[[argparse.ArgumentParser], None]
    export: Callable[[Snapshot, Config, Mapping[str, Any], Sequence[Node]], Export]
    annotates: bool = False


def no_arguments(parser: argparse.ArgumentParser) -> None:
    """For exporters whose only options come from the config."""
