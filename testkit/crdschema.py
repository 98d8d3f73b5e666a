"""Validate an object against a CustomResourceDefinition the way the API server would, CEL rules included.

`validate(obj, crd_path, old=None)` returns one message per problem (empty when the server would accept the
object). It follows the API server's order: check apiVersion/kind against the CRD's served versions, apply
the schema's defaults (rules see defaulted values), check ObjectMeta (name is a DNS subdomain, namespace
only on namespaced kinds, valid labels), validate the `openAPIV3Schema` converted to JSON Schema, check
`x-kubernetes-list-type` set/map uniqueness, and evaluate every `x-kubernetes-validations` rule at its
location with cel-python. Unknown fields are errors, as with `kubectl apply` (strict field validation).

Transition rules (those naming `oldSelf`) run only when `old` is given and the field exists in it, as on an
update; like the server, `old` is followed into objects, maps and `list-type: map` items only.

Limits (checked against the CRDs this project uses, none of which need them): CEL optional syntax (`?.`,
`[?`) does not parse in cel-python and is reported as an error, never skipped; `optionalOldSelf` rules are
reported as unsupported when there is no old value; property names that CEL must escape (`__dash__`) are
not mapped; the Kubernetes `quantity`, `url`, `ip`/`cidr` and `format` CEL libraries are absent.
"""

from __future__ import annotations

import base64
import binascii
import copy
import datetime as dt
import ipaddress
import re
import uuid
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterator

import celpy
import jsonschema
import lark
import re2
import yaml
from celpy import celtypes

Schema = dict[str, Any]

# ---------------------------------------------------------------------------------------------------------
# The CRD and the schema of one served version


@lru_cache(maxsize=None)
def _load_crd(path: str) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(Path(path).read_text()) if isinstance(d, dict)]
    crds = [d for d in docs if d.get("kind") == "CustomResourceDefinition"]
    if len(crds) != 1:
        raise ValueError(f"{path}: expected one CustomResourceDefinition, found {len(crds)}")
    return crds[0]


def served_schema(obj: dict[str, Any], crd: dict[str, Any]) -> tuple[Schema | None, list[str]]:
    """The openAPIV3Schema of the served version that obj's apiVersion names, or why there is none."""
    spec = crd["spec"]
    group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    if group != spec["group"]:
        return None, [f"apiVersion: {obj.get('apiVersion')!r} is not in group {spec['group']!r}"]
    if obj.get("kind") != spec["names"]["kind"]:
        return None, [f"kind: {obj.get('kind')!r} is not {spec['names']['kind']!r}"]
    for ver in spec["versions"]:
        if ver["name"] == version and ver.get("served"):
            return ver["schema"]["openAPIV3Schema"], []
    served = [v["name"] for v in spec["versions"] if v.get("served")]
    return None, [f"apiVersion: version {version!r} is not served (served: {', '.join(served)})"]


# ---------------------------------------------------------------------------------------------------------
# Defaulting, as structural defaulting does it: missing (or null and not nullable) fields get a copy of the
# default, then defaults apply inside, including inside values that were just defaulted.


def apply_defaults(value: Any, schema: Schema) -> None:
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for key, sub in props.items():
            if "default" in sub and (key not in value or (value[key] is None and not sub.get("nullable"))):
                value[key] = copy.deepcopy(sub["default"])
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = props.get(key) or (extra if isinstance(extra, dict) else None)
            if sub is not None:
                apply_defaults(item, sub)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            apply_defaults(item, schema["items"])


# ---------------------------------------------------------------------------------------------------------
# openAPIV3Schema -> JSON Schema (draft 4, whose boolean exclusiveMinimum/Maximum OpenAPI v3.0 shares)

_COPIED = ("type", "enum", "pattern", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
           "exclusiveMaximum", "multipleOf", "minItems", "maxItems", "uniqueItems", "minProperties",
           "maxProperties", "required", "format")


def to_json_schema(schema: Schema, closed: bool = True) -> Schema:
    """Convert one node. `closed` marks structural nodes, where undeclared fields are unknown fields.

    Value-validation branches (allOf/anyOf/oneOf/not) only constrain and are never closed; nor are
    objects that keep unknown fields or embed a whole resource.
    """
    out: Schema = {k: copy.deepcopy(schema[k]) for k in _COPIED if k in schema}
    if schema.get("x-kubernetes-int-or-string"):
        out["type"] = ["integer", "string"]
    if schema.get("nullable"):
        if "type" in out:
            out["type"] = [*([out["type"]] if isinstance(out["type"], str) else out["type"]), "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    if "properties" in schema:
        out["properties"] = {k: to_json_schema(v, closed) for k, v in schema["properties"].items()}
    if isinstance(schema.get("items"), dict):
        out["items"] = to_json_schema(schema["items"], closed)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        out["additionalProperties"] = to_json_schema(extra, closed)
    elif isinstance(extra, bool):
        out["additionalProperties"] = extra
    elif (closed and schema.get("type") == "object" and not schema.get("x-kubernetes-preserve-unknown-fields")
          and not schema.get("x-kubernetes-embedded-resource")):
        out["additionalProperties"] = False
    for key in ("allOf", "anyOf", "oneOf"):
        if key in schema:
            out[key] = [to_json_schema(s, closed=False) for s in schema[key]]
    if "not" in schema:
        out["not"] = to_json_schema(schema["not"], closed=False)
    return out


def _root_json_schema(schema: Schema) -> Schema:
    """The object's schema; ObjectMeta is open here and checked by `metadata_errors` instead."""
    out = to_json_schema(schema)
    if "metadata" in out.get("properties", {}):
        out["properties"]["metadata"] = to_json_schema(schema["properties"]["metadata"], closed=False)
    return out


_FORMATS = jsonschema.FormatChecker(formats=())
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


@_FORMATS.checks("int32")
def _int32(v: Any) -> bool:
    return not isinstance(v, int) or -2**31 <= v < 2**31


@_FORMATS.checks("int64")
def _int64(v: Any) -> bool:
    return not isinstance(v, int) or -2**63 <= v < 2**63


@_FORMATS.checks("date-time", (ValueError,))
def _date_time(v: Any) -> bool:
    if not isinstance(v, str):
        return True
    if not _DATE_TIME.match(v):
        return False
    dt.datetime.fromisoformat(v.replace("z", "Z").replace("Z", "+00:00").replace("t", "T"))
    return True


@_FORMATS.checks("date", (ValueError,))
def _date(v: Any) -> bool:
    return not isinstance(v, str) or bool(dt.date.fromisoformat(v))


@_FORMATS.checks("byte", (binascii.Error,))
def _byte(v: Any) -> bool:
    return not isinstance(v, str) or base64.b64decode(v, validate=True) is not None


@_FORMATS.checks("uuid", (ValueError,))
def _uuid(v: Any) -> bool:
    return not isinstance(v, str) or bool(uuid.UUID(v))


@_FORMATS.checks("ipv4", (ValueError,))
def _ipv4(v: Any) -> bool:
    return not isinstance(v, str) or bool(ipaddress.IPv4Address(v))


@_FORMATS.checks("ipv6", (ValueError,))
def _ipv6(v: Any) -> bool:
    return not isinstance(v, str) or bool(ipaddress.IPv6Address(v))


@_FORMATS.checks("cidr", (ValueError,))
def _cidr(v: Any) -> bool:
    return not isinstance(v, str) or bool(ipaddress.ip_network(v, strict=False))


def _path(parts: Any) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "<root>"


_VALIDATORS: dict[int, tuple[Schema, jsonschema.Draft4Validator]] = {}  # the schema is kept, so its id stays


def schema_errors(obj: Any, schema: Schema) -> tuple[list[str], bool]:
    """Messages for schema violations, and whether one is a type or format error (which stops CEL there)."""
    cached = _VALIDATORS.get(id(schema))
    if cached is None or cached[0] is not schema:
        cached = _VALIDATORS[id(schema)] = (schema, jsonschema.Draft4Validator(_root_json_schema(schema),
                                                                               format_checker=_FORMATS))
    validator = cached[1]
    errors = sorted(validator.iter_errors(obj), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    blocking = any(e.validator in ("type", "format") for e in errors)  # both are TypeInvalid there
    return [f"{_path(e.absolute_path)}: {_message_of(e)}" for e in errors], blocking


def _message_of(error: jsonschema.ValidationError) -> str:
    """jsonschema's message with the offending value shortened, so the reason at its end stays visible."""
    value = repr(error.instance)
    return _short(error.message.replace(value, _short(value, 80)) if len(value) > 80 else error.message)


def _short(text: str, limit: int = 240) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------------------------------------
# ObjectMeta, as the API server checks it for custom resources (names are DNS subdomains)

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _subdomain_problem(text: str) -> str | None:
    if len(text) > 253 or not _DNS_SUBDOMAIN.fullmatch(text):
        return f"{text!r} is not a lower-case DNS-1123 subdomain of at most 253 characters"
    return None


def _label_key_problem(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if (prefix and _subdomain_problem(prefix)) or len(name) > 63 or not _LABEL_NAME.match(name):
        return f"label key {key!r} is not a qualified name"
    return None


def metadata_errors(meta: Any, namespaced: bool) -> list[str]:
    if not isinstance(meta, dict):
        return ["metadata: required"]
    errors = []
    name = meta.get("name")
    if not name and not meta.get("generateName"):
        errors.append("metadata.name: required")
    elif name and (problem := _subdomain_problem(str(name))):
        errors.append(f"metadata.name: {problem}")
    namespace = meta.get("namespace")
    if namespace and not namespaced:
        errors.append("metadata.namespace: not allowed on a cluster-scoped kind")
    elif namespace and (len(namespace) > 63 or not re.fullmatch(_DNS_LABEL, namespace)):
        errors.append(f"metadata.namespace: {namespace!r} is not a DNS-1123 label")
    for key, value in (meta.get("labels") or {}).items():
        if problem := _label_key_problem(str(key)):
            errors.append(f"metadata.labels: {problem}")
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            errors.append(f"metadata.labels.{key}: {value!r} is not a valid label value")
    for key in meta.get("annotations") or {}:
        if problem := _label_key_problem(str(key)):
            errors.append(f"metadata.annotations: {problem.replace('label key', 'annotation key')}")
    return errors


# ---------------------------------------------------------------------------------------------------------
# CEL: the Kubernetes library functions cel-python lacks, as small Python functions

def _list_index(items: Any, x: Any, last: bool = False) -> celtypes.IntType:
    found = [i for i, v in enumerate(items) if v == x]
    return celtypes.IntType((found[-1] if last else found[0]) if found else -1)


def _index_of(s: Any, x: Any, offset: Any = 0) -> celtypes.IntType:
    if isinstance(s, str):
        return celtypes.IntType(s.find(x, int(offset)))
    return _list_index(s, x)


def _last_index_of(s: Any, x: Any, offset: Any = None) -> celtypes.IntType:
    if isinstance(s, str):
        return celtypes.IntType(s.rfind(x, 0, None if offset is None else int(offset) + len(x)))
    return _list_index(s, x, last=True)


def _strings(items: Any) -> celtypes.ListType:
    return celtypes.ListType([celtypes.StringType(i) for i in items])


def _split(s: str, sep: str, n: Any = -1) -> celtypes.ListType:
    n = int(n)
    if n == 0:
        return celtypes.ListType([])
    return _strings(s.split(sep) if n < 0 else s.split(sep, n - 1))


def _substring(s: str, start: Any, end: Any = None) -> celtypes.StringType:
    start, stop = int(start), len(s) if end is None else int(end)
    if not 0 <= start <= stop <= len(s):
        raise IndexError(f"substring({start}, {stop}) out of range for length {len(s)}")
    return celtypes.StringType(s[start:stop])


def _find_all(s: str, pattern: str, n: Any = -1) -> celtypes.ListType:
    found = [m.group(0) for m in re2.finditer(pattern, s)]
    return _strings(found if int(n) < 0 else found[: int(n)])


def _replace(s: str, old: str, new: str, n: Any = -1) -> celtypes.StringType:
    return celtypes.StringType(s.replace(old, new, int(n)))


def _find(s: str, pattern: str) -> celtypes.StringType:
    match = re2.search(pattern, s)
    return celtypes.StringType(match.group(0) if match else "")


def _sum(items: Any) -> Any:
    total: Any = celtypes.IntType(0)
    for i, item in enumerate(items):
        total = item if i == 0 else total + item
    return total


K8S_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "isSorted": lambda items: celtypes.BoolType(all(a <= b for a, b in zip(items, list(items)[1:]))),
    "sum": _sum,
    "max": max,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "charAt": lambda s, i: celtypes.StringType(s[int(i)] if int(i) < len(s) else ""),
    "lowerAscii": lambda s: celtypes.StringType(re.sub(r"[A-Z]+", lambda m: m.group(0).lower(), s)),
    "upperAscii": lambda s: celtypes.StringType(re.sub(r"[a-z]+", lambda m: m.group(0).upper(), s)),
    "trim": lambda s: celtypes.StringType(s.strip()),
    "replace": _replace,
    "split": _split,
    "substring": _substring,
    "join": lambda items, sep="": celtypes.StringType(sep.join(items)),
    "find": _find,
    "findAll": _find_all,
}

_ENV = celpy.Environment()


@lru_cache(maxsize=None)
def _program(rule: str) -> tuple[Any, bool]:
    """The runnable program for a rule and whether it is a transition rule (names `oldSelf`)."""
    ast = _ENV.compile(rule)
    transition = any(isinstance(t, lark.Token) and t.type == "IDENT" and t.value == "oldSelf"
                     for t in ast.scan_values(lambda v: isinstance(v, lark.Token)))
    return _ENV.program(ast, functions=K8S_FUNCTIONS), transition


def to_cel(value: Any, schema: Schema) -> Any:
    """A JSON value as a CEL value of the type Kubernetes gives it (date-time strings are timestamps...)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, str):
        fmt = schema.get("format")
        if fmt == "date-time":
            return celtypes.TimestampType(value)
        if fmt == "duration":
            return celtypes.DurationType(value)
        if fmt == "byte":
            return celtypes.BytesType(base64.b64decode(value))
        return celtypes.StringType(value)
    if isinstance(value, list):
        item = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        return celtypes.ListType([to_cel(v, item) for v in value])
    props = schema.get("properties") or {}
    extra = schema.get("additionalProperties") if isinstance(schema.get("additionalProperties"), dict) else {}
    return celtypes.MapType({celtypes.StringType(k): to_cel(v, props.get(k, extra)) for k, v in value.items()})


_MISSING = object()


def _evaluate(rule: dict[str, Any], value: Any, schema: Schema, old: Any, path: str) -> str | None:
    """The message for one failed rule, or None when it holds or does not apply."""
    text = rule["rule"]
    try:
        program, transition = _program(text)
    except Exception as exc:  # a rule cel-python cannot parse must fail loudly, never pass
        return f"{path}: rule {text!r} could not be compiled: {type(exc).__name__}: {str(exc).splitlines()[0]}"
    activation = {"self": to_cel(value, schema)}
    if transition:
        if old is _MISSING:
            if rule.get("optionalOldSelf"):
                return f"{path}: rule {text!r} uses optionalOldSelf, which this validator does not support"
            return None
        activation["oldSelf"] = to_cel(old, schema)
    where = f"{path}{rule.get('fieldPath', '')}"
    try:
        result = program.evaluate(activation)
    except Exception as exc:
        result = exc
    if isinstance(result, Exception):
        return f"{where}: rule {text!r} failed to evaluate: {_short(str(result.args[0] if result.args else result))}"
    if not isinstance(result, celtypes.BoolType):
        return f"{where}: rule {text!r} returned {type(result).__name__}, not a bool"
    if result:
        return None
    return f"{where}: {_message(rule, activation)} (rule: {text})"


def _message(rule: dict[str, Any], activation: dict[str, Any]) -> str:
    if rule.get("messageExpression"):
        try:
            text = _ENV.program(_ENV.compile(rule["messageExpression"]), functions=K8S_FUNCTIONS).evaluate(activation)
            if isinstance(text, str) and text.strip():
                return str(text)
        except Exception:  # the server falls back to `message` when messageExpression fails too
            pass
    return rule.get("message") or "failed rule"


# ---------------------------------------------------------------------------------------------------------
# Walking the object: rules and list-type checks at every location, with the correlated old value

def _children(value: Any, schema: Schema, old: Any) -> Iterator[tuple[str | int, Any, Schema, Any]]:
    """(key, child, child schema, correlated old child or _MISSING) for each child with a schema."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, child in value.items():
            sub = props.get(key) or (extra if isinstance(extra, dict) else None)
            if sub is not None:
                prev = old.get(key, _MISSING) if isinstance(old, dict) else _MISSING
                yield key, child, sub, prev
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        keys = schema.get("x-kubernetes-list-map-keys") or []
        by_key = {}
        if schema.get("x-kubernetes-list-type") == "map" and isinstance(old, list):
            by_key = {_map_key(o, keys): o for o in old if isinstance(o, dict)}
        for i, child in enumerate(value):
            prev = by_key.get(_map_key(child, keys), _MISSING) if by_key and isinstance(child, dict) else _MISSING
            yield i, child, schema["items"], prev


def _map_key(item: dict[str, Any], keys: list[str]) -> tuple[str, ...]:
    return tuple(repr(item.get(k)) for k in keys)


def _list_errors(value: list[Any], schema: Schema, path: str) -> list[str]:
    kind = schema.get("x-kubernetes-list-type")
    if kind == "set":
        seen: list[Any] = []
        dupes = [v for v in value if v in seen or seen.append(v)]
        return [f"{path}: Duplicate value: {d!r}" for d in dupes]
    if kind == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        errors, seen_keys = [], set()
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            missing = [k for k in keys if k not in item]
            if missing:
                errors.append(f"{path}[{i}]: Required value: list map key(s) {', '.join(missing)}")
            key = _map_key(item, keys)
            if key in seen_keys:
                errors.append(f"{path}[{i}]: Duplicate value: {dict((k, item.get(k)) for k in keys)}")
            seen_keys.add(key)
        return errors
    return []


def rule_errors(value: Any, schema: Schema, old: Any = _MISSING, path: str = "") -> list[str]:
    if value is None:
        return []
    errors = _list_errors(value, schema, path or "<root>") if isinstance(value, list) else []
    for rule in schema.get("x-kubernetes-validations") or []:
        message = _evaluate(rule, value, schema, old, path or "<root>")
        if message:
            errors.append(message)
    for key, child, sub, prev in _children(value, schema, old):
        child_path = f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else key)
        errors.extend(rule_errors(child, sub, prev, child_path))
    return errors


# ---------------------------------------------------------------------------------------------------------

def validate(obj: dict[str, Any], crd_path: str | Path, old: dict[str, Any] | None = None) -> list[str]:
    """Why the API server would reject `obj` (an update from `old` when given); empty when it would not."""
    crd = _load_crd(str(Path(crd_path).resolve()))
    schema, errors = served_schema(obj, crd)
    if schema is None:
        return errors
    obj = copy.deepcopy(obj)
    apply_defaults(obj, schema)
    previous: Any = _MISSING
    if old is not None:
        previous = copy.deepcopy(old)
        apply_defaults(previous, schema)
    errors += metadata_errors(obj.get("metadata"), crd["spec"].get("scope") == "Namespaced")
    found, blocking = schema_errors(obj, schema)
    errors += found
    if blocking:  # the server skips CEL after a type or format error, since rules assume the types
        return errors + ["<root>: CEL rules not evaluated because of the type or format errors above"]
    return errors + rule_errors(obj, schema, previous)
