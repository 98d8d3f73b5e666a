"""The bulk reading of `ibnetdiscover` text a slice at a time reads what the line-by-line reading reads.

Captures span many slices here (`_SLICE` characters each), so records on both sides of every cut, and a
record line the bulk reading cannot read far past the first slice, are read or refused as one reading of the
whole text would."""

from __future__ import annotations

import os
import threading
from functools import cache
from pathlib import Path
from typing import Callable

import pytest

from hack.ibfabric import Spec, build
from labeler.errors import InputError, SourceError
from providers.infiniband import parse
from providers.infiniband.fabric import Fabric
from providers.infiniband.parse import _build, _LineRecords, parse_ibnetdiscover, read_ibnetdiscover
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
    assert _build(parse._bulk_records(text), {}) == by_lines
    assert parse_ibnetdiscover(text, name) == by_lines


def test_a_line_the_bulk_reading_cannot_read_is_named_by_its_number_past_the_first_slice(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parse, "_SLICE", 256)
    lines = captures()["rail"].splitlines()
    at = [i for i, line in enumerate(lines) if line.startswith("[")][-3]  # near the end: dozens of slices on
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


def whole_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files `read_ibnetdiscover` reads whole, as it reads them."""
    reads: list[str] = []
    real = parse.read_text
    monkeypatch.setattr(parse, "read_text", lambda path: reads.append(str(path)) or real(path))
    return reads


@pytest.mark.parametrize("name", sorted(captures()))
@pytest.mark.parametrize("size", [97, 4096, None])
@pytest.mark.parametrize("ends", ["\n", "\r\n"], ids=["LF", "CRLF"])
def test_a_saved_capture_is_read_from_its_file_a_slice_at_a_time(name: str, size: int | None, ends: str,
                                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never whole: the file is read a slice at a time, records across every cut, and read as its text is."""
    text = captures()[name].replace("\n", ends)
    (tmp_path / "capture").write_bytes(text.encode())
    if size is not None:
        monkeypatch.setattr(parse, "_SLICE", size)
    reads = whole_reads(monkeypatch)
    assert read_ibnetdiscover(str(tmp_path / "capture")) == _build(_LineRecords(text, name), {})
    assert reads == []


@pytest.mark.parametrize("change", ["spaced", "unreadable", "NEL in a description", "not UTF-8"])
def test_a_file_the_slices_cannot_read_is_read_again_whole_and_line_by_line(change: str, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """As `parse_ibnetdiscover` reads its text, errors naming the file and its line, or its byte."""
    monkeypatch.setattr(parse, "_SLICE", 256)
    lines = captures()["rail"].splitlines()
    at = [i for i, line in enumerate(lines) if line.startswith("[")][-3]  # a port line, dozens of slices on
    lines[at] = {"spaced": lines[at].replace("\t", "  ", 1), "unreadable": "[x" + lines[at],
                 "NEL in a description": lines[at].replace(' "', ' "\x85', 1),
                 "not UTF-8": lines[at]}[change]
    data = ("\n".join(lines) + "\n").encode()
    if change == "not UTF-8":
        data = data.replace(lines[at].encode(), lines[at].encode() + b"\xff", 1)
    path = tmp_path / "capture"
    path.write_bytes(data)
    reads = whole_reads(monkeypatch)
    got = outcome(lambda: read_ibnetdiscover(str(path)))
    assert got == outcome(lambda: parse_ibnetdiscover(parse.read_text(path), str(path)))
    assert data != captures()["rail"].encode()
    assert reads == [str(path)] * (1 if change == "not UTF-8" else 2)  # again whole (an error is said at once)
    if change == "unreadable":
        assert got == f"SourceError: {path}:{at + 1}: cannot read port line {lines[at][:100]!r}"
    if change == "not UTF-8":
        bad = data.index(b"\xff")
        assert got == f"InputError: {path}: not UTF-8 text (byte {bad} is 0xff)"


def outcome(read: Callable[[], Fabric]) -> Fabric | str:
    """What `read` gives, or the error it raises as `Kind: message`."""
    try:
        return read()
    except (SourceError, InputError) as exc:
        return f"{type(exc).__name__}: {exc}"


def test_a_capture_from_a_pipe_is_read_whole_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A FIFO could not be read a second time: it is read whole, once."""
    text = captures()["rail"]
    os.mkfifo(tmp_path / "fifo")
    writer = threading.Thread(target=(tmp_path / "fifo").write_text, args=(text,), daemon=True)
    writer.start()
    reads = whole_reads(monkeypatch)
    assert read_ibnetdiscover(str(tmp_path / "fifo")) == parse_ibnetdiscover(text, "fifo")
    writer.join(10)
    assert reads == [str(tmp_path / "fifo")]
