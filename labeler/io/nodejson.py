"""A Node's JSON decoded straight into the fields `labeler.io.nodes.NodeReader` keeps (msgspec).

Apart from `labeler.io.nodes` so that msgspec loads with the first node list read, not with every command that
imports the Node record (an InfiniBand discovery from a capture reads no nodes: msgspec was a quarter of its
start-up).
"""

from __future__ import annotations

import msgspec

# A raw JSON item as `labeler.io.jsonlist` cuts it out of a list.
RAW_ITEMS = (memoryview, msgspec.Raw)
DECODE_ERRORS = (msgspec.DecodeError, RecursionError)
ValidationError = msgspec.ValidationError  # valid JSON, not the types a Node has


class _Meta(msgspec.Struct):
    name: str = ""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}


# Allocatable and taints are kept as their JSON text, decoded once per distinct text (labeler.io.nodes): the
# nodes of a pool repeat them, and msgspec cuts a value out faster than it builds one.
class _Spec(msgspec.Struct):
    providerID: str = ""
    taints: msgspec.Raw = msgspec.Raw(b"[]")
    unschedulable: bool = False


class _Condition(msgspec.Struct):
    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""


class _Status(msgspec.Struct):
    allocatable: msgspec.Raw = msgspec.Raw(b"{}")
    conditions: list[_Condition] = []


class NodeJSON(msgspec.Struct):
    """The fields of a Node that `NodeReader` keeps, with the types the API serves them in."""

    kind: str = "Node"
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: _Spec = msgspec.field(default_factory=_Spec)
    status: _Status = msgspec.field(default_factory=_Status)


decode = msgspec.json.Decoder(NodeJSON).decode
decode_run = msgspec.json.Decoder(list[NodeJSON]).decode  # a run of items cut out of a list (labeler.io.jsonlist)
decode_allocatable = msgspec.json.Decoder(dict[str, str]).decode
decode_taints = msgspec.json.Decoder(list[dict[str, str]]).decode
