"""The bulk reading of `ibnetdiscover` text a slice at a time reads what the line-by-line reading reads.

Captures span many slices here (`_SLICE` characters each), so records on both sides of every cut, and a
record line the bulk reading cannot read far past the first slice, are read or refused as one reading of the
whole text would."""

from __future__ import annotations

from functools import cache

import pytest

from hack.ibfabric import Spec, build
from labeler.errors import SourceError
from providers.infiniband import parse
from providers.infiniband.parse import _build, _LineRecords, parse_ibnetdiscover
from testkit.environment import SHARED


@cache  # built once: collection and every test read the same texts
def captures() -> dict[str, str]:
    texts = {"rail": build(Spec(rails=8, hosts=32, spines=16, uplinks=2, cores=8, pods=2, sus=2)).capture_text(
        switches_first=True)}
    ndr = SHARED / "fabrics" / "ndr-582ca.ibnetdiscover"
    if ndr.exists():
        texts["ndr"] = ndr.read_text()
    return texts


@pytest.mark.parametrize("name", sorted(captures()))
@pytest.mark.parametrize("size", [1, 97, 4096, None])
def test_every_slice_size_reads_what_the_lines_read(name: str, size: int | None,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    text = captures()[name]
    by_lines = _build(_LineRecords(text, name), {})
    if size is not None:
        monkeypatch.setattr(parse, "_SLICE", size)
        assert len(text) > 50 * size  # many cuts
    records = parse._bulk_records(text)
    assert records is not None
    assert _build(records, {}) == by_lines
    assert parse_ibnetdiscover(text, name) == by_lines


def test_a_line_the_bulk_reading_cannot_read_is_named_by_its_number_past_the_first_slice(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parse, "_SLICE", 256)
    lines = captures()["rail"].splitlines()
    at = max(i for i, line in enumerate(lines) if line.startswith("[")) - 3  # near the end: dozens of slices on
    lines[at] = lines[at].replace("\t", "  ", 1)  # two spaces: the lines read it, the bulk reading does not
    spaced = "\n".join(lines) + "\n"
    assert parse_ibnetdiscover(spaced, "f") == _build(_LineRecords(spaced, "f"), {})
    lines[at] = "[x" + lines[at]
    with pytest.raises(SourceError, match=rf"^f:{at + 1}: cannot read port line"):
        parse_ibnetdiscover("\n".join(lines) + "\n", "f")


@pytest.mark.parametrize("kind", ["[", "Switch"])
def test_a_description_left_open_is_refused_though_a_later_line_would_close_it(kind: str) -> None:
    """The bulk reading lets a description run to the next quote, past its line's end; it must refuse the
    record then, so that the line-by-line reading names the line, as it does any other it cannot read."""
    lines = captures()["rail"].splitlines()
    at = max(i for i, line in enumerate(lines) if line.startswith(kind))  # past the first slice
    lines[at] = lines[at][:lines[at].rindex('"')] + lines[at][lines[at].rindex('"') + 1:]  # its closing quote
    closing = '# a note" lid 5 4xHDR' if kind == "[" else '# a note"'  # closes what the record left open
    lines.insert(at + 1, closing)
    with pytest.raises(SourceError, match=rf"^f:{at + 1}: cannot read (port|node) line"):
        parse_ibnetdiscover("\n".join(lines) + "\n", "f")
