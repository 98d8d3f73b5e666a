"""The output contract: what an exporter is and what it produces.

An exporter module defines `EXPORTER = Exporter(...)`; `exporters.registry` finds it by name, and
`topolabel export` adds one subcommand per exporter. An exporter is pure: a snapshot and options in, text
or Kubernetes objects out. The command decides where the result goes (stdout, a directory).

Its options are a pydantic model (an `Options`), as a source's are: the config's `export.<name>` section
(keys camelCase) overridden by the flags given (dest names = the model's fields), checked with the config
and shown in its schema, so the core never names an exporter.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Mapping, Sequence, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from labeler.errors import InputError
from labeler.io.nodes import Node
from labeler.settings.config import Config, validation_details
from labeler.topology.model import Problem, Snapshot
from labeler.topology.names import snake


class Options(BaseModel):
    """Base of an exporter's options: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class NoOptions(Options):
    """No options: the format reads only the snapshot and the config's other sections."""


OptionsT = TypeVar("OptionsT", bound=Options)


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
class Exporter(Generic[OptionsT]):
    """One output format. `objects`: it produces Kubernetes objects, which may also go to a directory.

    `options` is the model of its options (`NoOptions` for none); `add_arguments` adds its flags, named (dest)
    as `options`' fields and None when not given, so the config's value or the model's default stands; `export`
    gets the snapshot, the config, the options, and the cluster's nodes when the command was given them
    (`--nodes`, `--kubeconfig`), else none. `annotates`: its result may hold node annotations (the command then
    offers `--annotate-nodes`).
    """

    name: str
    help: str
    objects: bool
    add_arguments: Callable[[argparse.ArgumentParser], None]
    export: Callable[[Snapshot, Config, OptionsT, Sequence[Node]], Export]
    options: type[OptionsT]
    annotates: bool = False

    def read_options(self, cfg: Config, flags: Mapping[str, Any]) -> OptionsT:
        """The config's `export.<name>` section overridden by the flags given; a bad value is one line."""
        given = {snake(key): value for key, value in (cfg.export.get(self.name) or {}).items()}
        given.update({key: flags[key] for key in self.options.model_fields if flags.get(key) is not None})
        try:
            return self.options.model_validate(given)
        except ValidationError as exc:
            raise InputError(f"export {self.name}: {validation_details(exc, self.options)}") from None


def no_arguments(parser: argparse.ArgumentParser) -> None:
    """For exporters without flags (their options, if any, come from the config)."""
