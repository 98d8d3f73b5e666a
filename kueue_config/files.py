"""Kueue objects as files for GitOps: one object per file, a kustomization, a check mode for CI."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Iterator, Sequence

import yaml

from labeler.errors import TopologyError
from labeler.names import is_managed
from labeler.progress import Progress, quiet

KUSTOMIZATION = "kustomization.yaml"
KIND_ORDER = ("Topology", "ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue")


def dump(obj: Any) -> str:
    """Deterministic YAML: keys in the order the objects were built, no flow style, no aliases."""
    return yaml.dump(obj, Dumper=_NoAliasDumper, sort_keys=False, default_flow_style=False, width=120)


class _NoAliasDumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def file_name(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    parts = [obj["kind"].lower(), meta.get("namespace"), meta["name"]]
    return "-".join(p for p in parts if p) + ".yaml"


def render(objects: Sequence[dict[str, Any]], progress: Progress = quiet) -> dict[str, str]:
    """File name -> content, including a kustomization listing every object file."""
    files = {file_name(obj): text for obj, text in zip(objects, _dumped(objects, progress))}
    if len(files) != len(objects):
        raise TopologyError("two generated objects map to one file name")
    resources = sorted(files, key=lambda f: (_kind_rank(f), f))
    files[KUSTOMIZATION] = dump({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                                 "resources": resources})
    return files


def stream(objects: Sequence[dict[str, Any]], progress: Progress = quiet) -> str:
    """All objects as one multi-document YAML stream (for `-` as the output directory)."""
    return "".join(f"---\n{text}" for text in _dumped(objects, progress))


def _dumped(objects: Sequence[dict[str, Any]], progress: Progress) -> Iterator[str]:
    """Each object's YAML, counted: PyYAML's emitter takes seconds for thousands of objects."""
    task = progress("writing YAML", len(objects))
    try:
        for obj in objects:
            yield dump(obj)
            task.advance()
    finally:
        task.close()


def _kind_rank(name: str) -> int:
    lowered = [k.lower() for k in KIND_ORDER]
    prefix = name.split("-", 1)[0]
    return lowered.index(prefix) if prefix in lowered else len(lowered)


def read_dir(directory: Path) -> dict[str, str]:
    """Files in `directory` that topolabel owns (the kustomization, objects carrying its label), by name."""
    owned: dict[str, str] = {}
    if not directory.is_dir():
        return owned
    for path in sorted(directory.glob("*.yaml")):
        text = path.read_text()
        if path.name == KUSTOMIZATION or _is_ours(text):
            owned[path.name] = text
    return owned


def _is_ours(text: str) -> bool:
    try:
        return is_managed(yaml.safe_load(text))
    except yaml.YAMLError:
        return False


def superseded(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """Object files that the new generation replaces (an immutable field changed, or a pool left)."""
    return sorted(name for name in old if name not in new)


def diff(old: dict[str, str], new: dict[str, str]) -> str:
    """A unified diff from what is in the directory to what would be generated."""
    chunks = []
    for name in sorted(set(old) | set(new)):
        before, after = old.get(name, ""), new.get(name, "")
        if before != after:
            chunks.extend(difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                               f"a/{name}" if before else "/dev/null",
                                               f"b/{name}" if after else "/dev/null"))
    return "".join(chunks)


def write_dir(directory: Path, new: dict[str, str], old: dict[str, str]) -> None:
    """Write the generated files and remove the superseded ones that topolabel wrote before."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in new.items():
        target = directory / name
        if old.get(name) != text:
            target.write_text(text)
    for name in superseded(old, new):
        (directory / name).unlink()
