"""Build the topolabel image with no registry: a Debian base made by debootstrap, then the root Dockerfile,
unchanged, built by buildah (vfs storage, chroot isolation). Both are cached under ~/.cache/topolabel.

    python3 hack/image.py build     # prints the image reference (localhost/topolabel:VERSION)
    python3 hack/image.py base      # only the base image the Dockerfile's FROM names

The base: `debootstrap --variant=minbase` of the suite, trimmed the way Debian's official -slim images are
(no docs, man pages or locales; apt lists and caches emptied; the official apt sources; policy-rc.d), kept
as a tarball keyed by the suite, the mirror and this recipe, remade after a week so security updates
arrive, and committed to buildah's storage under the name the Dockerfile's `ARG BASE` defaults to.

The image: rebuilt only when the Dockerfile, .dockerignore, a file of the build context or the base
changed (the key is a hash of them, kept as a tag `build-KEY`). pip inside the build gets the machine's
pip settings (`pip config list`, environment included, written to a pip.conf mounted at /etc/pip.conf),
the files they name, the CA bundle and the pip cache, as read-only or build-only mounts that never reach
the image.

Storage is $CACHE/containers with the vfs driver; podman reads the same with the same flags
(`storage_args()`). Only the standard library is used, so CI runs this before anything is installed.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import tomllib
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("TOPOLABEL_CACHE") or
             Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "topolabel")
STORE = CACHE / "containers"
WORK = CACHE / "image"
IMAGE = "localhost/topolabel"
BASE_TAG = "localhost/topolabel-base"
BUILD_LOG = WORK / "build.log"
SUITE = "bookworm"
MIRROR = os.environ.get("TOPOLABEL_DEBIAN_MIRROR", "http://deb.debian.org/debian")
SECURITY_MIRROR = os.environ.get("TOPOLABEL_DEBIAN_SECURITY_MIRROR", "http://deb.debian.org/debian-security")
BASE_MAX_AGE = 7 * 24 * 3600

# Written into the debootstrap tree, as in Debian's official slim images.
BASE_FILES = {
    "etc/apt/sources.list.d/debian.sources": (
        f"Types: deb\nURIs: {MIRROR}\nSuites: {SUITE} {SUITE}-updates\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
        f"Types: deb\nURIs: {SECURITY_MIRROR}\nSuites: {SUITE}-security\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"),
    "etc/dpkg/dpkg.cfg.d/slim": (
        "path-exclude=/usr/share/doc/*\npath-include=/usr/share/doc/*/copyright\npath-exclude=/usr/share/man/*\n"
        "path-exclude=/usr/share/info/*\npath-exclude=/usr/share/locale/*\npath-exclude=/usr/share/lintian/*\n"),
    "etc/apt/apt.conf.d/slim": 'Acquire::Languages "none";\nAPT::Keep-Downloaded-Packages "false";\n',
    "usr/sbin/policy-rc.d": "#!/bin/sh\n# no service starts inside an image build\nexit 101\n",
}
# Emptied after debootstrap: what the excludes above would have kept out, and apt's lists and caches.
BASE_TRIM = ["usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "var/lib/apt/lists",
             "var/cache/apt", "var/log", "dev", "run", "tmp"]


class ImageError(RuntimeError):
    """A build step failed; the message names the step and ends with its output."""


def log(message: str) -> None:
    print(f"image: {message}", file=sys.stderr, flush=True)


def storage_args() -> list[str]:
    """Global flags that make buildah and podman use this storage."""
    return ["--root", str(STORE), "--storage-driver", "vfs"]


def buildah(*args: str, check: bool = True, capture: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["buildah", *storage_args(), *args], text=True,
                            stdout=subprocess.PIPE if capture else None, stderr=subprocess.STDOUT)
    if check and result.returncode != 0:
        raise ImageError(f"buildah {' '.join(args[:2])} failed ({result.returncode}):\n{result.stdout or ''}")
    return result


def image_exists(ref: str) -> bool:
    return buildah("inspect", "--type", "image", "--format", "{{.FromImageID}}", ref, check=False).returncode == 0


def image_id(ref: str) -> str:
    return buildah("inspect", "--type", "image", "--format", "{{.FromImageID}}", ref).stdout.strip()


def project_version(root: Path = ROOT) -> str:
    return tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]


def project_source(root: Path = ROOT) -> str:
    return tomllib.loads((root / "pyproject.toml").read_text())["project"]["urls"]["Source"]


def dockerfile_base(root: Path = ROOT) -> str:
    """The fully qualified name the Dockerfile's `ARG BASE=` default means (short names are Docker Hub's)."""
    match = re.search(r"^ARG BASE=(\S+)", (root / "Dockerfile").read_text(), re.M)
    if not match:
        raise ImageError(f"{root / 'Dockerfile'}: no `ARG BASE=...` line")
    name = match.group(1)
    first = name.split("/")[0]
    if "/" not in name:
        return f"docker.io/library/{name}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"docker.io/{name}"
    return name


def digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "big") + data)
    return h.hexdigest()[:12]


@contextmanager
def locked() -> Iterator[None]:
    """One build at a time per cache (pytest-xdist workers and CI share it)."""
    WORK.mkdir(parents=True, exist_ok=True)
    with open(WORK / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def base_key() -> str:
    return digest(SUITE, MIRROR, repr(sorted(BASE_FILES.items())), repr(BASE_TRIM))


def base_tarball() -> Path:
    """The trimmed debootstrap tree as a tarball, made when missing or older than a week."""
    tarball = WORK / f"debian-{SUITE}-{base_key()}.tar"
    if tarball.exists() and time.time() - tarball.stat().st_mtime < BASE_MAX_AGE:
        return tarball
    if not shutil.which("debootstrap"):
        raise ImageError("debootstrap not found (apt-get install debootstrap)")
    started = time.monotonic()
    tree = Path(tempfile.mkdtemp(prefix=".rootfs-", dir=WORK))
    try:
        result = subprocess.run(["debootstrap", "--variant=minbase", SUITE, str(tree), MIRROR],
                                text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if result.returncode != 0:
            raise ImageError(f"debootstrap {SUITE} failed:\n{result.stdout[-3000:]}")
        for path in BASE_TRIM:
            for child in (tree / path).glob("*"):
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        (tree / "etc/apt/sources.list").unlink(missing_ok=True)
        for path, text in BASE_FILES.items():
            (tree / path).parent.mkdir(parents=True, exist_ok=True)
            (tree / path).write_text(text)
        (tree / "usr/sbin/policy-rc.d").chmod(0o755)
        partial = tarball.with_suffix(".partial")
        subprocess.run(["tar", "--numeric-owner", "--xattrs", "-C", str(tree), "-cf", str(partial), "."], check=True)
        partial.replace(tarball)
        for old in WORK.glob(f"debian-{SUITE}-*.tar"):
            if old != tarball:
                old.unlink()
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    log(f"debootstrap {SUITE} ({MIRROR}): {time.monotonic() - started:.0f} s, {tarball.stat().st_size >> 20} MB")
    return tarball


def ensure_base(root: Path = ROOT) -> str:
    """The base image under the Dockerfile's FROM name, made from `base_tarball()`; returns its ID. It is
    also tagged `topolabel-base:KEY-MTIME`, so a remade tarball is imported again."""
    name, tarball = dockerfile_base(root), base_tarball()
    keyed = f"{BASE_TAG}:{base_key()}-{int(tarball.stat().st_mtime)}"
    if image_exists(keyed):
        buildah("tag", keyed, name)
        return image_id(keyed)
    started = time.monotonic()
    container = buildah("from", "scratch").stdout.strip().splitlines()[-1]
    try:
        mountpoint = buildah("mount", container).stdout.strip()
        subprocess.run(["tar", "--numeric-owner", "--xattrs", "-C", mountpoint, "-xpf", str(tarball)], check=True)
        buildah("umount", container)
        buildah("config", "--cmd", "bash", "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                container)
        buildah("commit", "--rm", container, keyed)
    except BaseException:
        buildah("rm", container, check=False)
        raise
    buildah("tag", keyed, name)
    for ref in buildah("images", "--format", "{{.Name}}:{{.Tag}}").stdout.split():
        if ref.startswith(f"{BASE_TAG}:") and ref != keyed:
            buildah("rmi", ref, check=False)
    log(f"base image {name} from {tarball.name}: {time.monotonic() - started:.0f} s")
    return image_id(keyed)


def glob_regex(glob: str) -> re.Pattern[str]:
    """A .dockerignore pattern as a regex: `*` and `?` stay within a path segment, `**` crosses them, and a
    pattern naming a directory covers everything below it."""
    out, i = [], 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        else:
            out.append({"*": "[^/]*", "?": "[^/]"}.get(glob[i], re.escape(glob[i])))
            i += 1
    return re.compile("".join(out) + "(?:/.*)?")


def ignore_patterns(root: Path) -> list[tuple[bool, str, re.Pattern[str]]]:
    """.dockerignore as (is an exception `!...`, the pattern, its regex), in order."""
    path = root / ".dockerignore"
    lines = [line.strip() for line in (path.read_text().splitlines() if path.exists() else [])]
    return [(line.startswith("!"), line.lstrip("!").strip("/"), glob_regex(line.lstrip("!").strip("/")))
            for line in lines if line and not line.startswith("#")]


def ignored(rel: str, patterns: list[tuple[bool, str, re.Pattern[str]]]) -> bool:
    """Whether Docker's rule (the last matching pattern decides) leaves `rel` out of the context."""
    result = False
    for exception, _, regex in patterns:
        if regex.fullmatch(rel):
            result = not exception
    return result


def context_files(root: Path = ROOT) -> list[Path]:
    """The files of the build context that .dockerignore lets through, relative to `root`. A directory left
    out is not walked unless an exception names something inside it (`!.ci/constraints.txt`)."""
    patterns = ignore_patterns(root)
    inside = [glob for exception, glob, _ in patterns if exception and "/" in glob]

    def walked(rel: str) -> bool:
        return not ignored(rel, patterns) or any(glob.startswith(rel + "/") for glob in inside)

    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath).relative_to(root)
        dirnames[:] = sorted(d for d in dirnames if walked((here / d).as_posix()))
        found += [here / f for f in sorted(filenames) if not ignored((here / f).as_posix(), patterns)]
    return found


def build_key(root: Path, base_id: str, build_args: dict[str, str]) -> str:
    parts: list[str | bytes] = [base_id, repr(sorted(build_args.items())), (root / "Dockerfile").read_bytes()]
    for rel in context_files(root):
        parts += [rel.as_posix(), (root / rel).read_bytes()]
    return digest(*parts)


# pip options naming a file the build needs: passed as build secrets (mounted for the pip step only).
PIP_FILE_OPTIONS = {"cert": "pip-cert", "client-cert": "pip-client-cert"}


def pip_secrets(directory: Path) -> list[str]:
    """`--secret` options handing this machine's pip settings to the build: `pip config list` (environment
    included) as a pip.conf, plus the files its `cert` and `client-cert` name (the host's CA bundle when
    `cert` is unset). The Dockerfile mounts them for its pip step only, so nothing reaches the image."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    sections: dict[str, dict[str, str]] = {"global": {}}
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        section, _, option = key.rpartition(".")
        section = "global" if section in (":env:", "") else section.split(".")[-1]
        sections.setdefault(section, {})[option] = value.strip().strip("'\"")
    sections["global"].setdefault("cert", ssl.get_default_verify_paths().cafile or "/etc/ssl/certs/ca-certificates.crt")
    secrets = []
    for options in sections.values():
        for option, value in list(options.items()):
            if option in PIP_FILE_OPTIONS and Path(value).is_file():
                secrets.append(f"id={PIP_FILE_OPTIONS[option]},src={value}")
                options[option] = f"/run/secrets/{PIP_FILE_OPTIONS[option]}"
            elif value.startswith("/"):  # a host directory (find-links): not reachable in the build
                del options[option]
    conf = directory / "pip.conf"
    conf.write_text("".join(f"[{s}]\n" + "".join(f"{k} = {v}\n" for k, v in opts.items())
                            for s, opts in sections.items()))
    return [f"id=pip.conf,src={conf}", *secrets]


def build(root: Path = ROOT, allow_build: bool = True) -> str:
    """The image for this tree, built unless one with the same key exists; returns `IMAGE:VERSION`.
    With `allow_build` false a missing image is an error instead (tests in CI, after the set-up step)."""
    version = project_version(root)
    ref = f"{IMAGE}:{version}"
    with locked():
        base_id = ensure_base(root)
        args = {"VERSION": version, "SOURCE": project_source(root)}
        keyed = f"{IMAGE}:build-{build_key(root, base_id, args)}"
        if image_exists(keyed):
            buildah("tag", keyed, ref)
            return ref
        if not allow_build:
            raise ImageError(f"no image {keyed} for {root}: run python3 hack/image.py build "
                             "(.ci/setup.d/40-image.sh does); did something change the build context since?")
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=".build-", dir=WORK) as scratch:
            command = ["bud", "--isolation", "chroot", "--pull=never", "--layers=false", "-f",
                       str(root / "Dockerfile"), "-t", keyed, "-t", ref]
            command += [a for k, v in args.items() for a in ("--build-arg", f"{k}={v}")]
            command += [a for secret in pip_secrets(Path(scratch)) for a in ("--secret", secret)]
            with open(BUILD_LOG, "w") as out:
                code = subprocess.run(["buildah", *storage_args(), *command, str(root)], stdout=out,
                                      stderr=subprocess.STDOUT).returncode
        if code != 0:
            raise ImageError(f"buildah bud failed ({code}); the last lines of {BUILD_LOG}:\n"
                             + "\n".join(BUILD_LOG.read_text(errors="replace").splitlines()[-40:]))
        log(f"built {ref} ({keyed}) in {time.monotonic() - started:.0f} s, {size_mb(ref)} MB")
        prune(keep=keyed)
    return ref


def size_mb(ref: str) -> int:
    """The image's uncompressed size as `buildah images` counts it, in MB."""
    text = buildah("images", "--format", "{{.Size}}", ref).stdout.split()
    value, unit = float(text[0]), text[1].upper() if len(text) > 1 else "B"
    return round(value * {"B": 1e-6, "KB": 1e-3, "MB": 1, "GB": 1e3}.get(unit, 1))


def prune(keep: str) -> None:
    """Remove images of earlier builds and anything no tag refers to, so the cache does not grow."""
    listed = buildah("images", "--format", "{{.Name}}:{{.Tag}}").stdout.split()
    for ref in listed:
        if ref.startswith(f"{IMAGE}:build-") and ref != keep:
            buildah("rmi", ref, check=False)
    buildah("rmi", "--prune", check=False)


def main(argv: list[str]) -> int:
    if argv not in (["build"], ["base"]):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        print(build() if argv == ["build"] else ensure_base())
    except ImageError as exc:
        print(f"image: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
