"""Shared test fixtures: paths to the project's examples, to the reference data in ../shared and to Kueue's
CRDs in the Go module cache."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NoReturn

import pytest

from hack.testcluster import kueue_crd_dir

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
EXAMPLES = ROOT / "examples"


@pytest.fixture
def example_nodes_file() -> Path:
    return EXAMPLES / "nodes.yaml"


@pytest.fixture
def example_config_file() -> Path:
    return EXAMPLES / "topolabel.yaml"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1")


def skip_or_fail(reason: str) -> NoReturn:
    """Skip a test that needs something set-up did not provide; in CI (CI=true) fail instead, so a broken
    set-up cannot pass as skipped tests."""
    if in_ci():
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


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


def kueue_crds() -> Path:
    """Kueue v0.19.2's CRDs as released (config/components/crd/bases in its Go module, which
    hack/build-test-stack links), not copies."""
    crds = kueue_crd_dir()
    if crds is None:
        skip_or_fail("Kueue's module is not linked in the test stack: run hack/build-test-stack kueue")
    return crds


def kueue_crd(plural: str) -> Path:
    """Kueue's CRD for `plural`, e.g. "topologies"."""
    return kueue_crds() / f"kueue.x-k8s.io_{plural}.yaml"
