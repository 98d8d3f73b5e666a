"""Write charts/topolabel/values.schema.json, the schema Helm checks the chart's values against.

`config` (the TopologyLabeler spec) comes from the config model, labeler/settings/config.py, so the chart accepts
exactly the keys topolabel.yaml does. Every other value is typed after its default in values.yaml: a
non-empty mapping admits only its keys (a typo is an error), except the free-form ones below; a few values
get the checks their programs make (counts are integers, fabric names follow the collector's rule).

    python3 hack/chart_schema.py            # rewrite the file
    python3 hack/chart_schema.py --check    # exit 1 if the committed file is not what this writes
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from labeler.settings.config import Config  # noqa: E402  (after the path is set: this file runs as a script)
from topolabel.ibcollector import FABRIC_NAME  # noqa: E402

CHART = ROOT / "charts" / "topolabel"
SCHEMA = CHART / "values.schema.json"
# Kubernetes structures passed through as they are: any keys.
FREE_FORM = {"operator.resources", "agent.resources", "agent.lldpdResources", "ibCollector.resources",
             "ibCollector.nodeSelector"}
_FABRIC = FABRIC_NAME.pattern.removeprefix("^").removesuffix("$")
# Values checked beyond their default's type: the collector's `--ib-fabric NAME=REGEX`s and the name of the
# fabric the operator reads ("*": the only one published; empty: none).
CHECKED = {"ibCollector.replicas": {"type": "integer", "minimum": 0},
           "ibCollector.fabrics": {"type": "array", "items": {"type": "string", "pattern": f"^{_FABRIC}=.+$"}},
           "operator.infiniband.fabric": {"type": "string", "pattern": rf"^(|\*|{_FABRIC})$"},
           "ibCollector.subnetPrefixes": {"type": "array", "items": {"type": "string", "pattern": "^[0-9a-f]{16}$"}},
           "operator.admissionPolicy.labelPrefixes": {"type": "array", "items": {"type": "string", "pattern": "^(.*/)?$"}},
           "operator.admissionPolicy.labelKeys": {"type": "array", "items": {"type": "string", "minLength": 1}}}


def typed(value: Any, path: str) -> dict[str, Any]:
    """A schema for a value shaped like `value` (the default at `path`)."""
    if path in CHECKED:
        return CHECKED[path]
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, (int, float)):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, list):
        return {"type": "array"}
    if not value or path in FREE_FORM:
        return {"type": "object"}
    return {"type": "object", "additionalProperties": False,
            "properties": {k: typed(v, f"{path}.{k}".lstrip(".")) for k, v in value.items()}}


def schema() -> dict[str, Any]:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    config = Config.model_json_schema(by_alias=True)
    definitions = config.pop("$defs", {})
    config["description"] = ("The spec of the TopologyLabeler `default`: the keys of topolabel.yaml "
                             "(generated from labeler/settings/config.py by hack/chart_schema.py)")
    root = typed(values, "")
    root["properties"]["config"] = config
    return {"$schema": "http://json-schema.org/draft-07/schema#", "title": "topolabel chart values", **root,
            "$defs": definitions}


def render() -> str:
    return json.dumps(schema(), indent=2) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if argv == ["--check"]:
        if SCHEMA.exists() and SCHEMA.read_text() == text:
            return 0
        print(f"{SCHEMA.relative_to(ROOT)} is out of date: run python3 hack/chart_schema.py", file=sys.stderr)
        return 1
    if argv:
        print(__doc__.split("\n\n")[2], file=sys.stderr)
        return 2
    SCHEMA.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
