"""The items of a JSON List file (`kubectl get nodes -o json`), cut out one at a time as raw JSON.

A live cluster's node list with full status is hundreds of MB, and decoding it whole takes several times its
size; a streaming parser that builds every item as dicts (ijson) spent most of a 100,000-node command. Here the
file is read in chunks and each element of the top-level `items` array is handed over as the bytes it spans,
for the caller to decode with msgspec into just the fields it reads, and drop, before the next is cut.

msgspec has no incremental decoder. Once the bytes between two items are known, whole runs of items are cut by
one decode of the buffer as an array of `msgspec.Raw` (a decode succeeds only at a real boundary). Elsewhere (the
first and last items, the members around the list, a run that does not check out) a scanner finds where the
next value ends: one regular expression matches a whole array or object nested up to `_FAST_DEPTH` deep, strings
skipped whole; anything else (deeper, cut by the buffer's end, malformed) is walked bracket by bracket, the
nesting bounded. Every value cut either way is then decoded by msgspec, so what the scanner finds is only ever
taken when it is one whole JSON value, followed by what JSON allows after an array element or member (`,`, `]`,
`}`). Only msgspec's documented behaviour is relied on: decoding succeeds or raises DecodeError.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator, Union

import msgspec

from ..errors import InputError

CHUNK = 1 << 20  # bytes read at a time; an item longer than that is read in doubling steps
MAX_NESTING = 500  # deeper values are refused (msgspec would stop at the recursion limit, ~970); node lists nest ~10
RUN_TRIES = 3  # separator matches tried per run, from the last in the buffer back
SEPARATOR = 20  # bytes from a comma between elements that recur between others (`, {"apiVersion": "v1"`)
_BLANK = re.compile(rb"[^ \t\r\n]")
_STRUCTURE = re.compile(rb'["\[\]{}]')  # inside an array or object, the next byte that matters to its end
_STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # after an opening quote, up to the closing one
_SCALAR_END = re.compile(rb"[ \t\r\n,:\]}]")  # a number, true, false or null ends before one of these
_FAST_DEPTH = 16  # arrays and objects nested this deep are matched at once (node lists nest about 10 deep)


def _container(depth: int) -> re.Pattern[bytes]:
    """An array or object with its brackets balanced up to `depth` levels, strings skipped whole. Which bracket
    closes which is not checked (a valid document pairs them; msgspec checks the cut), and the quantifiers are
    possessive, so a failed match never backtracks."""
    string, other = rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"', rb'[^"{}\[\]]*+'
    pattern = rb"[\[{]" + other + rb"(?:" + string + other + rb")*+[\]}]"
    for _ in range(depth - 1):
        pattern = rb"[\[{]" + other + rb"(?:(?:" + string + rb"|" + pattern + rb")" + other + rb")*+[\]}]"
    return re.compile(pattern, re.DOTALL)


_CONTAINER = _container(_FAST_DEPTH)
_RAW = msgspec.json.Decoder(msgspec.Raw)
_KEY = msgspec.json.Decoder(str)
_RAWS = msgspec.json.Decoder(list[msgspec.Raw])

RawItem = Union[memoryview, msgspec.Raw]  # an item's JSON, for msgspec to decode
# A caller's own decoding of a run of items, the bytes of a JSON array: its items as the caller keeps them,
# or None when the array holds an item it does not take (the run is then handed over as raw items). It must
# raise msgspec.DecodeError when the bytes are not one JSON array, as a msgspec decode of them does.
RunDecoder = Callable[[memoryview], "list[Any] | None"]


def too_deep(origin: str) -> InputError:
    return InputError(f"{origin}: nested deeper than {MAX_NESTING} levels")


class ListScanner:
    """A cursor over a JSON document read chunk by chunk: blank skipping, and whole values as raw bytes."""

    def __init__(self, file: BinaryIO, origin: str, runs: RunDecoder | None = None) -> None:
        self._file, self.origin, self._runs = file, origin, runs
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
        """The next JSON value's bytes, checked by msgspec; the cursor moves onto the next non-blank byte after
        it, which must be in `followers`."""
        self.peek()
        while (end := value_end(self._data, self._pos, self._eof, self.origin)) is None:
            if not self._more():
                raise InputError(f"{self.origin}: not valid JSON: the file ends inside a value")
            self._want *= 2  # a value longer than a chunk: fewer re-scans of its start
        self._want = CHUNK
        raw = memoryview(self._data)[self._pos:end]
        try:
            _RAW.decode(raw)
        except msgspec.DecodeError as exc:
            raise InputError(f"{self.origin}: not valid JSON: {exc}") from None
        except RecursionError:
            raise too_deep(self.origin) from None
        self._pos = end
        after = self.peek()  # may read on: `raw` keeps the buffer it points into
        if after == -1:
            raise InputError(f"{self.origin}: not valid JSON: the file ends inside a value")
        if after not in followers:
            raise InputError(f"{self.origin}: not valid JSON: {chr(after)!r} after a value, expected one of "
                             f"{', '.join(repr(chr(c)) for c in followers)}")
        return raw

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

    def items(self) -> Iterator[Any]:
        """Each element of the array the cursor is in; then the rest of the document is checked to be JSON."""
        if not self.take(b"]"):
            yield from self._elements()
        while self.take(b","):
            self.key()
            self.skip_member_value()
        if not self.take(b"}") or self.peek() != -1:
            raise InputError(f"{self.origin}: not valid JSON: unexpected content after the items")

    def _elements(self) -> Iterator[Any]:
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

    def _run(self, separator: bytes) -> list[Any]:
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

    def _array_at(self, end: int) -> list[Any] | None:
        """The elements from the cursor to `end` (a comma), decoded in place as an array: the byte before the
        cursor and the comma stand in for its brackets during the decode (no copy of the buffer); None when
        they do not decode. The cursor always follows a separator's comma here, and `_more` keeps the byte
        before it. With the caller's `runs`, the run is decoded its way, in the one pass that also checks the
        cut (a node list: no pass to cut the items and another to decode each), raw where it declines."""
        data, start = self._data, self._pos - 1
        before, after = data[start], data[end]
        data[start], data[end] = ord("["), ord("]")
        view = memoryview(data)[start:end + 1]
        try:
            found = None if self._runs is None else self._runs(view)
            return _RAWS.decode(view) if found is None else found
        except (msgspec.DecodeError, RecursionError):
            return None
        finally:
            data[start], data[end] = before, after


def value_end(data: bytearray, start: int, eof: bool, origin: str) -> int | None:
    """Where the JSON value starting at `start` ends (the index after it), by its brackets and strings alone;
    None when `data` ends first and more may follow. Whether the bytes are a JSON value is msgspec's to say."""
    if start >= len(data):
        return None
    first = data[start]
    if first == 0x22:  # '"'
        found = _STRING_REST.match(data, start + 1)
        return found.end() if found else None
    if first not in b"[{":
        found = _SCALAR_END.search(data, start)
        end = found.start() if found else (len(data) if eof else None)
        if end == start:
            raise InputError(f"{origin}: not valid JSON: {chr(first)!r} where a value belongs")
        return end
    whole = _CONTAINER.match(data, start)
    return whole.end() if whole else walk(data, start, origin)


def walk(data: bytearray, start: int, origin: str) -> int | None:
    """`value_end` for an array or object, bracket by bracket: for what the one expression does not match."""
    depth, at = 0, start
    while found := _STRUCTURE.search(data, at):
        byte, at = data[found.start()], found.end()
        if byte == 0x22:
            string = _STRING_REST.match(data, at)
            if string is None:
                return None
            at = string.end()
        elif byte in b"[{":
            depth += 1
            if depth > MAX_NESTING:
                raise too_deep(origin)
        else:
            depth -= 1
            if depth == 0:
                return at
    return None


@contextmanager
def raw_items(source: str | Path | BinaryIO, origin: str | None = None,
              runs: RunDecoder | None = None) -> Iterator[Iterator[Any] | None]:
    """The raw items of a JSON file's (or an open binary stream's) top-level `items` array, streamed; None
    when it has no such array. With `runs`, runs of items come as it decodes them (RunDecoder)."""
    origin = origin or str(source)
    try:
        with (open(source, "rb") if isinstance(source, (str, Path)) else source) as file:
            scanner = ListScanner(file, origin, runs)
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
