"""The layer contracts in pyproject.toml cover every module, so a new module cannot slip past lint-imports."""

from __future__ import annotations

import pkgutil
import re
import tomllib

from tests.conftest import ROOT

PACKAGES = ("topolabel", "providers", "kueue_config", "exporters", "labeler")


def contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def layered() -> set[str]:
    """Every module a layers contract names."""
    names: set[str] = set()
    for contract in contracts():
        for layer in contract.get("layers", []):
            names.update(part.strip() for part in re.split(r"[|:]", layer))
    return names


def test_every_package_and_its_modules_sit_in_a_layer() -> None:
    named = layered()
    missing = [p for p in PACKAGES if p not in named]
    for package in PACKAGES:
        for module in pkgutil.iter_modules([str(ROOT / package)]):
            if f"{package}.{module.name}" not in named:
                missing.append(f"{package}.{module.name}")
    assert missing == [], "add these to a layers contract in pyproject.toml (docs/architecture.md)"

