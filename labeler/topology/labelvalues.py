"""Kubernetes label keys and values: validation, who owns a key, readable sanitising, stable disambiguation."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from operator import eq
from typing import Collection, Mapping

from ..errors import TopologyError

MAX_VALUE = 63
# TAS annotations carry the level key as a value, and annotation-borne keys are limited to 63 characters.
MAX_TAS_KEY = 63
HASH_LEN = 8

_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_PREFIX_RE = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_BAD_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")
_EDGE = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")

# Label domains owned by Kubernetes, the clouds and other node tools. topolabel writes no level label there:
# it would rewrite, and on a later change remove, a label that schedulers, kubelets or cloud controllers
# own (kubernetes.io/hostname, node.kubernetes.io/instance-type, cloud.google.com/gce-topology-block ...).
# `kubernetes.io/hostname` is Kueue's own last level, added by the Kueue objects, never written.
FOREIGN_DOMAINS = {
    "kubernetes.io": "Kubernetes", "k8s.io": "Kubernetes", "x-k8s.io": "Kubernetes",
    "cloud.google.com": "GKE", "gke.io": "GKE", "k8s.aws": "AWS", "amazonaws.com": "AWS", "azure.com": "Azure",
    "oraclecloud.com": "OCI", "coreweave.cloud": "CoreWeave", "coreweave.com": "CoreWeave", "crusoe.ai": "Crusoe",
    "nebius.com": "Nebius", "nebius.ai": "Nebius", "nvidia.com": "NVIDIA's GPU tools", "topograph.run": "Topograph",
}


def short_hash(text: str) -> str:
    """A short, stable hash: the same input gives the same suffix on every run and machine."""
    import hashlib  # most commands hash nothing (start-up time)

    return hashlib.sha256(text.encode()).hexdigest()[:HASH_LEN]


def is_valid_value(value: str) -> bool:
    return len(value) <= MAX_VALUE and bool(_VALUE_RE.fullmatch(value))  # `match` would let `$` pass a final \n


def all_valid_values(values: Collection[str]) -> bool:
    """Whether every one of `values` is a non-empty label value. Letters and digits alone (the hashes GKE's
    topology labels carry) are valid at any length up to the limit, so such values are checked all at once
    (100,000: a few ms instead of 60); others one at a time."""
    if "" in values or max(map(len, values), default=0) > MAX_VALUE:
        return False
    joined = "".join(values)
    return (joined.isascii() and joined.encode().isalnum()) or all(map(is_valid_value, values))  # bytes: no Unicode


def qualified_name_problems(key: str) -> list[str]:
    """Why `key` is not a Kubernetes qualified name (`ValidateLabelName`): [prefix/]name (empty when it is)."""
    problems = []
    prefix, slash, name = key.rpartition("/")
    if "/" in prefix:
        problems.append("has more than one '/'")
    elif slash and not prefix:
        problems.append("has an empty prefix before '/'")
    if prefix and (len(prefix) > 253 or not _PREFIX_RE.fullmatch(prefix)):
        problems.append(f"prefix {prefix!r} is not a lower-case DNS subdomain")
    if not name or len(name) > 63 or not _NAME_RE.fullmatch(name):
        problems.append(f"name {name!r} must be 1-63 characters, alphanumeric at both ends, '-_.' inside")
    return problems


def key_problems(key: str) -> list[str]:
    """Why `key` cannot be a node label key usable in TAS annotations (empty when it can)."""
    problems = qualified_name_problems(key)
    if len(key) > MAX_TAS_KEY:
        problems.append(f"is {len(key)} characters; TAS annotations accept at most {MAX_TAS_KEY}")
    return problems


def foreign_owner(key: str) -> str | None:
    """Who owns `key` when it is not topolabel's to write (`kubernetes.io/hostname` -> Kubernetes), else None."""
    prefix = key.rpartition("/")[0].lower()
    return next((owner for domain, owner in FOREIGN_DOMAINS.items()
                 if prefix == domain or prefix.endswith("." + domain)), None)


def level_key_problems(key: str) -> list[str]:
    """Why `key` cannot be a level label topolabel writes: not usable in TAS annotations, or someone else's."""
    owner = foreign_owner(key)
    owned = [f"belongs to {owner}; topolabel writes level labels only under a prefix of its own "
             "(default topolabel.dev/)"] if owner else []
    return key_problems(key) + owned


def readable(raw: str) -> str:
    """The closest valid label value to `raw`, before any shortening: invalid runs become '-'."""
    value = _BAD_CHARS.sub("-", raw.strip())
    value = re.sub(r"-{2,}", "-", value)
    return _EDGE.sub("", value)


def _with_hash(base: str, identity: str) -> str:
    stem = _EDGE.sub("", base[: MAX_VALUE - HASH_LEN - 1])
    suffix = short_hash(identity)
    return f"{stem}-{suffix}" if stem else f"x-{suffix}"


def to_value(raw: str) -> str:
    """One raw name to a valid label value; hashed only when it is too long or has nothing readable."""
    if len(raw) <= MAX_VALUE and "--" not in raw and _NAME_RE.fullmatch(raw):
        return raw  # already what `readable` would make of it (the common case: one match, no rewriting)
    value = readable(raw)
    if value and len(value) <= MAX_VALUE:
        return value
    return _with_hash(value, raw)


def candidates(identity: str, name: str) -> tuple[str, str]:
    """The two values `unique_values` may give an identity: its readable name, and that name with its hash."""
    return to_value(name), _with_hash(readable(name), identity)


def unique_values(names: Mapping[str, str], current: Mapping[str, Mapping[str, int]] | None = None,
                  copy: bool = True) -> Mapping[str, str]:
    """Map identities to distinct valid values, given each identity's display name.

    Stateless, yet stable when domains join: `current` holds, per identity, the values its nodes carry now
    (labels topolabel wrote before) and how many nodes carry each. An identity keeps such a value when it is
    one of its two candidates (so nothing else can steer it) and no identity with more nodes on it keeps it;
    the others take their readable name, and identities whose readable names collide with each other or
    with a kept value all get a hash of their identity. So collision handling only ever changes the
    newcomer's value, and the result does not depend on the order identities arrive in. Without `copy`, the
    result may be `names` itself, when every name already is its own distinct value (a caller that built
    `names` for this call alone saves a table: 1,000,000 hosts, 40 MB).
    """
    out = _kept_values(names, current or {})
    taken = set(out.values())
    wanted = _as_values({identity: name for identity, name in names.items() if identity not in out} if out else names)
    # no collision, no loop per domain; a value that is its own identity is distinct as keys are, without a
    # table to tell (a level of 1,000,000 hosts: 32 MB at discover's peak)
    if (all(map(eq, wanted, wanted.values())) or len(set(wanted.values())) == len(wanted)) \
            and taken.isdisjoint(wanted.values()):
        if not out:
            return dict(wanted) if copy else wanted
        out.update(wanted)
        return out
    claims = Counter(wanted.values())
    for identity, value in wanted.items():
        out[identity] = value if claims[value] == 1 and value not in taken else \
            _with_hash(readable(names[identity]), identity)
    if len(set(out.values())) != len(out):
        raise TopologyError("label value collision after hashing; rename one of the domains")
    return out


def _as_values(names: Mapping[str, str]) -> Mapping[str, str]:
    """`to_value` of each name; all at once when every name already is its own value (100,000 hosts: one
    check over them all instead of a match each)."""
    shown = names.values()
    if all_valid_values(shown) and "--" not in "".join(shown):  # valid values end alphanumeric: no '--' across two
        return names
    return {identity: to_value(name) for identity, name in names.items()}


def _kept_values(names: Mapping[str, str], current: Mapping[str, Mapping[str, int]]) -> dict[str, str]:
    """The values identities keep from `current`: each its most carried candidate, each value once."""
    claims: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for identity in sorted(i for i in names if current.get(i)):  # candidates cost a hash: only where values are
        carried = current[identity]
        allowed = candidates(identity, names[identity])
        best = sorted(((-n, v) for v, n in carried.items() if v in allowed and n > 0), key=lambda c: c)
        if best:
            count, value = best[0]
            claims[value].append((count, identity))
    return {min(claimants)[1]: value for value, claimants in claims.items()}
