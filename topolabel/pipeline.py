"""The data flow shared by the CLI and the operator: source -> discovery -> snapshot -> plan / Kueue."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from labeler.errors import SourceError
from labeler.progress import Progress, quiet
from labeler.topology.model import Discovery, Level, Snapshot
from labeler.topology.names import snake
from labeler.topology.placement import level_keys, to_snapshot, written_values
from providers.base import Source, SourceContext
from providers.registry import get_source, option_models

if TYPE_CHECKING:  # the config's pydantic models load only when a config is read (start-up)
    from labeler.io.nodes import Node
    from labeler.settings.config import Config


def read_config(path: str | None) -> Config:
    """topolabel.yaml (defaults when None), every problem reported at once, the source's and the exports'
    options included."""
    from exporters.registry import option_models as export_models
    from labeler.settings.config import load_config

    return load_config(path, option_models(), export_models())


def parse_spec(data: Any, origin: str) -> Config:
    """A config given as data (a TopologyLabeler's spec), checked like `read_config`."""
    from exporters.registry import option_models as export_models
    from labeler.settings.config import parse_config

    return parse_config(data, origin, option_models(), export_models())


def source_options(cfg: Config | None, flags: Mapping[str, Any]) -> tuple[Source, dict[str, Any]]:
    """The source and its options: the config's `source` section, overridden by flags given (`cfg` None: no
    config, only flags)."""
    section = cfg.source if cfg else None
    options = {snake(k): v for k, v in (section.options() if section else {}).items()}
    name = flags.get("source") or (section.type if section else None)
    if not name:
        raise SourceError("no source: give --source or a 'source' section in the config")
    source = get_source(name)
    if section and name != section.type:
        options = {}  # the config's options belong to another source
    for key in source.option_names():  # a source's flags are named as its options
        if flags.get(key) is not None:
            options[key] = flags[key]
    return source, options


def discover(cfg: Config | None, source: Source, options: Mapping[str, Any], nodes: Sequence[Node],
             origin: str = "source", cluster: Callable[[], Any] | None = None,
             progress: Progress = quiet) -> Snapshot:
    """The snapshot from the source's discovery. The node records are let go before the snapshot is made
    (only what topolabel wrote on them is kept): when the caller holds no other reference to `nodes`, their
    memory is free again by then (1,000,000 nodes: 700 MB of 1,200 at the peak)."""
    found = run_source(source, options, nodes, origin, cluster, progress)
    levels = levels_of(cfg, found)
    written = written_values(levels, nodes)
    del nodes
    return to_snapshot(found, levels, written)


def run_source(source: Source, options: Mapping[str, Any], nodes: Sequence[Node], origin: str = "source",
               cluster: Callable[[], Any] | None = None, progress: Progress = quiet) -> Discovery:
    """The source's raw answer; the operator keeps it to merge per-node answers into the last good one.
    `cluster` gives an API client to sources that read more than Nodes (the published InfiniBand fabric)."""
    return source.discover(SourceContext(nodes=nodes, options=options, origin=origin, cluster=cluster,
                                         progress=progress))


def place(cfg: Config | None, found: Discovery, nodes: Sequence[Node] = ()) -> Snapshot:
    """The validated snapshot of label values (existing domains of `nodes` keep the values they carry)."""
    levels = levels_of(cfg, found)
    return to_snapshot(found, levels, written_values(levels, nodes))


def levels_of(cfg: Config | None, found: Discovery) -> tuple[Level, ...]:
    """Label keys from the config (None: the default keys) for the levels found."""
    return level_keys(found.level_names, cfg.key_prefix, cfg.label_overrides()) if cfg else \
        level_keys(found.level_names)


def read_snapshot(path: str) -> Snapshot:
    """A snapshot file, checked like discovery output (it is untrusted input); its decoder, msgspec, loads
    only here (start-up time)."""
    from labeler.topology.snapshotfile import read_snapshot as read

    return read(path)
