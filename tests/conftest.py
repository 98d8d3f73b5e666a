"""Shared test fixtures: paths to the project's examples and to the reference data in ../shared."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

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


def skip_or_fail(reason: str) -> NoReturn:
    """Skip a test that needs something set-up did not provide; in CI (CI=true) fail instead, so a broken
    set-up cannot pass as skipped tests."""
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)
