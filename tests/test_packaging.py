"""`python -m build` makes an sdist and a wheel; the wheel installs into a clean venv (dependencies from
the package index or pip's cache, pinned by .ci/constraints.txt) where both console scripts run; and krew
installs the plugin manifest (plugins/krew) with its archive, after which `kubectl topolabel` runs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

from hack import image, krew
from hack.image import CACHE, project_version
from testkit.environment import EXAMPLES, NOT_SOURCES, ROOT, skip_or_fail


def test_krew_manifest_matches_the_archive_and_the_project() -> None:
    manifest = yaml.safe_load(krew.MANIFEST.read_text())
    assert manifest["metadata"]["name"] == krew.MANIFEST.stem == "topolabel"
    assert manifest["spec"]["homepage"] == krew.project()["urls"]["Source"]
    [platform] = manifest["spec"]["platforms"]
    assert {k: platform[k] for k in ("uri", "sha256")} | {"version": manifest["spec"]["version"]} == krew.expected(), \
        "run python3 hack/krew.py manifest"
    assert platform["bin"] in krew.FILES


def test_image_build_context_is_what_pip_installs() -> None:
    """.dockerignore lets in every package pyproject.toml installs, and nothing tests or tools write."""
    packages = [p.rstrip("*") for p in tomllib.loads((ROOT / "pyproject.toml").read_text())
                ["tool"]["setuptools"]["packages"]["find"]["include"]]
    context = {f.as_posix() for f in image.context_files()}
    assert {f.split("/")[0] for f in context} == {*packages, "pyproject.toml", "README.md", ".ci"}
    for package in packages:
        assert {f for f in context if f.startswith(f"{package}/") and f.endswith(".py")} == \
            {p.relative_to(ROOT).as_posix() for p in (ROOT / package).rglob("*.py")}, package
    assert ".ci/constraints.txt" in context and not [f for f in context if "__pycache__" in f]


def tool(name: str) -> str:
    """A program hack/build-tool built (or one on PATH)."""
    found = CACHE / "bin" / name
    if found.exists():
        return str(found)
    if not shutil.which(name):
        skip_or_fail(f"no {name}: run hack/build-tool {name}")
    return str(shutil.which(name))


@pytest.mark.slow
def test_wheel_installs_into_a_clean_venv_and_runs(tmp_path: Path) -> None:
    source, dist = tmp_path / "src", tmp_path / "dist"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCES, symlinks=True)
    built = subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist), str(source)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    version = project_version()
    sdist, wheel = dist / f"topolabel-{version}.tar.gz", dist / f"topolabel-{version}-py3-none-any.whl"
    assert sorted(p.name for p in dist.iterdir()) == sorted([sdist.name, wheel.name])

    with tarfile.open(sdist) as archive:
        names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    assert {"pyproject.toml", "README.md", "topolabel/cli.py", "labeler/settings/config.py"} <= names
    with zipfile.ZipFile(wheel) as archive:
        files = archive.namelist()
        entry_points = archive.read(f"topolabel-{version}.dist-info/entry_points.txt").decode()
    assert not [f for f in files if f.startswith(("tests/", "testkit/", "hack/", "bench/", "charts/"))]
    packages = ("topolabel", "labeler", "providers", "kueue_config", "exporters")
    assert {f"{package}/py.typed" for package in packages} <= set(files)  # PEP 561: a type checker reads them
    assert "topolabel = " in entry_points and "kubectl-topolabel = " in entry_points

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    installed = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "--no-compile", "--constraint",
                                str(ROOT / ".ci" / "constraints.txt"), str(wheel)],
                               capture_output=True, text=True, timeout=900)
    assert installed.returncode == 0, installed.stderr[-3000:]

    def in_venv(*args: str) -> subprocess.CompletedProcess[str]:
        # from an empty directory, with no PYTHONPATH: only what the wheel installed can be imported
        return subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                              env={"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)})

    assert in_venv("topolabel", "--help").stdout.startswith("usage: topolabel")
    assert in_venv("kubectl-topolabel", "--help").returncode == 0
    discovered = in_venv("topolabel", "discover", "--config", str(EXAMPLES / "topolabel.yaml"),
                         "--nodes", str(EXAMPLES / "nodes.yaml"), "-o", "json")
    assert discovered.returncode == 0, discovered.stderr
    assert len(json.loads(discovered.stdout)["nodes"]) == 64

    # krew installs the manifest with the archive built from this tree (checking its sha256), and kubectl
    # finds the plugin; the wheel's own kubectl-topolabel is removed so that only krew's can answer
    archive = Path(subprocess.run([sys.executable, str(ROOT / "hack" / "krew.py"), "archive", str(tmp_path)],
                                  capture_output=True, text=True, check=True).stdout.strip())
    krew_root = tmp_path / "krew"
    env = {"PATH": f"{krew_root / 'bin'}:{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path),
           "KREW_ROOT": str(krew_root)}
    installed = subprocess.run([tool("krew"), "install", f"--manifest={krew.MANIFEST}", f"--archive={archive}"],
                               capture_output=True, text=True, timeout=120, env=env)
    assert installed.returncode == 0, installed.stderr
    (venv / "bin" / "kubectl-topolabel").unlink()
    plugin = subprocess.run([tool("kubectl"), "topolabel", "--help"], capture_output=True, text=True, timeout=120,
                            env=env, cwd=tmp_path)
    assert plugin.stdout.startswith("usage: topolabel"), plugin.stderr
