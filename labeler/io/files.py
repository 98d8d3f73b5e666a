"""Files in and out: text read as strict UTF-8, and writes that never leave a file half written.

Every file topolabel writes for a user (a job rewritten in place, Kueue YAML, exports, an SVG) goes to a
temporary file in the same directory, is flushed to disk, and only then renamed over the target. On a full
disk or a file-size limit the rename never happens: the user's file stays byte-identical and the command
reports one line. A set of files is written the same way: every temporary file first, then the renames.
"""

from __future__ import annotations

import os
import stat
import sys
from typing import TYPE_CHECKING, BinaryIO, Iterable, Iterator, Mapping

from ..errors import InputError, OutputError

if TYPE_CHECKING:  # pathlib loads where files are written (start-up time of commands that only read)
    from pathlib import Path

MAX_INPUT_BYTES = 1 << 30  # no input topolabel reads is near 1 GiB; /dev/zero and the like are


def read_text(path: str | Path) -> str:
    """A text file (or '-' for stdin) as a string; unreadable, too large or non-UTF-8 input is an
    `InputError` naming the file."""
    return text_of(read_bytes(path), str(path))


def read_bytes(path: str | Path) -> bytes:
    """A file (or '-' for stdin) as it is, for decoders that read bytes; unreadable or too large input is an
    `InputError` naming the file."""
    name = str(path)
    try:
        if str(path) == "-":  # a text stream without bytes underneath (a test's StringIO) is UTF-8 already
            stdin = sys.stdin
            data = _bounded_read(stdin.buffer) if hasattr(stdin, "buffer") else stdin.read().encode()
        else:
            with open(path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if size > MAX_INPUT_BYTES:  # refused before reading any of it
                    raise _too_large(name)
                data = _bounded_read(handle, size)
    except OSError as exc:
        raise _unreadable(name, exc) from None
    if len(data) > MAX_INPUT_BYTES:
        raise _too_large(name)
    return data


def _too_large(name: str) -> InputError:
    return InputError(f"{name}: larger than {MAX_INPUT_BYTES >> 20} MiB")


def _unreadable(name: str, exc: OSError) -> InputError:
    return InputError(f"{name}: cannot read: {exc.strerror or exc}")


def _bounded_read(stream: BinaryIO, size: int = 0) -> bytes:
    """At most MAX_INPUT_BYTES + 1 bytes of `stream`: the `size` its file says it has at once, then the rest (a
    pipe's, a growing file's) a MiB at a time. One read of the whole bound would reserve a GiB up front, which a
    memory-limited process (a container) cannot; a file read in chunks is copied once more to join them, and
    that copy was a quarter of the memory a 17 MB `ibnetdiscover` capture's reading touched (issue 33)."""
    chunks = [stream.read(size + 1)] if size else []
    left = MAX_INPUT_BYTES + 1 - sum(map(len, chunks))
    while left > 0:
        chunk = stream.read(min(1 << 20, left))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def text_slices(path: str | Path, size: int) -> Iterator[str]:
    """A UTF-8 file's text in slices of whole lines, for readers that find records by the line ends around them
    without holding the whole text: each slice runs from the line end before its first line to the one after
    its last (the file's first and last lines get one added), and the next slice starts at that line end. Each
    read is `size` bytes; a line longer than that is read whole. Unreadable, too large or non-UTF-8 input is an
    `InputError` naming the file, raised when it is reached. A 17 MB `ibnetdiscover` capture read whole held
    its bytes and its text at once: a fifth of its discovery's page faults (issue 33)."""
    name = str(path)
    try:
        with open(path, "rb") as handle:
            if os.fstat(handle.fileno()).st_size > MAX_INPUT_BYTES:  # refused before reading any of it
                raise _too_large(name)
            carry, start, total = b"\n", 0, 0  # start: the file offset of carry[1]
            while data := handle.read(size):
                total += len(data)
                if total > MAX_INPUT_BYTES:
                    raise _too_large(name)
                carry += data
                cut = carry.rfind(b"\n")
                if cut > 0:
                    yield text_of(memoryview(carry)[:cut + 1], name, start - 1)
                    carry, start = carry[cut:], start + cut
            yield text_of(carry + b"\n", name, start - 1)
    except OSError as exc:
        raise _unreadable(name, exc) from None


def text_of(data: bytes | memoryview, name: str, offset: int = 0) -> str:
    """`data` read from the file `name` (at byte `offset` of it), as strict UTF-8 text."""
    try:
        return str(data, "utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{name}: not UTF-8 text (byte {offset + exc.start} is 0x{data[exc.start]:02x})") from None


def write_atomic(path: str | Path, text: str) -> None:
    """Replace `path` with `text` all at once (through a symlink, its target), or raise `OutputError`. Only a
    regular file or a new path is written: a device, FIFO, socket or directory is refused, never replaced."""
    from pathlib import Path

    target = Path(os.path.realpath(path))
    write_files(target.parent, {target.name: text})


def write_files(directory: Path, files: Mapping[str, str], remove: Iterable[str] = ()) -> None:
    """Write `files` (name -> text) into `directory` and remove `remove`, all or nothing.

    Each file is written to a temporary file beside its target and synced; only when all of them are
    on disk are they renamed into place, then the removed files go. A failure before the renames leaves
    the directory as it was.
    """
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{directory}: cannot create the directory: {exc.strerror or exc}") from None
    for name in files:
        _check_target(directory / name)
    staged: list[tuple[str, Path]] = []
    try:
        for name, text in files.items():
            staged.append((name, _stage(directory / name, text)))
    except OSError as exc:
        _discard(temp for _, temp in staged)
        raise OutputError(f"{directory / name}: cannot write: {exc.strerror or exc}; nothing was changed") from None
    renamed = 0
    try:
        for name, temp in staged:
            os.replace(temp, directory / name)
            renamed += 1
        for name in remove:
            (directory / name).unlink(missing_ok=True)
        _sync_dir(directory)
    except OSError as exc:
        _discard(temp for _, temp in staged[renamed:])
        raise OutputError(f"{directory}: cannot finish writing: {exc.strerror or exc}") from None


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def _check_target(target: Path) -> None:
    """Refuse to replace anything but a regular file (or a symlink, which is replaced, not followed): renaming
    over /dev/null or a FIFO would put a regular file in its place."""
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise OutputError(f"{target}: cannot write: {exc.strerror or exc}; nothing was changed") from None
    kind = next((name for test, name in _KINDS if test(mode)), None)
    if kind:
        raise OutputError(f"{target}: is {kind}, not a regular file; refused to replace it (nothing was changed)")


def _discard(temps: Iterable[Path]) -> None:
    """Remove temporary files that were not renamed into place."""
    for temp in temps:
        try:
            temp.unlink(missing_ok=True)
        except OSError:
            pass


def _stage(target: Path, text: str) -> Path:
    """`text` in a synced temporary file beside `target`, with the target's mode (or the umask's)."""
    import tempfile  # only to write (its import costs a reading command's start-up)

    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    temp = target.with_name(os.path.basename(name))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, _mode_for(target))
    except OSError:
        temp.unlink(missing_ok=True)
        raise
    return temp


def _mode_for(target: Path) -> int:
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _sync_dir(directory: Path) -> None:
    """Make the renames durable (a crash right after still shows the new files)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
