"""The NVLink domain from nvidia-smi: parsed, published by the agent, read by the nvlink preset."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from labeler.errors import SourceError
from labeler.io.nodes import Node
from providers.base import SourceContext
from providers.gpu_clique import ANNOTATION, parse_cliques, read_clique
from providers.labels import discover

UUID = "8f0c3e1a-5b7d-4c2e-9a61-3d0b2f4e6c18"


def test_all_gpus_in_one_domain() -> None:
    text = "".join(f"{UUID}, 32766\n" for _ in range(4))
    assert parse_cliques(text) == f"{UUID}.32766"


@pytest.mark.parametrize("text", ["[N/A], [N/A]\n" * 8, "N/A, N/A\n", "00000000-0000-0000-0000-000000000000, 0\n", ""])
def test_systems_without_multi_node_nvlink(text: str) -> None:
    assert parse_cliques(text) is None


def test_gpus_that_disagree_are_an_error() -> None:
    with pytest.raises(SourceError, match="GPUs report different NVLink domains"):
        parse_cliques(f"{UUID}, 1\n{UUID}, 2\n")
    with pytest.raises(SourceError, match="line 1: expected 'clusterUuid, cliqueId'"):
        parse_cliques("garbage\n")


def test_read_clique_runs_the_tool(tmp_path: Path) -> None:
    """nvidia-smi needs a GPU, which this machine lacks: a script prints what the driver prints."""
    tool = tmp_path / "nvidia-smi"
    tool.write_text(f"#!/bin/sh\n[ \"$1\" = --query-gpu=fabric.clusterUuid,fabric.cliqueId ] || exit 9\n"
                    f"printf '{UUID}, 7\\n{UUID}, 7\\n'\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    assert read_clique(str(tool)) == f"{UUID}.7"
    with pytest.raises(SourceError, match="not found"):
        read_clique(str(tmp_path / "missing"))


def test_nvlink_preset_reads_the_label_or_the_agents_annotation() -> None:
    nodes = [Node("a", labels={"nvidia.com/gpu.clique": f"{UUID}.1"}),
             Node("b", annotations={ANNOTATION: f"{UUID}.1"}),
             Node("c", annotations={ANNOTATION: f"{UUID}.2"})]
    found = discover(SourceContext(nodes=nodes, options={"preset": "nvlink"}))
    assert found.paths == {"a": (f"{UUID}.1",), "b": (f"{UUID}.1",), "c": (f"{UUID}.2",)}
