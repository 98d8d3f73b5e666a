"""A stand-in for the `go` command: answers the calls the build scripts (hack/build-tool, hack/build-test-stack,
hack/build-tas-oracle) make, in seconds and without the network, and writes each "binary" where and under the
name real `go build` would. tests/test_build_scripts.py puts it first on PATH to run every build script from an
empty cache, so a script that names or links its binaries wrongly fails here rather than on a fresh machine.

What it does not imitate it refuses (exit 2), so a new call in a script shows up as a failing test.
Naming, as `go build` does it: `-o FILE` writes FILE; `-o DIR/` writes each main package into DIR under the
last element of its import path, less a major-version suffix (`go.etcd.io/etcd/server/v3` -> `server`).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

VERSION = "go1.26.0"
MAJOR = re.compile(r"^v[0-9]+$")


def fail(message: str) -> None:
    print(f"standin go: {message}", file=sys.stderr)
    raise SystemExit(2)


def go_mod() -> str:
    path = Path("go.mod")
    if not path.exists():
        fail(f"no go.mod in {os.getcwd()}")
    return path.read_text()


def tools() -> list[str]:
    """The `tool` directives of ./go.mod (single-line and block forms)."""
    found: list[str] = []
    block = False
    for raw in go_mod().splitlines():
        line = raw.split("//", 1)[0].strip()
        if line == "tool (":
            block = True
        elif block and line == ")":
            block = False
        elif block and line:
            found.append(line)
        elif line.startswith("tool "):
            found.append(line.split(None, 1)[1])
    return found


def required(module: str) -> str:
    """The version ./go.mod requires of `module`."""
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", go_mod(), re.M)
    if not match:
        fail(f"go.mod requires no {module}")
    return match.group(1)


def module_of(package: str) -> str:
    """The required module holding `package`: the longest required path it starts with."""
    modules = re.findall(r"^\s*(?:require\s+)?([\w.\-/]+)\s+v\S+", go_mod(), re.M)
    owners = [m for m in modules if package == m or package.startswith(m + "/")]
    if not owners:
        fail(f"no required module holds {package}")
    return max(owners, key=len)


def program_name(package: str) -> str:
    parts = package.rstrip("/").split("/")
    return parts[-2] if len(parts) > 1 and MAJOR.match(parts[-1]) else parts[-1]


def write_program(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho standin\n")
    path.chmod(0o755)


def build(args: list[str]) -> None:
    if "-o" not in args:
        fail("go build without -o")
    out = args[args.index("-o") + 1]
    packages = [a for a in args[args.index("-o") + 2:] if not a.startswith("-")]
    if packages == ["tool"]:
        packages = tools()
    elif packages == ["."]:
        packages = [re.search(r"^module\s+(\S+)", go_mod(), re.M).group(1)]  # type: ignore[union-attr]
    if out.endswith("/"):
        for package in packages:
            write_program(Path(out) / program_name(package))
    elif len(packages) == 1:
        write_program(Path(out))
    else:
        fail("go build -o FILE with several packages")


def module_dir(module: str) -> Path:
    """Where the module cache would hold `module`: a directory with a config/ like Kueue's and JobSet's and a
    kustomize/rbac/ like KWOK's."""
    directory = Path(os.environ["GOMODCACHE"]) / f"{module}@{required(module)}"
    for manifests in ("config", "kustomize/rbac"):
        (directory / manifests).mkdir(parents=True, exist_ok=True)
    return directory


def list_(args: list[str]) -> None:
    template = args[args.index("-f") + 1]
    target = args[-1]
    if "-m" in args:
        answers = {"{{.Version}}": required, "{{.Dir}}": lambda m: str(module_dir(m))}
    else:
        answers = {"{{.Module.Path}}": module_of}
    if template not in answers:
        fail(f"go list template {template!r}")
    print(answers[template](target))


def main(argv: list[str]) -> None:
    if argv[:2] == ["env", "GOVERSION"]:
        print(VERSION)
    elif argv[:1] == ["build"]:
        build(argv[1:])
    elif argv[:1] == ["list"]:
        list_(argv[1:])
    elif argv[:2] == ["mod", "download"]:
        module_dir(argv[2])
    else:
        fail(f"unexpected call: go {' '.join(argv)}")


if __name__ == "__main__":
    main(sys.argv[1:])
