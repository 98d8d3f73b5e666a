"""Every build script, run from an empty cache as on a fresh machine, with a stand-in `go` (testkit/standin_go.py)
that writes programs under the names real `go build` gives them: every link the scripts make must resolve to an
executable, and every program the tests look for must be found where they look. A script that wrote its
binaries under other names than it linked passed CI on every machine with an older cache, and failed on every
new one; this runs in seconds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.environment import ROOT

HACK = ROOT / "hack"
SCRIPTS = (("build-tool", "helm", "krew"), ("build-test-stack",), ("build-tas-oracle",))


@pytest.fixture
def fresh(tmp_path: Path) -> dict[str, str]:
    """An environment with empty caches and the stand-in `go` first on PATH."""
    bin_dir = tmp_path / "path"
    bin_dir.mkdir()
    go = bin_dir / "go"
    go.write_text(f"#!/bin/sh\nexec {sys.executable} {ROOT / 'testkit' / 'standin_go.py'} \"$@\"\n")
    go.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "TOPOLABEL_CACHE": str(tmp_path / "cache"),
            "GOMODCACHE": str(tmp_path / "mod"), "HOME": str(tmp_path / "home")}


def build_all(env: dict[str, str]) -> None:
    for script, *args in SCRIPTS:
        done = subprocess.run([str(HACK / script), *args], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{script}: {done.stderr}"


def links(cache: Path) -> list[Path]:
    return sorted(p for folder in ("bin", "stack") for p in (cache / folder).iterdir())


def test_every_link_a_build_script_makes_resolves(fresh: dict[str, str]) -> None:
    build_all(fresh)
    cache = Path(fresh["TOPOLABEL_CACHE"])
    made = links(cache)
    assert {p.name for p in made} >= {"helm", "krew", "etcd", "kube-apiserver", "kube-controller-manager",
                                      "kube-scheduler", "kubectl", "kueue", "kueue-module", "jobset", "jobset-module",
                                      "kwok", "kwok-module"}
    for link in made:
        assert link.is_symlink() and link.exists(), f"{link} -> {os.readlink(link)} does not resolve"
        target = link.resolve()
        assert target.is_dir() if link.name.endswith("-module") else os.access(target, os.X_OK), target
    assert not list(cache.glob(".*-build.*")), "a scratch directory was left behind"


def test_what_the_tests_look_for_is_where_the_scripts_put_it(fresh: dict[str, str]) -> None:
    """The consumers' side: the cluster harness, the oracle's finder, helm's and krew's paths, with the cache the
    scripts filled (each reads TOPOLABEL_CACHE when it is imported, so in a process of its own)."""
    build_all(fresh)
    probe = """
import json
from hack import image, testcluster
from testkit import tas_oracle
found = testcluster.find_binaries()
print(json.dumps({"stack": found and {k: v for k, v in vars(found).items()}, "oracle": str(tas_oracle.oracle()),
                  "tools": {t: (image.CACHE / "bin" / t).exists() for t in ("helm", "krew")}}))
"""
    done = subprocess.run([sys.executable, "-c", probe], env=fresh, cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["stack"] and all(seen["stack"].values()), seen["stack"]
    assert Path(seen["oracle"]).is_file()
    assert seen["tools"] == {"helm": True, "krew": True}


def test_a_second_run_builds_nothing(fresh: dict[str, str]) -> None:
    build_all(fresh)
    for script, *args in SCRIPTS:
        done = subprocess.run([str(HACK / script), *args], env=fresh, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "building" not in done.stderr, (script, done.stderr)
