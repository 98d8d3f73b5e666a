"""`-o json` into a pipe or file is written a slice at a time, and is byte for byte what one orjson call writes."""

from __future__ import annotations

import io

import orjson
import pytest
from hypothesis import given, settings, strategies as st

from topolabel import output

leaves = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=5)
values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner,
                                                                                        max_size=4), max_leaves=8)
tops = st.dictionaries(st.text(max_size=6), values | st.lists(values, max_size=12) |
                       st.dictionaries(st.text(max_size=4) | st.integers(0, 9), values, max_size=12), max_size=4)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(data=tops | st.lists(values, max_size=12) | values, size=st.integers(1, 5))
def test_pieces_join_to_what_one_orjson_call_writes(data: object, size: int) -> None:
    original = output.JSON_SLICE
    output.JSON_SLICE = size
    try:
        assert b"".join(output._json_pieces(data)) == orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS)
    finally:
        output.JSON_SLICE = original


def test_a_large_mapping_goes_out_in_slices_and_reads_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot's `nodes` (a mapping of 1,000,000 nodes at the largest) is never one buffer."""
    nodes = {f"n{i:05d}": {"block": f"b{i // 100}", "host": f"h{i}"} for i in range(12_345)}
    data = {"levels": [{"name": "block"}], "nodes": nodes, "problems": []}
    pieces = list(output._json_pieces(data))
    assert max(map(len, pieces)) < len(orjson.dumps(nodes)) / 2
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    output.emit(data, "json", out)
    out.flush()
    assert out.buffer.getvalue() == orjson.dumps(data) + b"\n"  # type: ignore[attr-defined]
