"""A file being imported, as bytes and UTF-8 text: its size limit, its encoding, a stream
read again from its start on every pass (never whole into memory), its first line.

Pure (no Django): the caller passes the size limit (the importer's setting
``HUMEVAL_IMPORT_MAX_BYTES``) and turns :class:`Rejected` into its own error.
"""

from __future__ import annotations

import codecs
import io
import json
import os
import tempfile
from collections.abc import Iterator
from typing import IO, Any

Source = bytes | IO[bytes]


class Rejected(Exception):
    """A file refused; ``errors`` names each fault with its line or record."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


class TooLarge(Rejected):
    """A file above the size limit, refused before it was read or parsed."""

    def __init__(self, message: str) -> None:
        super().__init__([message])


def _size_text(n: float) -> str:
    if n < 1024:
        return f"{int(n)} bytes"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            break
    return f"{n:.1f} {unit}"


def too_large(size: int | None, limit: int) -> TooLarge:
    """The rejection of a file of ``size`` bytes (``None``: only known to exceed ``limit``)."""
    what = f"{_size_text(size)} ({size} bytes)" if size is not None else "larger than that"
    return TooLarge(
        f"the file is too large: the import limit is {_size_text(limit)} ({limit} bytes) and "
        f"the file is {what}; split it into smaller files or raise HUMEVAL_IMPORT_MAX_BYTES"
    )


def _declared_size(source: IO[bytes]) -> int | None:
    size = getattr(source, "size", None)  # Django's UploadedFile
    if isinstance(size, int):
        return size
    try:
        return os.fstat(source.fileno()).st_size - source.tell()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None


def read_limited(source: Source, limit: int) -> bytes:
    """The bytes of a file to import. One larger than ``limit`` is refused with
    :class:`TooLarge` before it is read, when its size is known (an upload, a file on
    disk), and otherwise as soon as more than ``limit`` bytes have been read; nothing is
    parsed."""
    if isinstance(source, bytes | bytearray | memoryview):
        if len(source) > limit:
            raise too_large(len(source), limit)
        return bytes(source)
    size = _declared_size(source)
    if size is not None and size > limit:
        raise too_large(size, limit)
    data = source.read(limit + 1)
    if len(data) > limit:
        raise too_large(None, limit)
    return data


def _looks_like_utf16(sample: bytes) -> bool:
    """Mostly-ASCII UTF-16 without a byte order mark: every other byte is NUL."""
    half = len(sample) // 2
    if half < 2:
        return False
    even, odd = sample[0::2].count(0), sample[1::2].count(0)
    return max(even, odd) >= 0.3 * half and min(even, odd) <= 0.05 * half


def _encoding_problem(head: bytes) -> str | None:
    if head.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        return (
            "line 1: the file is UTF-32 text (it starts with a UTF-32 byte order mark); "
            "save it as UTF-8 and try again"
        )
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return (
            "line 1: the file is UTF-16 text (it starts with a UTF-16 byte order mark); "
            "save it as UTF-8 and try again"
        )
    return None


def _nul_problem(sample: bytes, line: int, offset: int) -> str:
    if _looks_like_utf16(sample):
        return (
            "line 1: the file looks like UTF-16 text without a byte order mark (every "
            "other byte is NUL); save it as UTF-8 and try again"
        )
    return (
        f"line {line}: the file contains a NUL byte (byte {offset}); it looks like binary "
        "data, not a text file"
    )


def _utf8_problem(exc: UnicodeDecodeError, line: int, offset: int) -> str:
    if exc.reason == "unexpected end of data":
        return (
            f"line {line}: the file ends in the middle of a character (byte {offset}); "
            "it looks cut off"
        )
    return (
        f"line {line}: the file is not UTF-8 text (byte {offset} cannot be "
        "decoded); save it as UTF-8 and try again"
    )


def decode(data: bytes) -> str:
    """UTF-8 (with or without BOM). UTF-16/32, binary data (NUL bytes) and any byte that is
    not UTF-8 are refused with the line they are on."""
    if problem := _encoding_problem(data[:4]):
        raise Rejected([problem])
    nul = data.find(b"\x00")
    if nul >= 0:
        raise Rejected([_nul_problem(data[:4096], data[:nul].count(b"\n") + 1, nul)])
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise Rejected([_utf8_problem(exc, line, exc.start)]) from None


#: Bytes read at a time from a file being imported.
CHUNK = 1 << 16


class _Raw(io.RawIOBase):
    """Any object with ``read(n)`` as a raw stream, for :class:`io.TextIOWrapper`; closing
    it leaves the file it reads open."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class Stream:
    """A file being imported, read from its start on every pass (never whole into memory):
    a seekable file as it is, bytes as a view of them, any other stream copied once to a
    temporary file. Opening one checks the size limit (before reading anything when the
    size is known) and the encoding (UTF-8; no UTF-16/32, no NUL bytes), in one pass."""

    def __init__(self, source: Source, limit: int) -> None:
        if isinstance(source, bytes | bytearray | memoryview):
            if len(source) > limit:
                raise too_large(len(source), limit)
            source = io.BytesIO(source)  # shares the bytes; no copy
        else:
            size = _declared_size(source)
            if size is not None and size > limit:
                raise too_large(size, limit)
            if not _seekable(source):
                source = _spool(source, limit)
        self._file = source
        self._start = source.tell()
        self._check(limit)

    def _check(self, limit: int) -> None:
        """Refuse a file above ``limit`` bytes, or one that is not UTF-8 text."""
        decoder = codecs.getincrementaldecoder("utf-8")()
        total = lines = 0
        sample = b""
        bad_utf8: str | None = None
        for chunk in self.chunks():
            if total == 0 and (problem := _encoding_problem(chunk[:4])):
                raise Rejected([problem])
            if len(sample) < 4096:
                sample += chunk[: 4096 - len(sample)]
            total += len(chunk)
            if total > limit:
                raise too_large(None, limit)
            if (nul := chunk.find(b"\x00")) >= 0:  # named before any other encoding fault
                offset = total - len(chunk) + nul
                raise Rejected([_nul_problem(sample, lines + chunk[:nul].count(b"\n") + 1, offset)])
            if bad_utf8 is None:
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError as exc:  # exc.object: bytes held back, then chunk
                    held = len(exc.object) - len(chunk)
                    line = lines + exc.object[: exc.start].count(b"\n") + 1
                    bad_utf8 = _utf8_problem(exc, line, total - len(chunk) - held + exc.start)
            lines += chunk.count(b"\n")
        if bad_utf8 is None:
            try:
                decoder.decode(b"", final=True)
            except UnicodeDecodeError as exc:
                bad_utf8 = _utf8_problem(exc, lines + 1, total - len(exc.object) + exc.start)
        if bad_utf8:
            raise Rejected([bad_utf8])

    def chunks(self) -> Iterator[bytes]:
        """The file's bytes, from its start, a chunk at a time."""
        self._file.seek(self._start)
        while chunk := self._file.read(CHUNK):
            yield chunk

    def lines(self, newline: str = "\n", limit: int = -1) -> Iterator[str]:
        """The file's text, a line at a time (each with its line break; a BOM dropped).
        ``newline``: as for :func:`open`; ``"\n"`` breaks lines at LF only. ``limit``:
        the most characters given at once (a longer line comes in pieces)."""
        self._file.seek(self._start)
        reader = io.BufferedReader(_Raw(self._file), CHUNK)
        text = io.TextIOWrapper(reader, encoding="utf-8-sig", newline=newline)
        try:
            if limit < 0:
                yield from text
            else:
                while piece := text.readline(limit):
                    yield piece
        finally:
            text.close()


def _seekable(source: IO[bytes]) -> bool:
    try:
        return bool(source.seekable()) and source.tell() >= 0
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return False


def _spool(source: IO[bytes], limit: int) -> IO[bytes]:
    """A stream that cannot seek, copied to a temporary file; only ``limit`` + 1 bytes are
    read, so one above the limit is refused without reading it to its end."""
    copy = tempfile.SpooledTemporaryFile(max_size=CHUNK)
    remaining = limit + 1
    while remaining > 0 and (chunk := source.read(min(CHUNK, remaining))):
        copy.write(chunk)
        remaining -= len(chunk)
    if remaining <= 0:
        raise too_large(None, limit)
    copy.seek(0)
    return copy


#: The most characters of a file's first line read to tell its format (a longer first
#: line, such as a whole Judge-Bench document on one line, is not held).
SNIFF_CHARS = 1 << 18


def sniff(stream: Stream) -> tuple[str | None, bool]:
    """The first line with text (without leading white space; at most ``SNIFF_CHARS`` of
    it), and whether any other line has text; ``(None, False)`` for white space only."""
    first, fresh = None, True
    for piece in stream.lines(limit=SNIFF_CHARS):
        starts, fresh = fresh, piece.endswith("\n")
        if not starts or not piece.strip():
            continue
        if first is not None:
            return first, True
        first = piece.lstrip()
    return first, False


def is_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):
        return False
