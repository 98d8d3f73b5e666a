"""The Slurm export's options: the config's `export.slurm` section and the flags of `topolabel export slurm`
(the same names; camelCase in the file). `exporters.slurm.slurm_options` turns them into its `SlurmOptions`.
`SlurmLayout` is what every export writing Slurm's topology takes (`slinky` too)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..base import Options


class SlurmTopology(Options):
    """One named topology of topology.yaml (`--format yaml`); checked by the exporter."""

    name: str
    plugin: Literal["tree", "block", "flat"] = "tree"
    node_selector: dict[str, str] = Field(default_factory=dict, alias="nodeSelector")
    cluster_default: bool = Field(False, alias="clusterDefault")
    block_level: str | None = Field(None, alias="blockLevel")
    block_sizes: list[int] = Field(default_factory=list, alias="blockSizes")


class SlurmLayout(Options):
    """How Slurm's topology is laid out: node names, blocks, the root switch, trimmed levels, named topologies."""

    block_level: str | None = Field(None, description="The level whose domains are blocks (default: the coarsest "
                                                      "with more than one domain)")
    block_sizes: list[int] = Field(default_factory=list, description="BlockSizes (default: the smallest block's node "
                                                                     "count, doubled up to the block count)")
    slurm_name: str | None = Field(None, description="REGEX=REPL: rewrite node names into Slurm NodeNames")
    strip_domain: bool = Field(False, description="Cut node names at the first '.' (after slurmName)")
    root_switch: str = Field("root", description="The switch joining the coarsest domains in a tree")
    no_root_switch: bool = Field(False, description="No joining switch: Slurm never spans a job across them")
    yaml_default: Literal["tree", "block"] = Field("tree", description="The cluster default in topology.yaml")
    trim_tiers: int = Field(0, description="Drop this many coarsest levels first, as Topograph's trimTiers")
    no_topology: bool = Field(False, description="Nodes without topology under a switch 'no-topology' (tree only)")
    topologies: list[SlurmTopology] = Field(default_factory=list, description="topology.yaml's named topologies, "
                                                                             "each over the nodes it selects")


class SlurmExportOptions(SlurmLayout):
    """topology.conf for topology/tree or topology/block, or topology.yaml (docs/exports.md)."""

    format: Literal["tree", "block", "yaml"] = "tree"
