"""The items of a JSON List file (`kubectl get nodes -o json`), cut out one at a time as raw JSON.

A live cluster's node list with full status is hundreds of MB, and decoding it whole takes several times its
size; a streaming parser that builds every item as dicts (ijson) spent most of a 100,000-node command. Here the
file is read in chunks and each element of the top-level `items` array is handed over as the bytes it spans,
for the caller to decode with msgspec into just the fields it reads, and drop, before the next is cut.

msgspec has no incremental decoder, but decoding from an item's first byte stops after that item and names the
next non-blank byte ("trailing characters (byte N)"): that is the item's end, found at C speed. The byte found
there must be what JSON allows after an array element or member (`,`, `]`, `}`), so a change in that message
could only ever fail a read loudly, never cut an item wrongly; the tests read every node file through here.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Iterator, Union

import msgspec

from .errors import InputError

CHUNK = 1 << 20  # bytes read at a time; an item longer than that is read in doubling steps
MAX_NESTING = 500  # msgspec stops at the interpreter's recursion limit (about 970); real node lists nest ~10 deep
_TRAILING = re.compile(r"trailing characters \(byte (\d+)\)$")
_AT_BYTE = re.compile(r"\(byte (\d+)\)$")
_TRUNCATED = "Input data was truncated"
RUN_TRIES = 3  # separator matches tried per run, from the last in the buffer back
SEPARATOR = 20  # bytes from a comma between elements that recur between others (`, {"apiVersion": "v1"`)
_TAIL = 16  # an error this close to the chunk's end may be a number, escape or UTF-8 sequence cut by it
_BLANK = re.compile(rb"[^ \t\r\n]")
_RAW = msgspec.json.Decoder(msgspec.Raw)
_KEY = msgspec.json.Decoder(str)
_RAWS = msgspec.json.Decoder(list[msgspec.Raw])

RawItem = Union[memoryview, msgspec.Raw]  # an item's JSON, for msgspec to decode


def too_deep(origin: str) -> InputError:
    return InputError(f"{origin}: nested deeper than {MAX_NESTING} levels")


class ListScanner:
    """A cursor over a JSON document read chunk by chunk: blank skipping, and whole values as raw bytes."""

    def __init__(self, file: BinaryIO, origin: str) -> None:
        self._file, self.origin = file, origin
        self._data, self._pos, self._eof, self._want = bytearray(), 0, False, CHUNK
        self._failed = -1  # where the last run that did not decode ended: no run is tried up to there again

    def peek(self) -> int:
        """The next non-blank byte, the cursor moved onto it; -1 at the end of the file."""
        while True:
            found = _BLANK.search(self._data, self._pos)
            if found:
                self._pos = found.start()
                return self._data[self._pos]
            self._pos = len(self._data)
            if not self._more():
                return -1

    def take(self, char: bytes) -> bool:
        """Step over `char` when it is the next non-blank byte."""
        if self.peek() != char[0]:
            return False
        self._pos += 1
        return True

    def value(self, followers: bytes) -> memoryview:
        """The next JSON value's bytes; the cursor moves onto the byte after it, which must be in `followers`."""
        self.peek()
        while True:
            view = memoryview(self._data)[self._pos:]
            try:
                _RAW.decode(view)
            except msgspec.DecodeError as exc:
                end = self._end(exc, view, followers)
                if end is not None:
                    self._pos += end
                    self._want = CHUNK
                    return view[:end]
            except RecursionError:
                raise too_deep(self.origin) from None
            if not self._more():
                raise InputError(f"{self.origin}: not valid JSON: the file ends inside a value")
            self._want *= 2  # a value longer than a chunk: fewer re-reads of its start

    def key(self) -> str:
        """An object member's name, the cursor moved past its colon."""
        raw = self.value(b":")
        self._pos += 1
        try:
            return _KEY.decode(raw)
        except msgspec.DecodeError:
            raise InputError(f"{self.origin}: not valid JSON: an object key that is not a string") from None

    def skip_member_value(self) -> None:
        self.value(b",}")

    def _end(self, exc: msgspec.DecodeError, view: memoryview, followers: bytes) -> int | None:
        """Where the value ends, from msgspec's complaint about what follows it; None: read more first."""
        message = str(exc)
        found = _TRAILING.search(message)
        if found:
            end = int(found.group(1)) - 1  # msgspec counts the byte it stopped on
            if 0 < end < len(view) and view[end] in followers:
                return end
            got = chr(view[end]) if 0 <= end < len(view) else "?"
            raise InputError(f"{self.origin}: not valid JSON: {got!r} after a value, expected one of "
                             f"{', '.join(repr(chr(c)) for c in followers)}")
        at = _AT_BYTE.search(message)
        if message == _TRUNCATED or (at and int(at.group(1)) >= len(view) - _TAIL and not self._eof):
            return None
        raise InputError(f"{self.origin}: not valid JSON: {message}")

    def _more(self) -> bool:
        """Append the next chunk, dropping what the cursor has passed; False at the end of the file."""
        if self._eof:
            return False
        chunk = self._file.read(self._want)
        if not chunk:
            self._eof = True
            return False
        keep = max(self._pos - 1, 0)  # the byte before the cursor too: `_run` borrows it for a bracket
        self._data = self._data[keep:] + chunk
        self._failed -= keep
        self._pos -= keep
        return True

    def find_items(self) -> bool:
        """Move into the top-level object's `items` array; False when the document has none (the cursor is then
        anywhere: read the file another way)."""
        if not self.take(b"{"):
            return False
        while self.peek() == ord('"'):
            if self.key() == "items":
                return self.take(b"[")
            self.skip_member_value()
            if not self.take(b","):
                return False
        return False

    def items(self) -> Iterator[RawItem]:
        """Each element of the array the cursor is in; then the rest of the document is checked to be JSON."""
        if not self.take(b"]"):
            yield from self._elements()
        while self.take(b","):
            self.key()
            self.skip_member_value()
        if not self.take(b"}") or self.peek() != -1:
            raise InputError(f"{self.origin}: not valid JSON: unexpected content after the items")

    def _elements(self) -> Iterator[RawItem]:
        """The array's elements: cut one by one until the bytes between two of them are known, then in runs
        (`_run`) wherever those bytes recur, falling back to one by one where a run does not check out."""
        separator = b""
        while True:
            run = self._run(separator) if separator else []
            yield from run
            if run:
                continue
            yield self.value(b",]")
            if self._data[self._pos] == ord("]"):
                self._pos += 1
                return
            comma = self._pos
            self._pos += 1
            if not separator and len(self._data) > comma + SEPARATOR:
                separator = bytes(self._data[comma:comma + SEPARATOR])  # the comma, blanks, the next element's start

    def _run(self, separator: bytes) -> list[msgspec.Raw]:
        """The elements from the cursor up to the last `separator` in the buffer, cut by one decode of them as
        an array, the cursor moved past that separator's comma. A decode can only succeed at a real boundary
        (a cut inside an element leaves an incomplete value); where it fails, the separator matched inside an
        element, so the match before it is tried, RUN_TRIES times at most, then [] (cut one by one, which also
        says where a malformed file goes wrong)."""
        if len(self._data) - self._pos < CHUNK // 2:
            self._more()
        end = len(self._data)
        for _ in range(RUN_TRIES):
            end = self._data.rfind(separator, self._pos, end)
            if end <= max(self._pos, self._failed):
                return []
            run = self._array_at(end)
            if run is not None:
                self._pos = end + 1
                return run
        self._failed = end
        return []

    def _array_at(self, end: int) -> list[msgspec.Raw] | None:
        """The elements from the cursor to `end` (a comma), decoded in place as an array: the byte before the
        cursor and the comma stand in for its brackets during the decode (no copy of the buffer); None when
        they do not decode. The cursor always follows a separator's comma here, and `_more` keeps the byte
        before it."""
        data, start = self._data, self._pos - 1
        before, after = data[start], data[end]
        data[start], data[end] = ord("["), ord("]")
        try:
            return _RAWS.decode(memoryview(data)[start:end + 1])
        except (msgspec.DecodeError, RecursionError):
            return None
        finally:
            data[start], data[end] = before, after


@contextmanager
def raw_items(source: str | Path | BinaryIO, origin: str | None = None) -> Iterator[Iterator[RawItem] | None]:
    """The raw items of a JSON file's (or an open binary stream's) top-level `items` array, streamed; None
    when it has no such array."""
    origin = origin or str(source)
    try:
        with (open(source, "rb") if isinstance(source, (str, Path)) else source) as file:
            scanner = ListScanner(file, origin)
            yield scanner.items() if scanner.find_items() else None
    except OSError as exc:
        raise InputError(f"{origin}: cannot read: {exc.strerror or exc}") from None


def decode(raw: RawItem, origin: str) -> Any:
    """One raw item as plain data (dicts, lists, strings, numbers)."""
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise InputError(f"{origin}: not valid JSON: {exc}") from None
    except RecursionError:
        raise too_deep(origin) from None
