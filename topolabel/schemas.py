"""The shipped schemas, made from the config model with every source's and output format's options:
`schemas/*.json` for editors (the YAML language server), and the TopologyLabeler CRD's `spec` schema in
manifests/crd.yaml.

`python -m hack.schemas` writes them; tests/test_config_schema.py fails when one is out of date. A Helm chart's
values.schema.json can be made from `config_schema()` the same way.
"""

from __future__ import annotations

import io
import json
from typing import Any

from ruamel.yaml import YAML

from exporters.registry import option_models as export_models
from labeler.settings import config_schema as generator
from providers.registry import option_models

CONFIG_FILE = "schemas/topolabel.schema.json"
RESOURCE_FILE = "schemas/topologylabeler.schema.json"
CRD_FILE = "manifests/crd.yaml"
SPEC_DESCRIPTION = "The topolabel config (the same keys as topolabel.yaml); flags of `topolabel run` override it."


def config_schema() -> dict[str, Any]:
    """The JSON Schema of topolabel.yaml."""
    return generator.config_schema(option_models(), export_models())


def resource_schema() -> dict[str, Any]:
    """The JSON Schema of a TopologyLabeler manifest (its `spec` is the config)."""
    return generator.resource_schema(config_schema())


def crd_spec_schema() -> dict[str, Any]:
    """The structural schema of the CRD's `spec`."""
    schema = generator.structural(config_schema())
    return {"description": SPEC_DESCRIPTION, **{k: v for k, v in schema.items() if k != "description"}}


def as_json(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=False) + "\n"


def files() -> dict[str, str]:
    """The JSON schema files, by path under the repository root."""
    return {CONFIG_FILE: as_json(config_schema()), RESOURCE_FILE: as_json(resource_schema())}


def crd_text(current: str) -> str:
    """manifests/crd.yaml with its `spec` schema made from the config model; the rest (comments, status)
    as it is."""
    yaml = YAML()
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 160
    yaml.preserve_quotes = True
    crd = yaml.load(current)
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = crd_spec_schema()
    out = io.StringIO()
    yaml.dump(crd, out)
    return out.getvalue()
