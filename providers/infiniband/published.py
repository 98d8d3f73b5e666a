"""The fabric as the InfiniBand collector publishes it: parsed nodes and cables in a compact JSON, compressed.

The collector (`topolabel agent --ib-collector`) parses `ibnetdiscover` output once, on the node that ran it,
and publishes this form; the operator's source rebuilds the same fabric from it without the text. Columns
instead of records, and the node order and cable order of the output kept, so the same fabric always
gives the same bytes (a republish happens only when they change) and the same fabric:

    {"format": "topolabel.dev/ib-fabric/v1",
     "kinds": "SSH...",                      one letter per node: S switch, H CA, R router
     "guids": ["2c5eab0300b87b40", ...],     node GUIDs, 16 hex digits
     "descs": [...], "nports": [...],        description (settled as the parser settles it), port count
     "portGuids": [node, port, delta, ...],  a port's GUID as its difference from the node GUID (mostly 0 or
                                             the port number), three numbers per port GUID
     "rates": [[4, "HDR"], [1, "HDR"], ...], distinct link widths and speeds (null: unknown)
     "cables": [a, pa, b, pb, rate, ...]}    five numbers per cable: node index and port at each end, rate index

xz (LZMA, Python's standard library) packs it: a 100,000-HCA fabric becomes 562 KB, one ConfigMap shard, where
gzip -9 gives 1.47 MB and xz of the raw `ibnetdiscover` text 1.78 MB; unpacking takes a tenth of a second
(BENCHMARKS.md, "InfiniBand: the published fabric").
"""

from __future__ import annotations

import datetime
import json
import lzma
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from labeler.cluster.kube import api_error
from labeler.cluster.shards import SHARD_OF, list_manifests, read_published
from labeler.errors import SourceError, StaleInput

from .fabric import Fabric
from .queryerrors import PortErrors

FORMAT = "topolabel.dev/ib-fabric/v1"
FABRIC_LABEL = "topolabel.dev/ib-fabric"  # on each fabric's manifest ConfigMap; its value is the fabric's name
PREFIX = "topolabel-ib-"
ANY = "*"  # --ib-fabric without a name: the only fabric published
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
PORT_ERRORS, ERRORS_AT = "portErrors", "errorsAt"  # the collector's ibqueryerrors increases, in the manifest
MAX_ERROR_PORTS = 1000
MAX_UNPACKED = 512 << 20  # a 100,000-HCA fabric unpacks to about 20 MB
_KIND_LETTER = {"switch": "S", "ca": "H", "router": "R"}
_LETTER_KIND = {v: k for k, v in _KIND_LETTER.items()}


def encode(fabric: Fabric) -> dict[str, Any]:
    """The compact document for a fabric: its columns as they are (rates numbered in the order cables use
    them, so the same fabric gives the same document however it was made)."""
    guids = fabric.guids
    port_guids: list[int] = []
    for (node, port), port_guid in sorted(fabric.port_guids.items()):
        port_guids += [node, port, port_guid - guids[node]]
    rates: dict[tuple[int | None, str | None], int] = {}
    flat: list[int] = []
    for a, port_a, b, port_b, rate in fabric.cables:
        flat += [a, port_a, b, port_b, rates.setdefault(fabric.rates[rate], len(rates))]
    return {"format": FORMAT,
            "kinds": "".join(map(_KIND_LETTER.__getitem__, fabric.kinds)),
            "guids": [f"{guid:016x}" for guid in guids],
            "descs": list(fabric.descs),
            "nports": list(fabric.nports),
            "portGuids": port_guids,
            "rates": [list(rate) for rate in rates],
            "cables": flat}


def decode(doc: Any, origin: str) -> Fabric:
    """The fabric back from the compact document; a malformed one is a `SourceError` naming `origin`."""
    try:
        if doc.get("format") != FORMAT:
            raise ValueError(f"format {doc.get('format')!r}, expected {FORMAT!r} (a newer collector?)")
        guids = [int(g, 16) for g in doc["guids"]]
        kinds, descs, nports = doc["kinds"], doc["descs"], doc["nports"]
        if not len(kinds) == len(descs) == len(nports) == len(guids):
            raise ValueError("node columns differ in length")
        if len(set(guids)) != len(guids):
            raise ValueError("a node GUID is listed twice")
        if not all(isinstance(d, str) for d in descs) or not all(n is None or type(n) is int for n in nports):
            raise ValueError("descriptions must be strings and port counts integers")
        rates = [_rate(rate) for rate in doc["rates"]]
        pg, flat = _ints(doc["portGuids"], 3), _ints(doc["cables"], 5)
        _in_range(pg[0::3], len(guids), "a port GUID's node")
        _in_range(flat[0::5] + flat[2::5], len(guids), "a cable's node")
        _in_range(flat[4::5], len(rates), "a cable's rate")
        port_guids = {(node, port): guids[node] + delta for node, port, delta in zip(pg[0::3], pg[1::3], pg[2::3])}
        cables = list(zip(flat[0::5], flat[1::5], flat[2::5], flat[3::5], flat[4::5]))
        fabric = Fabric(guids, [_LETTER_KIND[k] for k in kinds], list(descs), list(nports), cables, rates, port_guids)
    except (AttributeError, KeyError, IndexError, TypeError, ValueError) as exc:
        raise SourceError(f"{origin}: not a published fabric: {type(exc).__name__}: {exc}") from None
    return fabric


def _ints(value: Any, width: int) -> list[int]:
    if not isinstance(value, list) or len(value) % width or not all(type(v) is int for v in value):
        raise ValueError(f"expected a flat list of integers, {width} per entry")
    return value


def _in_range(values: list[int], size: int, what: str) -> None:
    if values and (min(values) < 0 or max(values) >= size):
        raise ValueError(f"{what} is out of range")


def _rate(value: Any) -> tuple[int | None, str | None]:
    width, speed = value
    if not (width is None or type(width) is int) or not (speed is None or isinstance(speed, str)):
        raise ValueError(f"rate {value!r}: expected [width, speed]")
    return width, speed


def to_bytes(doc: dict[str, Any]) -> bytes:
    """Canonical JSON (no spaces): the same fabric gives the same bytes, so its hash tells a change."""
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def pack(raw: bytes) -> bytes:
    return lzma.compress(raw, preset=6)


def unpack(blob: bytes, origin: str) -> Any:
    """The document in a blob; one that unpacks to more than MAX_UNPACKED bytes (a bomb) is refused."""
    try:
        unpacker = lzma.LZMADecompressor()
        raw = unpacker.decompress(blob, max_length=MAX_UNPACKED)
        if not unpacker.eof:
            raise ValueError(f"unpacks to more than {MAX_UNPACKED >> 20} MiB, or is cut short")
        return json.loads(raw)
    except (lzma.LZMAError, ValueError, RecursionError) as exc:
        raise SourceError(f"{origin}: cannot read the published fabric: {str(exc)[:200]}") from None


def object_name(fabric: str) -> str:
    """The Lease and the manifest ConfigMap of a fabric (its shards add the hash and a number)."""
    return PREFIX + fabric


@dataclass(frozen=True)
class Published:
    """A published fabric, where it came from (for messages), the collector's notices, and its manifest's other
    keys (`portErrors`)."""

    fabric: Fabric
    origin: str
    notices: list[str]
    info: dict[str, str]


def read_fabric_from(api: Any, namespace: str, fabric: str, max_age: float,
                     now: datetime.datetime | None = None) -> Published:
    """The published fabric `fabric` (`*`: the only one published). Missing, or not rediscovered for longer
    than `max_age` seconds, is a `StaleInput` that says how old it is."""
    name = fabric if fabric != ANY else _only_fabric(api, namespace)
    try:
        found = read_published(api, namespace, object_name(name))
    except ApiException as exc:
        raise SourceError(f"infiniband: cannot read the published fabric {name!r} in namespace {namespace}: "
                          f"{api_error(exc)}") from None
    if found is None:
        others = _published(api, namespace)
        raise StaleInput(f"infiniband: no fabric {name!r} published in namespace {namespace} "
                         f"({'published: ' + ', '.join(others) if others else 'none published'}); is the collector "
                         "(topolabel agent --ib-collector) running on a node of that fabric?")
    manifest, blob = found
    info = manifest.info
    origin = f"fabric {name} (ConfigMap {namespace}/{manifest.name})"
    if manifest.labels.get(FABRIC_LABEL) != name or SHARD_OF in manifest.labels:  # as the collectors' policy checks
        raise SourceError(f"infiniband: {origin} is not that fabric's manifest (labels {FABRIC_LABEL}="
                          f"{str(manifest.labels.get(FABRIC_LABEL))[:60]!r}, {SHARD_OF}: {SHARD_OF in manifest.labels})")
    checked = _parse_time(info.get("checkedAt"), origin)
    age = ((now or datetime.datetime.now(datetime.timezone.utc)) - checked).total_seconds()
    who = f"collector on {info.get('collector') or 'an unknown node'}"
    if age > max_age:
        raise StaleInput(f"infiniband: {origin} was last discovered {format_age(age)} ago by the {who}, longer "
                         f"than ibMaxAge {format_age(max_age)}: is a collector still running on that fabric?")
    found_fabric = decode(unpack(blob, origin), origin)
    try:
        notices = json.loads(info.get("notices") or "[]")
    except (ValueError, RecursionError):
        notices = []
    notices = [str(n)[:500] for n in notices] if isinstance(notices, list) else []
    return Published(found_fabric, origin, notices, dict(info))


def encode_errors(increases: PortErrors, window: float) -> str:
    """The manifest's `portErrors`: counter increases per port within the collector's last interval (only
    ports whose counters rose, at most MAX_ERROR_PORTS, those with the most first)."""
    ranked = sorted(increases.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))[:MAX_ERROR_PORTS]
    return json.dumps({"window": int(window), "ports": [[f"{g:016x}", p, dict(sorted(c.items()))]
                                                        for (g, p), c in sorted(ranked)]}, separators=(",", ":"))


def decode_errors(info: dict[str, str], origin: str) -> tuple[PortErrors, float] | None:
    """The counter increases a manifest carries and when they were read; None when it carries none."""
    text, at = info.get(PORT_ERRORS), info.get(ERRORS_AT)
    if not text or not at:
        return None
    try:
        doc = json.loads(text)
        out: PortErrors = {}
        for guid, port, counters in doc["ports"][:MAX_ERROR_PORTS]:
            if type(port) is not int or not all(isinstance(k, str) and type(v) is int for k, v in counters.items()):
                raise ValueError("a port entry has the wrong types")
            out[(int(guid, 16), port)] = dict(counters)
    except (AttributeError, KeyError, TypeError, ValueError, RecursionError) as exc:
        raise SourceError(f"{origin}: {PORT_ERRORS}: {str(exc)[:200]}") from None
    return out, _parse_time(at, origin).timestamp()


def _published(api: Any, namespace: str) -> list[str]:
    try:
        return sorted(m.labels.get(FABRIC_LABEL, m.name) for m in list_manifests(api, namespace, FABRIC_LABEL))
    except ApiException as exc:
        raise SourceError(f"infiniband: cannot list the fabrics published in namespace {namespace}: "
                          f"{api_error(exc)}") from None


def _only_fabric(api: Any, namespace: str) -> str:
    names = _published(api, namespace)
    if len(names) == 1:
        return names[0]
    if not names:
        raise StaleInput(f"infiniband: no fabric published in namespace {namespace}; is the collector "
                         "(topolabel agent --ib-collector) running?")
    raise SourceError(f"infiniband: {len(names)} fabrics published in namespace {namespace} ({', '.join(names)}); "
                      "choose one with --ib-fabric NAME")


def _parse_time(text: str | None, origin: str) -> datetime.datetime:
    try:
        return datetime.datetime.strptime(text or "", TIME_FORMAT).replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        raise SourceError(f"{origin}: checkedAt {text!r} is not a time like 2026-01-31T12:00:00Z") from None


def format_age(seconds: float) -> str:
    """`42s`, `5m 03s`, `2h 05m`, `3d 4h`."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"
