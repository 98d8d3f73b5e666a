"""Shared fixtures (the bundled example's files) and the hook that makes a skip under CI=true a failure. The
paths and the skip-or-fail rule themselves live in testkit.environment, for the harnesses too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from testkit.environment import EXAMPLES, in_ci


@pytest.fixture
def example_nodes_file() -> Path:
    return EXAMPLES / "nodes.yaml"


@pytest.fixture
def example_config_file() -> Path:
    return EXAMPLES / "topolabel.yaml"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """In CI every skip is a failure, whatever skipped (a marker, a fixture, a missing tool): .ci/run installs
    everything the tests use, so a skip there means the set-up is broken, and must not pass as green."""
    outcome = yield
    report = outcome.get_result()
    if in_ci() and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"CI=true, and .ci/run installs what every test needs, yet this test skipped: {reason}"
