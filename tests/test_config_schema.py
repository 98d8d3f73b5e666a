"""The config file helps its writer: every problem at once at its full path, "did you mean", a JSON Schema made
from the config model (shipped, current, usable by editors) that agrees with the model and with the CRD."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from labeler.errors import InputError
from labeler.settings.config import Config, config_issues, parse_config
from providers.registry import option_models
from testkit.environment import EXAMPLES, ROOT
from testkit.crdschema import validate
from topolabel.schemas import CONFIG_FILE, CRD_FILE, RESOURCE_FILE, config_schema, crd_text, files, resource_schema

CONFIGS = [EXAMPLES / "topolabel.yaml", EXAMPLES / "teams.yaml"]


def topolabel(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "topolabel.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_the_shipped_schemas_and_the_crd_are_what_the_model_gives() -> None:
    """Regenerate with `python -m hack.schemas` when this fails."""
    for name, text in files().items():
        assert (ROOT / name).read_text() == text, f"{name} is out of date: run python -m hack.schemas"
    crd = (ROOT / CRD_FILE).read_text()
    assert crd_text(crd) == crd, f"{CRD_FILE}'s spec schema is out of date: run python -m hack.schemas"


def empty_values(node: Any, path: str = "") -> list[str]:
    """Paths of empty maps and lists under `node`."""
    if isinstance(node, dict):
        return ([path] if not node else []) + [p for k, v in node.items() for p in empty_values(v, f"{path}.{k}")]
    if isinstance(node, list):
        return ([path] if not node else []) + [p for i, v in enumerate(node) for p in empty_values(v, f"{path}[{i}]")]
    return []


def test_the_crd_stores_as_written() -> None:
    """The API server drops empty maps and lists from a CRD's schema (omitempty), so the stored object differs from
    the file, and helm's server-side apply of crds/ over a kubectl-applied copy conflicts on .spec.versions."""
    empty = empty_values(yaml.safe_load((ROOT / CRD_FILE).read_text()))
    assert [p for p in empty if not p.endswith(".subresources.status")] == []  # `status: {}` turns it on, and stays


def test_config_schema_prints_the_shipped_file() -> None:
    out = topolabel("config", "schema")
    assert out.returncode == 0 and out.stdout == (ROOT / CONFIG_FILE).read_text()
    assert topolabel("config", "schema", "--resource").stdout == (ROOT / RESOURCE_FILE).read_text()


def test_editors_find_the_schema_and_the_examples_pass_it() -> None:
    schema = config_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    for path in CONFIGS:
        text = path.read_text()
        assert text.startswith("# yaml-language-server: $schema=../schemas/topolabel.schema.json"), path
        jsonschema.validate(yaml.safe_load(text), schema)
    manifest = (EXAMPLES / "topologylabeler.yaml").read_text()
    assert manifest.startswith("# yaml-language-server: $schema=../schemas/topologylabeler.schema.json")
    jsonschema.validate(yaml.safe_load(manifest), resource_schema())


# A config, the path of its one problem, and whether the CRD's structural schema refuses it too: the source's
# options and amounts (a number, a string or an object) stay open there, and the operator checks them.
SHAPES = [
    ({"keyPrefix": 3}, "keyPrefix", True),
    ({"plan": {"maxChangeFraction": 2}}, "plan.maxChangeFraction", True),
    ({"pools": {"lable": "x"}}, "pools.lable", True),
    ({"source": {"type": "labels", "prest": "gke"}}, "source.prest", False),
    ({"source": {"type": "labls"}}, "source.type", True),
    ({"source": {"type": "lldp", "lldpdir": "x"}}, "source.lldpdir", False),
    ({"source": {"type": "infiniband", "ibTimeout": 0}}, "source.ibTimeout", True),
    ({"source": {"type": "labels", "preset": "gpc"}}, "source.preset", True),
    ({"source": {"type": "labels", "preset": "gke", "inventory": "x"}}, "source.inventory", True),
    ({"kueue": {"clusterQueues": [{"name": "Team-A"}]}}, "kueue.clusterQueues[0].name", True),
    ({"kueue": {"clusterQueues": []}}, "kueue.clusterQueues", True),
    ({"kueue": {"clusterQueues": [{"name": "a", "quota": {"cpu": {"fraction": 2}}}]}},
     "kueue.clusterQueues[0].quota.cpu.fraction", False),
    ({"kueue": {"quota": {"cpu": "lots"}}}, "kueue.quota.cpu", False),
    ({"kueue": {"quota": {"cpu": {"steps": 8}}}}, "kueue.quota.cpu.steps", False),
    ({"kueue": {"clusterQueues": [{"name": "a", "preemption": {"withinClusterQueue": "Any"}}]}},
     "kueue.clusterQueues[0].preemption.withinClusterQueue", True),
    ({"kueue": {"localQueues": [{"name": "gpu"}]}}, "kueue.localQueues[0].namespaces", True),
    ({"kueue": {"localQueues": [{"name": "gpu", "namespaces": ["Team"]}]}}, "kueue.localQueues[0].namespaces[0]", True),
    ({"kueue": {"cohorts": [{"name": "c", "parentName": "p"}]}}, "kueue.cohorts[0].parentName", True),
]


@pytest.mark.parametrize("config, path, _", SHAPES)
def test_the_model_and_the_schema_refuse_the_same_shapes(config: dict[str, Any], path: str, _: bool) -> None:
    _, found = config_issues(config, option_models())
    assert [i.path for i in found] == [path]
    assert not jsonschema.Draft202012Validator(config_schema()).is_valid(config)


def test_every_problem_at_once_each_at_its_path_with_did_you_mean() -> None:
    config = {"keyPrefix": "x", "sources": {}, "source": {"type": "labels", "prest": "gke"},
              "kueue": {"clusterQueu": "gpu", "localQueues": [{"name": "gpu", "namespaces": ["a", "B"]}]}}
    with pytest.raises(InputError) as err:
        parse_config(config, "c.yaml", option_models())
    assert str(err.value) == (
        "c.yaml: 5 problems: keyPrefix: must end with '/', e.g. 'topolabel.dev/'; "
        "sources: unknown key; did you mean 'source'?; "  # in the order of the file
        "source.prest: unknown key; did you mean 'preset'?; "
        "kueue.clusterQueu: unknown key; did you mean 'clusterQueue'?; "
        "kueue.localQueues[0].namespaces[1]: 'B' is not a Kubernetes name (a DNS label): lower-case letters, digits "
        "and '-', starting and ending with a letter or digit")


def test_a_source_option_error_names_its_full_path() -> None:
    _, found = config_issues({"source": {"type": "labels", "preset": "gkee"}}, option_models())
    assert [str(i) for i in found] == ["source.preset: unknown preset 'gkee'; did you mean 'gke'?"]
    _, found = config_issues({"source": {"type": "labels", "preset": "gke", "localNames": 1}}, option_models())
    assert [str(i) for i in found] == ["source.localNames: unknown key; known: keys, names, preset, type"]


def test_a_combined_source_part_is_checked_with_the_config_at_its_path() -> None:
    parts = [{"type": "labels", "prest": "nvlink", "missing": "node"}, {"type": "inventory", "inventory": "x"},
             {"type": "combined"}, {"type": "labls"}]
    _, found = config_issues({"source": {"type": "combined", "sources": parts}}, option_models())
    assert [str(i) for i in found] == [
        "source.sources[0]: prest: unknown key; did you mean 'preset'?",
        "source.sources[2]: a combined source cannot contain another combined source",
        "source.sources[3]: unknown source 'labls'; did you mean 'labels'?"]


def test_config_check_lists_every_problem_per_file_and_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("source: {type: labels, prest: gke}\nkueue: {clusterQueues: [{name: A}]}\n")
    manifest = tmp_path / "tl.yaml"
    manifest.write_text(yaml.safe_dump({"apiVersion": "topolabel.dev/v1alpha1", "kind": "TopologyLabeler",
                                        "metadata": {"name": "default"}, "spec": {"plan": {"maxChangeFraction": 3}}}))
    out = topolabel("config", "check", *map(str, CONFIGS), str(EXAMPLES / "topologylabeler.yaml"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"{p}: valid" for p in [*CONFIGS, EXAMPLES / "topologylabeler.yaml"]]
    out = topolabel("config", "check", str(bad), str(manifest), str(CONFIGS[0]))
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        f"{bad}: source.prest: unknown key; did you mean 'preset'?",
        f"{bad}: kueue.clusterQueues[0].name: 'A' is not a Kubernetes name (a DNS subdomain): lower-case letters, "
        "digits and '-' or '.', starting and ending with a letter or digit",
        f"{manifest}: spec.plan.maxChangeFraction: must be at most 1",
        "topolabel config check: error: 3 problem(s) in 2 of 3 file(s)"]
    assert out.stdout.splitlines() == [f"{CONFIGS[0]}: valid"]
    assert "Traceback" not in topolabel("config", "check", str(tmp_path / "missing.yaml")).stderr


def crd_manifest(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "topolabel.dev/v1alpha1", "kind": "TopologyLabeler", "metadata": {"name": "default"},
            "spec": spec}


def test_the_crd_takes_what_the_model_takes_and_refuses_bad_shapes() -> None:
    """Client-side here; test_operator_apiserver.py has the API server's own answer."""
    crd = str(ROOT / CRD_FILE)
    for path in CONFIGS:
        assert validate(crd_manifest(yaml.safe_load(path.read_text())), crd) == [], path
    assert validate(yaml.safe_load((EXAMPLES / "topologylabeler.yaml").read_text()), crd) == []
    for config, path, refused in SHAPES:
        assert bool(validate(crd_manifest(config), crd)) is refused, path


def test_the_config_examples_in_the_docs_are_valid() -> None:
    """Every YAML block in README.md and docs/gitops.md that is a config (or a part of one) passes the check."""
    keys = {f.alias or name for name, f in Config.model_fields.items()}
    checked = 0
    for doc in (ROOT / "README.md", ROOT / "docs" / "gitops.md"):
        for block in re.findall(r"```yaml\n(.*?)```", doc.read_text(), re.S):
            data = yaml.safe_load(block)
            if isinstance(data, dict) and data and set(data) <= keys:
                parse_config(data, f"{doc.name} block", option_models())
                checked += 1
    assert checked >= 3
