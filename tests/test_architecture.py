"""The import contracts in pyproject.toml: they cover every module, and each of them refuses an import that
points up a layer, so a new module or a back import cannot slip past lint-imports.

The contracts are read as lint-imports reads them (`importlinter.api.read_configuration`) and checked by
import-linter's own layers contract against the import graph grimp builds of this checkout.
"""

from __future__ import annotations

import copy
import pkgutil
import re
from functools import cache
from typing import Any

import grimp
import pytest
from importlinter.api import read_configuration
from importlinter.contracts.layers import LayersContract

from testkit.environment import ROOT

PACKAGES = ("topolabel", "providers", "kueue_config", "exporters", "labeler")  # shipped in the wheel
SUPPORT = ("tests", "bench", "testkit", "hack")  # around it: never shipped, never imported by it


@cache
def configuration() -> dict[str, Any]:
    return read_configuration(str(ROOT / "pyproject.toml"))


def contracts() -> list[dict[str, Any]]:
    return configuration()["contracts_options"]


def layers_of(contract: dict[str, Any]) -> list[list[str]]:
    """The contract's layers, top first, each as the full names of its modules."""
    containers = contract.get("containers") or [""]
    return [[f"{container}.{name.strip()}".strip(".") for container in containers
             for name in re.split(r"[|:]", layer) if name.strip()] for layer in contract.get("layers", [])]


def layered() -> set[str]:
    """Every module a layers contract names."""
    return {name for contract in contracts() for layer in layers_of(contract) for name in layer}


@cache
def graph() -> grimp.ImportGraph:
    built = grimp.build_graph(*PACKAGES, *SUPPORT)
    for package in PACKAGES + SUPPORT:  # the graph of this checkout, not of an installed copy
        assert built.find_children(package) and (ROOT / package).is_dir()
    return built


def subpackages() -> list[str]:
    return sorted(m for m in graph().modules if m.count(".") and m.split(".")[0] in PACKAGES and (ROOT / m.replace(".", "/") / "__init__.py").exists())


def test_every_package_and_its_modules_sit_in_a_layer() -> None:
    assert sorted(configuration()["session_options"]["root_packages"]) == sorted(PACKAGES + SUPPORT)
    named = layered()
    missing = [p for p in PACKAGES + SUPPORT if p not in named]
    for package in PACKAGES:
        for module in pkgutil.iter_modules([str(ROOT / package)]):
            if f"{package}.{module.name}" not in named:
                missing.append(f"{package}.{module.name}")
    assert missing == [], "add these to a layers contract in pyproject.toml (docs/architecture.md)"


def test_every_subpackage_has_an_exhaustive_contract_of_its_own() -> None:
    """`containers` + `exhaustive`: lint-imports itself then fails on a module the contract leaves out."""
    covered = {container for contract in contracts() if contract["type"] == "layers"
               and str(contract.get("exhaustive")).lower() == "true" for container in contract.get("containers", [])}
    assert subpackages() and [p for p in subpackages() if p not in covered] == []


def check(contract: dict[str, Any], imports: grimp.ImportGraph) -> bool:
    """Whether the contract is kept in `imports`, by import-linter's own check."""
    checked = LayersContract(name=contract["name"], session_options=configuration()["session_options"],
                             contract_options=contract)
    return checked.check(copy.deepcopy(imports), verbose=False).kept


LAYERED = [c for c in contracts() if c["type"] == "layers"]


@pytest.mark.parametrize("contract", LAYERED, ids=[c["name"].split(":")[0] for c in LAYERED])
def test_each_contract_is_kept_and_refuses_an_import_up_its_layers(contract: dict[str, Any]) -> None:
    layers = layers_of(contract)
    assert check(contract, graph())
    if len(layers) < 2:  # one layer of independent modules: one of them importing another
        top, bottom = layers[0][0], layers[0][-1]
    else:
        top, bottom = layers[0][0], layers[-1][-1]
    broken = copy.deepcopy(graph())
    broken.add_import(importer=bottom, imported=top, line_number=1, line_contents=f"import {top}")
    assert not check(contract, broken), f"{bottom} importing {top} passed"


def test_no_module_imports_a_package_init_that_imports_the_package() -> None:
    """A package's `__init__` wires its modules; a module reaching back into it (`from . import X`) makes a
    cycle no layers contract sees. A data-only `__init__` (topolabel.commands' COMMANDS table) may be read."""
    imports = graph()
    back = []
    for package in subpackages():
        wires = {m for m in imports.find_modules_directly_imported_by(package) if m.startswith(f"{package}.")}
        if wires:
            back += [(m, package) for m in imports.find_descendants(package)
                     if imports.direct_import_exists(importer=m, imported=package)]
    assert back == []
