"""The streamed JSON List reader (`labeler.io.jsonlist`) and the typed node records read through it.

The reader cuts each item of a List out of a file read in chunks, so it is held to what `json.loads` makes of
the same bytes for any JSON-shaped list, any layout and any chunk size (items and strings cut anywhere across
chunks); malformed files are one-line errors. The typed node path must give exactly the records the checked
field-by-field path gives, and leave every node it does not recognise to that path.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings, strategies as st

from hack.synth import full_status, gke_cluster, node_list
from labeler.errors import InputError
from labeler.io import jsonlist
from labeler.io.nodes import NodeReader, load_nodes_file, parse_nodes, read_items

scalars = st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text(max_size=12) | \
    st.floats(allow_nan=False, allow_infinity=False)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6),
                                                                                            inner, max_size=4),
                      max_leaves=12)


def streamed(path: Path) -> list | None:
    with jsonlist.raw_items(path) as items:
        return None if items is None else [json.loads(bytes(raw)) for raw in items]


@settings(max_examples=150, deadline=None, derandomize=True)
@given(items=st.lists(values, max_size=6), before=st.dictionaries(st.sampled_from(["kind", "metadata", "a"]), values),
       after=st.dictionaries(st.sampled_from(["apiVersion", "z"]), values), indent=st.sampled_from([None, 0, 2]),
       chunk=st.integers(1, 64))
def test_items_are_what_json_reads_for_any_layout_and_chunk(items: list, before: dict, after: dict,
                                                             indent: int | None, chunk: int, tmp_path_factory) -> None:
    path = tmp_path_factory.mktemp("l") / "list.json"
    path.write_text(json.dumps({**before, "items": items, **after}, indent=indent))
    original = jsonlist.CHUNK
    jsonlist.CHUNK = chunk
    try:
        assert streamed(path) == items
    finally:
        jsonlist.CHUNK = original


def test_an_item_many_chunks_long_and_members_around_the_list(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(jsonlist, "CHUNK", 16)
    big = {"s": "x" * 5000, "escaped": 'a "quoted" ] }, { string', "n": [1.5, -2e3, True, None]}
    text = '{"metadata": {"items": "not these"}, "items" : [ %s ,\n{"b": "}"}\t] , "kind": "List"}' % json.dumps(big)
    path = tmp_path / "list.json"
    path.write_text(text)
    assert streamed(path) == [big, {"b": "}"}]


@pytest.mark.parametrize("chunk", [16, 256, 1 << 20])
def test_runs_of_items_are_cut_only_at_real_boundaries(chunk: int, tmp_path: Path, monkeypatch) -> None:
    """After two items the bytes between items are known and whole runs are cut at once wherever they recur;
    where the same bytes recur inside an item (a nested list of item-shaped objects) the run does not decode
    and is cut one item at a time."""
    monkeypatch.setattr(jsonlist, "CHUNK", chunk)
    items: list[dict] = [{"kind": "Node", "n": i} for i in range(400)]
    for i in (150, 399):
        items[i] = {"kind": "Node", "n": i, "nested": [{"kind": "Node", "n": 1}, {"kind": "Node", "n": 2}]}
    path = tmp_path / "list.json"
    path.write_text(json.dumps({"items": items}))
    runs = {"cut": 0, "refused": 0}

    class Counted:
        def decode(self, data: bytes) -> list:
            try:
                got = decoder.decode(data)
            except msgspec.DecodeError:
                runs["refused"] += 1
                raise
            runs["cut"] += 1
            return got

    decoder = jsonlist._RAWS
    monkeypatch.setattr(jsonlist, "_RAWS", Counted())
    assert streamed(path) == items
    assert runs["cut"] and (runs["refused"] or chunk == 16)  # 16-byte chunks hold no false match whole


def test_a_malformed_item_inside_a_run_is_reported(tmp_path: Path) -> None:
    good = json.dumps({"items": [{"name": f"n-{i}"} for i in range(2000)]})
    path = tmp_path / "list.json"
    path.write_text(good.replace('"n-1500"}', '"n-1500" "oops"}'))
    with pytest.raises(InputError, match="not valid JSON"):
        list(read_items(path, "Node"))


@pytest.mark.parametrize("text", ['{"kind": "Node"}', '{"items": {}}', '{"items": null}', '{}', '[{"a": 1}]'])
def test_documents_without_an_items_array_are_left_to_the_whole_reader(text: str, tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_text(text)
    assert streamed(path) is None


@pytest.mark.parametrize("text, problem", [
    ('{"items": [{"a": 1} {"b": 2}]}', "'{' after a value"),
    ('{"items": [{"a": 1},]}', "not valid JSON"),
    ('{"items": [{"a": 1}', "the file ends inside a value"),
    ('{"items": [{"a": "unterminated', "the file ends inside a value"),
    ('{"items": [{"a": 1}]} trailing', "unexpected content after the items"),
    ('{"items": [{"a": 1}], "kind": }', "not valid JSON"),
    ('{"items": [{"a": tru}]}', "not valid JSON"),
    ('{"items": [{"a": 1}]', "unexpected content after the items"),
])
def test_malformed_lists_are_one_line_errors_naming_the_file(text: str, problem: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        list(read_items(path, "Node"))
    message = str(err.value)
    assert message.startswith(f"{path}: ") and problem in message and "\n" not in message


def test_deep_nesting_in_an_item_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"items": [' + "[" * 5000 + "]" * 5000 + "]}")
    with pytest.raises(InputError, match=f"nested deeper than {jsonlist.MAX_NESTING} levels"):
        list(read_items(path, "Node"))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(value=values, indent=st.sampled_from([None, 0, 2]), after=st.sampled_from([",", "]", "}", ":", " ,", "\n]"]))
def test_the_scanner_ends_a_value_where_json_does(value: object, indent: int | None, after: str) -> None:
    """`value_end` finds the end of any JSON value from its brackets and strings alone, and says "read more"
    (None) for every shorter prefix of an array, object or string, where the value is not complete yet."""
    text = json.dumps(value, indent=indent).encode()
    data = bytearray(text + after.encode())
    assert jsonlist.value_end(data, 0, False, "x") == len(text)
    assert jsonlist.value_end(bytearray(text), 0, True, "x") == len(text)
    if text[:1] in (b"[", b"{"):  # the bracket-by-bracket walk agrees with the one expression
        assert jsonlist.walk(data, 0, "x") == len(text)
    if text[:1] in (b"[", b"{", b'"'):
        assert all(jsonlist.value_end(bytearray(text[:cut]), 0, False, "x") is None for cut in range(len(text)))


@pytest.mark.parametrize("text", [r'"a \" ] } ,"', r'"\\"', r'"\\\""', '"é ✓ \\u2713"'])
def test_the_scanner_reads_escapes_and_utf8_in_strings(text: str) -> None:
    data = bytearray(text.encode() + b", 1")
    assert jsonlist.value_end(data, 0, False, "x") == len(text.encode())
    assert json.loads(bytes(data[:len(text.encode())])) == json.loads(text)


def test_values_nested_deeper_than_the_one_expression_are_walked() -> None:
    deep = jsonlist._FAST_DEPTH + 5
    text = ('{"a": [' * deep + '"x]}", 1' + "]}" * deep).encode()
    assert jsonlist._CONTAINER.match(text) is None
    assert jsonlist.value_end(bytearray(text + b", 2"), 0, False, "x") == len(text)
    assert json.loads(text)


def test_deeper_than_max_nesting_is_refused_by_the_scanner_before_msgspec_sees_it() -> None:
    most = jsonlist.MAX_NESTING
    assert jsonlist.value_end(bytearray(b"[" * most + b"]" * most), 0, True, "x") == 2 * most
    with pytest.raises(InputError, match=f"^x: nested deeper than {most} levels$"):
        jsonlist.value_end(bytearray(b"[" * (most + 1)), 0, False, "x")


def checked_records(items: list[dict]) -> list:
    reader = NodeReader("nodes")
    for item in items:
        reader.add(item)
    return reader.done()


def test_typed_records_equal_the_checked_ones_for_real_shaped_nodes(tmp_path: Path) -> None:
    items, _ = gke_cluster(blocks=2, subblocks=2, hosts=3)
    items = [full_status(item) for item in items]
    items[0]["spec"]["unschedulable"] = True
    items[1]["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    items[2]["metadata"]["annotations"] = {"topolabel.dev/managed-labels": "a,b"}
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps(node_list(items)))
    assert load_nodes_file(path) == checked_records(items) == parse_nodes(node_list(items), "x")


ODD = [
    {"metadata": {"name": "n", "labels": None}},
    {"metadata": {"name": "n", "labels": {"gpu": 8}}},
    {"metadata": {"name": "n"}, "spec": {"unschedulable": "yes"}},
    {"metadata": {"name": "n"}, "spec": {"providerID": None, "taints": None}},
    {"metadata": {"name": "n"}, "status": {"conditions": [None, {"type": "Ready", "status": "True"}]}},
    {"metadata": {"name": "n"}, "status": {"conditions": [{"type": 1}]}},
    {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": 8}}},  # valid JSON for the run, not for a Node
]


@pytest.mark.parametrize("odd", ODD)
def test_nodes_of_unusual_types_take_the_checked_path(odd: dict, tmp_path: Path) -> None:
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps({"items": [odd]}))
    try:
        expected = checked_records([odd])
    except InputError as exc:
        with pytest.raises(InputError, match=f"^{path}: " + str(exc).split(": ", 1)[1].replace("(", r"\(")):
            load_nodes_file(path)
    else:
        assert load_nodes_file(path) == expected


@pytest.mark.parametrize("odd", [*ODD, {"kind": "Pod", "metadata": {"name": "p"}}, {"metadata": {"labels": {}}}, 7])
def test_an_unusual_item_inside_a_run_sends_its_run_the_checked_way(odd: object, tmp_path: Path,
                                                                      monkeypatch) -> None:
    """Runs of items are decoded straight into records (`NodeReader.run`); one item that is not of the usual
    shape inside a run leaves the run to the item-by-item reading, whose records or message are the same."""
    monkeypatch.setattr(jsonlist, "CHUNK", 4096)  # many runs, one of them holding the odd item
    items, _ = gke_cluster(blocks=1, subblocks=2, hosts=40)
    items = [*items[:50], odd, *items[50:]]
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps(node_list(items)))
    runs = {"typed": 0, "declined": 0}
    reader_run = NodeReader.run

    def counted(self: NodeReader, array: memoryview) -> list | None:
        found = reader_run(self, array)
        runs["typed" if found is not None else "declined"] += 1
        return found

    monkeypatch.setattr(NodeReader, "run", counted)
    try:
        expected = checked_records(items)  # type: ignore[arg-type]
    except InputError as exc:
        with pytest.raises(InputError, match=f"^{path}: " + re.escape(str(exc).split(": ", 1)[1])):
            load_nodes_file(path)
    else:
        assert load_nodes_file(path) == expected
    assert runs["typed"] and runs["declined"]


@pytest.mark.parametrize("odd, problem", [
    ({"metadata": {"labels": {}}}, "a Node without metadata.name"),
    ({"kind": "Pod", "metadata": {"name": "p"}}, "item 0 is a Pod, not a Node"),
    (7, "item 0 is not an object"),
])
def test_items_that_are_not_nodes_are_refused_as_before(odd: object, problem: str, tmp_path: Path) -> None:
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps({"items": [odd]}))
    with pytest.raises(InputError, match=problem):
        load_nodes_file(path)
