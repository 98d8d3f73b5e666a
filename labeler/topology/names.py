"""Names every layer shares: the ownership label, the Kueue API, and how generated objects are named.

Objects topolabel generates carry `MANAGED_BY`, and only objects carrying it are ever replaced or deleted
(files, Kueue objects, exports). Objects Kueue cannot edit in place (a Topology's levels) are named by a
short hash of their immutable content, so a change yields a new object instead of a refused edit.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from .labelvalues import short_hash

MANAGED_BY = {"app.kubernetes.io/managed-by": "topolabel"}
KUEUE_GROUP, KUEUE_VERSION = "kueue.x-k8s.io", "v1beta2"
KUEUE_API_VERSION = f"{KUEUE_GROUP}/{KUEUE_VERSION}"
HOSTNAME = "kubernetes.io/hostname"
HASH6 = 6  # hex digits of content hash in an object name
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


def is_managed(obj: Any) -> bool:
    """Whether an object (a parsed manifest or an API answer) carries topolabel's ownership label."""
    if not isinstance(obj, Mapping):
        return False
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return isinstance(labels, Mapping) and all(labels.get(k) == v for k, v in MANAGED_BY.items())


def dns_name(text: str, limit: int = 63) -> str:
    """A lower-case DNS-1123 label from free text (`NVIDIA-H100-80GB-HBM3` -> `nvidia-h100-80gb-hbm3`)."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower())
    name = re.sub(r"-{2,}", "-", name).strip("-")[:limit].strip("-")
    return name or "pool"


def name_problem(name: str, limit: int = 253, dots: bool = True) -> str | None:
    """Why `name` cannot name a Kubernetes object (None when it can): a lower-case DNS subdomain, or without
    `dots` a DNS label (a namespace). Such a name holds no `/` or `..`, so a file named after it stays in its
    directory."""
    if len(name) > limit:
        return f"{name!r} is {len(name)} characters; at most {limit}"
    if not re.fullmatch(DNS_SUBDOMAIN if dots else DNS_LABEL, name):
        what = "a DNS subdomain" if dots else "a DNS label"
        return (f"{name!r} is not a Kubernetes name ({what}): lower-case letters, digits and '-'"
                + (" or '.'" if dots else "") + ", starting and ending with a letter or digit")
    return None


def snake(key: str) -> str:
    """camelCase config keys and dashed flags to the snake_case option names sources use."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key).replace("-", "_").lower()


def camel(name: str) -> str:
    """A snake_case option name as the config file writes it (`lldp_dir` -> `lldpDir`)."""
    first, *rest = name.split("_")
    return first + "".join(part.capitalize() for part in rest)


def hashed_name(base: str, content: Any) -> str:
    """`base` as a DNS label, then a hash of `content`: equal content, equal name; new content, new object."""
    import json  # only Kueue's objects are named this way (start-up time)

    digest = short_hash(json.dumps(content, sort_keys=True))[:HASH6]
    return f"{dns_name(base, 63 - HASH6 - 1)}-{digest}"


def topology_keys(labels: Sequence[str], hostname_level: bool) -> list[str]:
    """The node labels of a TAS Topology, coarsest first; hostname only last (Kueue's and KAI's rule)."""
    keys = [label for label in labels if label != HOSTNAME]
    if hostname_level or HOSTNAME in labels:
        keys.append(HOSTNAME)
    return keys
