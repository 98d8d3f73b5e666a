"""JSON Schemas of topolabel.yaml, generated from the config model, for editors, Helm and the CRD.

`config_schema(sources, exporters)` is the schema of topolabel.yaml (JSON Schema 2020-12): the pydantic
model's schema, with the `source` section spelled out per source type and the `export` section per output
format, from each one's options model (keys as the file writes them, camelCase). The YAML language server
completes and checks a file that names it. Callers pass the option models (`providers.registry.option_models()`,
`exporters.registry.option_models()`), since the core knows neither the sources nor the outputs.

`resource_schema(config)` wraps it as the TopologyLabeler custom resource (the config is its `spec`), and
`structural(config)` turns it into the OpenAPI v3 form a CRD's `openAPIV3Schema` accepts (no $refs or
unions; quantities stay open, and the operator checks them; see docs/gitops.md). The source section is one
object with every source's options, each typed, and a CEL rule per option naming the sources it belongs to,
so the API server refuses a misspelt preset or another source's option at `kubectl apply`; keys no source
knows are kept for the operator, which reports them.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

from pydantic import BaseModel

from ..topology.names import camel
from .config import Config, OptionModels

DIALECT = "https://json-schema.org/draft/2020-12/schema"
Schema = dict[str, Any]


def config_schema(sources: OptionModels, exporters: OptionModels) -> Schema:
    """The schema of topolabel.yaml, with every source's and every output format's options."""
    schema = _untitled(Config.model_json_schema(by_alias=True))
    defs = schema.setdefault("$defs", {})
    defs["SourceConfig"] = {
        "description": "Where topology comes from: `type` picks the source, the other keys are its options "
                       "(the same names as its flags, camelCase).",
        "oneOf": [options_schema(name, model, defs) for name, model in sorted(sources.items())],
    }
    export = schema["properties"]["export"]
    schema["properties"]["export"] = {
        "description": export["description"], "type": "object", "additionalProperties": False,
        "properties": {name: _options_object(f"{name} export", model, defs) for name, model in exporters.items()},
    }
    return {"$schema": DIALECT, "$id": "https://topolabel.dev/schemas/topolabel.schema.json",
            "title": "topolabel.yaml", **{k: v for k, v in schema.items() if k != "title"}}


def options_schema(name: str, model: type[BaseModel], defs: dict[str, Any], *, own: Mapping[str, Any] = {}) -> Schema:
    """One source's options as an object whose `type` is `name`; `own` adds keys of the caller (a combined
    source's part adds `levels` and `missing`). Nested definitions go into `defs`."""
    return _options_object(f"{name} source", model, defs, {"type": {"const": name}, **own})


def _options_object(title: str, model: type[BaseModel], defs: dict[str, Any], own: Mapping[str, Any] = {}) -> Schema:
    """An options model as the file writes it (camelCase keys), after the caller's `own` keys."""
    schema = _untitled(model.model_json_schema(by_alias=True))
    defs.update(schema.pop("$defs", {}))
    props = {**own, **{camel(k): v for k, v in (schema.get("properties") or {}).items()}}
    required = [*(k for k in own if k == "type"), *(camel(k) for k in schema.get("required") or [])]
    out: Schema = {"type": "object", "title": title, "properties": props,
                   **({"required": required} if required else {}), "additionalProperties": False}
    if schema.get("description"):
        out["description"] = schema["description"]
    return out


def resource_schema(config: Schema) -> Schema:
    """The TopologyLabeler custom resource, whose `spec` is the config."""
    body = {k: v for k, v in config.items() if k not in ("$schema", "$id", "$defs", "title")}
    return {"$schema": DIALECT, "$id": "https://topolabel.dev/schemas/topologylabeler.schema.json",
            "title": "TopologyLabeler", "type": "object", "required": ["apiVersion", "kind", "metadata"],
            "properties": {"apiVersion": {"const": "topolabel.dev/v1alpha1"}, "kind": {"const": "TopologyLabeler"},
                           "metadata": {"type": "object"}, "spec": {"$ref": "#/$defs/Config"},
                           "status": {"type": "object"}},
            "$defs": {**config.get("$defs", {}), "Config": body}}


def structural(config: Schema) -> Schema:
    """The config schema as a CRD's structural OpenAPI v3 schema.

    $refs are inlined; an optional value becomes `nullable`; a union of several kinds (a quantity, which
    may be a number or a string, or an amount, which may also be an object) and the source section (its
    keys depend on its type) become `x-kubernetes-preserve-unknown-fields`, left to the operator to check.
    """
    defs = dict(config.get("$defs", {}))
    if "SourceConfig" in defs:
        defs["SourceConfig"] = _open_source(defs["SourceConfig"])
    body = {k: v for k, v in config.items() if k not in ("$schema", "$id", "$defs", "title")}
    return _structural(body, defs)


# Words CEL reserves: a property so named is `__word__` in a rule (Kubernetes' escaping).
CEL_RESERVED = frozenset({"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
                          "function", "if", "import", "let", "loop", "package", "namespace", "return", "var",
                          "void", "while"})


def _open_source(source: Mapping[str, Any]) -> Schema:
    """The source section as one object: its type checked, every source's options typed (an option two sources
    define differently is left untyped), a CEL rule per option naming the sources it belongs to, and unknown
    keys kept as written (the operator reports them)."""
    owners: dict[str, list[str]] = {}
    schemas: dict[str, list[Any]] = {}
    for option in source.get("oneOf") or []:
        name = option["properties"]["type"]["const"]
        for key, value in option["properties"].items():
            if key != "type":
                owners.setdefault(key, []).append(name)
                schemas.setdefault(key, []).append(value)
    names = [option["properties"]["type"]["const"] for option in source.get("oneOf") or []]
    properties = {"type": {"type": "string", "enum": names}}
    properties.update({key: found[0] for key, found in schemas.items() if all(s == found[0] for s in found)})
    return {"description": source.get("description", ""), "type": "object", "required": ["type"],
            "properties": properties, "additionalProperties": True,
            "x-kubernetes-validations": [_belongs(key, owners[key]) for key in sorted(owners)]}


def _belongs(key: str, sources: list[str]) -> dict[str, str]:
    """The CEL rule that `key` is given only with a source that has it."""
    if not key.isalnum():
        raise ValueError(f"source option {key!r} is not a plain CEL identifier")
    field = f"__{key}__" if key in CEL_RESERVED else key
    types = ", ".join(f"'{name}'" for name in sources)
    owners = f"the {' and '.join(sources)} source{'s' if len(sources) > 1 else ''}"
    return {"rule": f"!has(self.{field}) || self.type in [{types}]", "message": f"{key} is an option of {owners}",
            "messageExpression": f"'{key} is an option of {owners}, not of ' + self.type"}


def _structural(node: Mapping[str, Any], defs: Mapping[str, Any]) -> Schema:
    node = _resolved(node, defs)
    options = node.get("anyOf") or node.get("oneOf")
    if options is not None:
        kinds = [o for o in options if o.get("type") != "null"]
        nullable = len(kinds) < len(options)
        if len(kinds) == 1:
            out = _structural({**{k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}, **kinds[0]}, defs)
        else:  # kept as written; typed when every option has the same type, so CEL rules can name it
            types = {o.get("type") for o in kinds}
            out = _described(node, {"x-kubernetes-preserve-unknown-fields": True,
                                    **({"type": types.pop()} if len(types) == 1 and None not in types else {})})
        return {**out, "nullable": True} if nullable else out
    out = _described(node, {})
    for key in ("type", "enum", "pattern", "maxLength", "minLength", "minimum", "maximum", "minItems", "maxItems",
                "required", "x-kubernetes-validations"):
        if key in node:
            out[key] = copy.deepcopy(node[key])
    if "const" in node:
        out["enum"] = [node["const"]]
    if "exclusiveMinimum" in node:
        out.update(minimum=node["exclusiveMinimum"], exclusiveMinimum=True)
    if node.get("properties"):  # never empty: the server drops it, and helm's server-side apply then conflicts
        out["properties"] = {k: _structural(v, defs) for k, v in node["properties"].items()}
    if "items" in node:
        out["items"] = _structural(node["items"], defs)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        out["additionalProperties"] = _structural(extra, defs)
    elif extra is True:
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def _resolved(node: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any]:
    """A node with its $ref replaced by the definition (the node's own keys, such as a description, win)."""
    while "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _described(node: Mapping[str, Any], out: Schema) -> Schema:
    if node.get("description"):
        out = {"description": " ".join(str(node["description"]).split()), **out}
    return out


def _untitled(schema: Any) -> Any:
    """Pydantic's schema without the titles it derives from field names (`Keyprefix`), which only add noise."""
    if isinstance(schema, dict):
        return {k: _untitled(v) for k, v in schema.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(schema, list):
        return [_untitled(v) for v in schema]
    return schema
