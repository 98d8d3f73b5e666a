"""The helm binary hack/build-tool made (.ci/setup.d/30-tools.sh), as a session fixture: `helm(*args)` runs it
with config and cache directories of its own and fails the test with helm's stderr unless `check=False`."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any, Iterator

import pytest

from hack.image import CACHE
from testkit.environment import skip_or_fail


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A function running the helm binary hack/build-tool made, with its own config and cache dirs."""
    found = os.environ.get("TOPOLABEL_HELM") or (str(CACHE / "bin" / "helm") if (CACHE / "bin" / "helm").exists()
                                                 else shutil.which("helm"))
    if not found:
        skip_or_fail("no helm: run hack/build-tool helm (about 5 minutes once; cached in ~/.cache/topolabel)")
    home = tmp_path_factory.mktemp("helm")
    env = {**os.environ, **{f"HELM_{k}_HOME": str(home / k.lower()) for k in ("CONFIG", "CACHE", "DATA")}}

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([found, *args], capture_output=True, text=True, env=env, timeout=300)
        if check and result.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result
    yield run
