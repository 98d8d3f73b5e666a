"""Snapshot files read through msgspec's typed decoding: a discovered snapshot takes the fast path, anything
else reads or is refused exactly as the generic reader does, and deep nesting anywhere is one line.

(That the two readers agree on any document is a property test in test_properties.py.)
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
import yaml

from hack.synth import gke_cluster
from labeler.errors import InputError
from labeler.io.documents import MAX_DEPTH, load
from labeler.io.nodes import parse_nodes
from labeler.topology.placement import level_keys, snapshot_from_dict, to_snapshot
from labeler.topology.snapshotfile import _checked, _Snapshot, parse_snapshot, read_snapshot
from providers.base import SourceContext
from providers.labels import discover


def discovered() -> dict:
    nodes = parse_nodes({"items": gke_cluster(blocks=3, subblocks=2, hosts=4)[0]}, "nodes")
    found = discover(SourceContext(nodes=nodes, options={"preset": "gke"}))
    return to_snapshot(found, level_keys(found.level_names)).to_dict()


def test_a_discovered_snapshot_takes_the_fast_path_and_reads_as_the_generic_reader_reads_it(tmp_path: Path) -> None:
    data = discovered()
    data["problems"] = [{"node": "n1", "source": "labels", "message": "m"}, {"source": "labels", "message": "m2"}]
    text = json.dumps(data)
    fast = _checked(msgspec.json.decode(text, type=_Snapshot), "snap")
    assert fast is not None and fast == snapshot_from_dict(json.loads(text), "snap")
    path = tmp_path / "snap.json"
    path.write_text(text)
    assert read_snapshot(str(path)) == fast
    assert all(len({id(v["block"]) for v in fast.nodes.values() if v["block"] == b}) == 1  # one string per domain
               for b in {v["block"] for v in fast.nodes.values()})


@pytest.mark.parametrize("change", ["yaml", "extra key", "node with an extra value", "levels in another order",
                                    "number value", "value with a newline"])
def test_what_the_fast_path_does_not_take_reads_as_before(change: str) -> None:
    data = discovered()
    first = next(iter(data["nodes"]))
    if change == "extra key":
        data["comment"] = {"by": "hand"}
    elif change == "node with an extra value":
        data["nodes"][first]["zone"] = "z"
    elif change == "levels in another order":
        data["nodes"][first] = dict(reversed(data["nodes"][first].items()))
    elif change == "number value":
        data["nodes"][first]["host"] = 7
    elif change == "value with a newline":
        data["nodes"][first]["host"] += "\n"  # is_valid_value's `$` takes it: the generic reader decides
    text = yaml.safe_dump(data) if change == "yaml" else json.dumps(data)
    generic = _outcome(lambda: snapshot_from_dict(load(text, "f"), "f"))
    assert _outcome(lambda: parse_snapshot(text.encode(), "f")) == generic


@pytest.mark.parametrize("where", ["an unknown key", "a node's values", "a problem", "the levels", "the top"])
def test_deep_nesting_anywhere_is_refused_in_one_line(where: str) -> None:
    deep = "[" * 200_000 + "]" * 200_000
    data = discovered()
    text = {"an unknown key": json.dumps({**data, "x": 0}).replace("0}", deep + "}"),
            "a node's values": json.dumps(data).replace('"host": "', '"zone": ' + deep + ', "host": "', 1),
            "a problem": json.dumps({**data, "problems": [{"node": 0}]}).replace("0}", deep + "}"),
            "the levels": json.dumps({**data, "levels": 0}).replace('"levels": 0', '"levels": ' + deep),
            "the top": deep}[where]
    with pytest.raises(InputError) as err:
        parse_snapshot(text.encode(), "snap.json")
    assert str(err.value) == f"snap.json: nested deeper than {MAX_DEPTH} levels"


def test_nesting_up_to_the_limit_in_an_unknown_key_is_read_as_before() -> None:
    data = discovered()
    text = json.dumps({**data, "x": 0}).replace("0}", "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "}")
    assert parse_snapshot(text.encode(), "f") == snapshot_from_dict(load(text, "f"), "f")


def _outcome(read) -> object:
    """A reader's snapshot, or its error's type and message."""
    try:
        return read()
    except Exception as exc:  # noqa: BLE001 - compared, not swallowed
        return type(exc).__name__, str(exc)
