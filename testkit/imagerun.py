"""Running the topolabel image in tests: built by hack/image.py (buildah, vfs storage), run by podman.

`image` (session fixture) is an `Image` for this tree, built first when missing; in CI (CI=true) the set-up
step (.ci/setup.d/40-image.sh) has built it, and a missing one fails. Without buildah, podman, runc or
debootstrap it skips, except in CI, where it fails.

Containers run from a copy of the image in an overlay store when the kernel has overlayfs: with vfs every
container starts with a full copy of the image's 480 MB (half a minute on a busy 2-core machine), with
overlay in about a second. Podman's defaults do not work on these machines: the OCI runtime may not raise
the limits podman asks for (1,048,576 open files and processes; even the shell's own 96,365 processes are
refused) and crun does not handle their hybrid cgroup hierarchy. So containers run with runc, the cgroupfs
manager and LIMITS, which are below any host's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hack import image as builder
from testkit.environment import skip_or_fail

TOOLS = ("buildah", "podman", "runc", "debootstrap")
# What a pod with readOnlyRootFilesystem and an emptyDir at /tmp gets (manifests/deployment.yaml).
READ_ONLY = ("--read-only", "--read-only-tmpfs=false", "--tmpfs", "/tmp")
LIMITS = ("nofile=1024:4096", "nproc=4096:4096")
RUN_STORE = ("--root", str(builder.CACHE / "containers-run"), "--runroot", "/run/topolabel-containers-run",
             "--storage-driver", "overlay")


@dataclass(frozen=True)
class Image:
    """The built image, and the storage podman runs it from."""

    ref: str
    storage: tuple[str, ...]

    def podman(self, *args: str) -> list[str]:
        return ["podman", *self.storage, "--runtime", "runc", "--cgroup-manager", "cgroupfs", *args]

    def run(self, *args: str, options: Sequence[str] = (), timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """`podman run` with `args` after the entry point (or after --entrypoint X in `options`)."""
        return subprocess.run(self.podman("run", *run_options(), *options, self.ref, *args), capture_output=True,
                              text=True, timeout=timeout)

    @contextmanager
    def running(self, args: Sequence[str], options: Sequence[str], log: Path) -> Iterator[str]:
        """A container in the background (output to `log`); yields its name and removes it on exit."""
        name = f"topolabel-test-{uuid.uuid4().hex[:8]}"
        with open(log, "ab") as out:
            proc = subprocess.Popen(self.podman("run", *run_options(), "--name", name, *options, self.ref, *args),
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            yield name
        finally:
            subprocess.run(self.podman("rm", "--force", "--time", "5", name), capture_output=True, timeout=120)
            proc.wait(60)

    def inspect(self) -> dict[str, Any]:
        """`podman image inspect`: Config (User, Entrypoint, Env, Labels), Size."""
        result = subprocess.run(self.podman("image", "inspect", self.ref), capture_output=True, text=True, check=True)
        return json.loads(result.stdout)[0]


def run_options() -> list[str]:
    return ["--rm", *(a for limit in LIMITS for a in ("--ulimit", limit))]


@pytest.fixture(scope="session")
def image() -> Image:
    """This tree's image, built if needed (minutes) and shared by every test."""
    missing = [tool for tool in TOOLS if not shutil.which(tool)]
    if missing or os.geteuid() != 0:
        skip_or_fail(f"the image tests need root and {', '.join(missing) or 'nothing else'} "
                     "(apt-get install buildah podman runc debootstrap)")
    try:  # in CI the set-up step has built it: a build here would mean the context changed meanwhile
        ref = builder.build(allow_build=os.environ.get("CI", "").lower() not in ("true", "1"))
    except builder.ImageError as exc:
        pytest.fail(str(exc), pytrace=False)
    with builder.locked():
        return Image(ref, RUN_STORE) if copied_to_overlay(ref) else Image(ref, tuple(builder.storage_args()))


def copied_to_overlay(ref: str) -> bool:
    """Whether the overlay store holds this build of `ref` (copied now if not); False without overlayfs."""
    wanted = builder.image_id(ref)
    overlay = Image(ref, RUN_STORE)
    found = subprocess.run(overlay.podman("image", "inspect", "--format", "{{.Id}}", ref), capture_output=True,
                           text=True)
    if found.returncode == 0 and found.stdout.strip() == wanted:
        return True
    root, runroot = RUN_STORE[1], RUN_STORE[3]
    target = f"containers-storage:[overlay@{root}+{runroot}]{ref}"
    if builder.buildah("push", ref, target, check=False).returncode != 0:
        return False
    subprocess.run(overlay.podman("image", "prune", "--force"), capture_output=True)  # the previous build's
    return True
