"""Where the checkout, its examples, ../shared and Kueue's CRDs are, and what a missing one means: a skip on a
developer's machine, a failure under CI=true."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NoReturn

import pytest

from hack.testcluster import kueue_crd_dir

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
EXAMPLES = ROOT / "examples"
# What a checkout holds beside the sources; left out of a copy a build runs in (the wheel test, bench's installed
# topolabel), so the build writes its egg-info and build/ there rather than in the working tree, whose stale
# build/lib would otherwise go into the next wheel built from it.
NOT_SOURCES = shutil.ignore_patterns(".git", ".venv", "out", "build", "dist", "*.egg-info", "__pycache__",
                                     ".pytest_cache")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1")


def skip_or_fail(reason: str) -> NoReturn:
    """Skip a test that needs something set-up did not provide; in CI (CI=true) fail instead, so a broken
    set-up cannot pass as skipped tests."""
    if in_ci():
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


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
