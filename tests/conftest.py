"""Shared test fixtures: paths to the project's examples and to the reference data in ../shared."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
EXAMPLES = ROOT / "examples"


@pytest.fixture
def example_nodes_file() -> Path:
    return EXAMPLES / "nodes.yaml"


@pytest.fixture
def example_config_file() -> Path:
    return EXAMPLES / "topolabel.yaml"


def missing_tool(reason: str) -> None:
    """Skip a test whose tool is missing, except in CI (CI=true), where that is a failure."""
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)
