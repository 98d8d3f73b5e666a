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


class _Shown:
    """An item that says how it prints, as a plan's changes and problems do."""

    def __init__(self, i: int) -> None:
        self.i = i

    def to_dict(self) -> dict[str, object]:
        return {"node": f"n{self.i}", "set": {"k": str(self.i)}}


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("fmt", ["json", "json at a terminal", "yaml"])
def test_items_that_say_how_they_print_are_written_as_their_mappings(fmt: str, monkeypatch) -> None:
    """`emit` writes objects with `to_dict` (at the top or under a top-level key) as the plain data would be
    written, JSON into a pipe a slice at a time, so no list of all their mappings is made."""
    monkeypatch.setattr(output, "JSON_SLICE", 3)
    shown = [_Shown(i) for i in range(10)]
    with_objects = {"changes": shown, "unchanged": 2, "problems": [_Shown(99), {"plain": True}]}
    plain = {"changes": [s.to_dict() for s in shown], "unchanged": 2, "problems": [_Shown(99).to_dict(),
                                                                                   {"plain": True}]}
    written = []
    for data in (with_objects, plain, shown, [s.to_dict() for s in shown]):
        if fmt == "json":
            out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
            output.emit(data, "json", out)
            out.flush()
            written.append(out.buffer.getvalue())  # type: ignore[attr-defined]
        else:
            text = _Terminal() if fmt == "json at a terminal" else io.StringIO()
            output.emit(data, "json" if fmt != "yaml" else "yaml", text)
            written.append(text.getvalue())
    assert written[0] == written[1] and written[2] == written[3]
    assert "n9" in str(written[0]) and "n99" in str(written[0])
