"""Parse and validate study files into a :class:`StudySpec`; no database access.

Two formats are read (documented in ``docs/import-formats.md``):

* the **bundle**: JSONL (an optional ``{"study": {…}}`` first line, then one input per
  line) or CSV (``input_id,input,system,output`` plus optional ``reference,priority``);
* the **Judge-Bench** JSON schema (``annotations`` + ``instances``), pairwise when every
  instance has ``output_a``/``output_b``, else a Likert study with one criterion per
  judged property; the human scores become pre-existing annotations (read by
  :mod:`formats.judgebench`).

Every problem is collected with the line or record it comes from, and the whole file is
rejected if there is any, before any write. A file above ``HUMEVAL_IMPORT_MAX_BYTES`` is
refused before it is read; text the database cannot store is refused here.
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
import json
import os
import re
import tempfile
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import IO, Any

import kinds
from formats import judgebench
from formats.bundle import finite_number, study_csv, study_jsonl, unstorable
from formats.judgebench import MAX_DEPTH as MAX_DEPTH  # the nesting limit, named here too
from formats.vocab import preference_of
from kinds import conversation

from .choices import Preference
from .errors import ImportRejected, ImportTooLarge
from .languages import LanguageError, language_list, supported

MAX_ERRORS = 200
#: Default of the setting ``HUMEVAL_IMPORT_MAX_BYTES``.
DEFAULT_MAX_BYTES = 200 * 1024 * 1024
#: Longest input id, system name and criterion label (their database columns).
MAX_NAME = 200
#: Largest whole-number study option (a PostgreSQL ``integer``).
MAX_INT = 2**31 - 1

Source = bytes | IO[bytes]
STUDY_OPTIONS = {
    "name": str,
    "kind": str,
    "description": str,
    "question": str,
    "instructions": str,
    "allow_tie": bool,
    "allow_both_good": bool,
    "allow_both_bad": bool,
    "render_markdown": bool,
    "show_reference": bool,
    "redundancy": int,
    "batch_size": int,
    "budget": int,
    "gamma": float,
    "lease_seconds": int,
    "items_per_worker": int,
    "open_links": bool,
    "completion_code": str,
    "fail_code": str,
    "no_work_code": str,
    "gold_rate_start": float,
    "gold_rate_end": float,
    "gold_rate_halflife": int,
    "max_strikes": int,
    "collection": str,
    "language": str,
    "languages": list,
    "instructions_by_language": dict,
}
#: Study columns a kind may default differently (``Study.kind_options`` reads them back).
ANSWER_SWITCHES = frozenset({"allow_tie", "allow_both_good", "allow_both_bad"})
#: Study-line keys some kind accepts (``Kind.extra_options``); the kind validates them.
KIND_OPTIONS = frozenset().union(*(kinds.get(name).extra_options for name in kinds.NAMES))


@dataclass
class CriterionSpec:
    name: str
    label: str
    scale_min: int = 1
    scale_max: int = 5
    anchors: dict[str, str] = field(default_factory=dict)
    labels: list[str] = field(default_factory=list)


@dataclass
class InputSpec:
    external_id: str
    text: str
    outputs: dict[str, str]
    where: str
    reference: str = ""
    priority: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: The known answer in system order, as the kind reads it (``Item.expected``).
    expected: dict[str, Any] = field(default_factory=dict)
    is_gold: bool = False
    #: The record's ``"gold"`` as written; the study's kind turns it into ``expected``
    #: (``Kind.parse_expected``, see :func:`expected_of`).
    gold: Any = None
    #: Conversation outputs as imported: system name → messages (``outputs`` holds their text).
    messages: dict[str, list] = field(default_factory=dict)


def expected_of(kind: kinds.Kind, opts: dict[str, Any], record: InputSpec) -> dict[str, Any]:
    """The known answer of ``record`` in system order: its ``"gold"`` read by the study's
    kind, else what the reader stored; ``kinds.AnswerError`` when the kind refuses it."""
    if record.gold is None:
        return record.expected
    return kind.parse_expected(
        opts, record.gold, systems=list(record.outputs), outputs=list(record.outputs.values())
    )


@dataclass
class AnnotationSpec:
    """A label that already exists in the imported dataset."""

    input_id: str
    annotator_key: str
    value: str = ""
    scores: dict[str, Any] = field(default_factory=dict)


@dataclass
class StudySpec:
    options: dict[str, Any]
    systems: list[str]
    #: a list, or :class:`Inputs` that read the file again on each iteration
    inputs: list[InputSpec] | Inputs
    criteria: list[CriterionSpec] = field(default_factory=list)
    annotations: list[AnnotationSpec] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return self.options["kind"]


class _Errors(list):
    """Messages, at most ``MAX_ERRORS``; ``total`` counts every fault found."""

    total = 0

    def __init__(self) -> None:
        super().__init__()
        #: study options refused already (not checked again as a whole)
        self.bad_options: set[str] = set()

    def add(self, message: str) -> None:
        self.total += 1
        if len(self) < MAX_ERRORS:
            self.append(message)

    def raise_if_any(self) -> None:
        if self:
            raise ImportRejected(list(self))


# --- size and encoding -----------------------------------------------------------------------
def max_import_bytes() -> int:
    """The size limit of an imported file: the setting ``HUMEVAL_IMPORT_MAX_BYTES``."""
    from django.conf import settings

    return int(getattr(settings, "HUMEVAL_IMPORT_MAX_BYTES", DEFAULT_MAX_BYTES))


def _size_text(n: float) -> str:
    if n < 1024:
        return f"{int(n)} bytes"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            break
    return f"{n:.1f} {unit}"


def too_large(size: int | None, limit: int) -> ImportTooLarge:
    """The rejection of a file of ``size`` bytes (``None``: only known to exceed ``limit``)."""
    what = f"{_size_text(size)} ({size} bytes)" if size is not None else "larger than that"
    return ImportTooLarge(
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


def read_limited(source: Source, limit: int | None = None) -> bytes:
    """The bytes of a file to import. One larger than ``limit`` (default: the setting
    ``HUMEVAL_IMPORT_MAX_BYTES``) is refused with :class:`ImportTooLarge` before it is
    read, when its size is known (an upload, a file on disk), and otherwise as soon as
    more than ``limit`` bytes have been read; nothing is parsed."""
    limit = max_import_bytes() if limit is None else limit
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
        raise ImportRejected([problem])
    nul = data.find(b"\x00")
    if nul >= 0:
        raise ImportRejected([_nul_problem(data[:4096], data[:nul].count(b"\n") + 1, nul)])
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ImportRejected([_utf8_problem(exc, line, exc.start)]) from None


#: Bytes read at a time from a file being imported.
CHUNK = 1 << 16


class _Raw(io.RawIOBase):
    """Any object with ``read(n)`` as a raw stream, for :class:`io.TextIOWrapper`; closing
    it leaves the file it reads open."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class Stream:
    """A file being imported, read from its start on every pass (never whole into memory):
    a seekable file as it is, bytes as a view of them, any other stream copied once to a
    temporary file. Opening one checks the size limit (before reading anything when the
    size is known) and the encoding (UTF-8; no UTF-16/32, no NUL bytes), in one pass."""

    def __init__(self, source: Source, limit: int | None = None) -> None:
        limit = max_import_bytes() if limit is None else limit
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
                raise ImportRejected([problem])
            if len(sample) < 4096:
                sample += chunk[: 4096 - len(sample)]
            total += len(chunk)
            if total > limit:
                raise too_large(None, limit)
            if (nul := chunk.find(b"\x00")) >= 0:  # named before any other encoding fault
                offset = total - len(chunk) + nul
                raise ImportRejected(
                    [_nul_problem(sample, lines + chunk[:nul].count(b"\n") + 1, offset)]
                )
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
            raise ImportRejected([bad_utf8])

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


#: Checks of the study options beyond the file format (the caller's model rules): the
#: options → one message per fault.
OptionCheck = Callable[[dict[str, Any]], list[str]]


def parse_study_file(
    data: Source,
    filename: str = "",
    overrides: dict[str, Any] | None = None,
    *,
    check_options: OptionCheck | None = None,
) -> StudySpec:
    """:func:`scan_study_file`, with every input read into ``spec.inputs`` (a list)."""
    spec = scan_study_file(data, filename, overrides, check_options=check_options)
    spec.inputs = list(spec.inputs)
    return spec


def scan_study_file(
    data: Source,
    filename: str = "",
    overrides: dict[str, Any] | None = None,
    *,
    check_options: OptionCheck | None = None,
) -> StudySpec:
    """Detect the format from the name and content, validate the whole file, return the spec.

    ``data`` is the file's bytes or an open binary file; above the size limit it is
    refused before it is read (:class:`Stream`). The study options (from the file and
    ``overrides``; also by ``check_options``) and every record are checked before anything
    is refused, so one :class:`ImportRejected` names every fault (up to ``MAX_ERRORS``).

    Memory stays small whatever the size of the file: the first pass keeps only each
    input's id, place and system names (and a Judge-Bench file's labels and members
    other than ``instances``), and ``spec.inputs`` reads the file again, one input at a
    time, each time it is iterated (the open file must stay open until then).
    """
    stream = Stream(data)
    first, more = _sniff(stream)
    if first is None:
        raise ImportRejected(["the file is empty"])
    errors = _Errors()
    config = _config(overrides or {}, errors)
    lower = filename.lower()
    if lower.endswith(".csv"):
        spec, index = _scan_csv(stream, config, errors)
    elif lower.endswith(".jsonl") or (first.startswith("{") and more and _is_object(first)):
        spec, index = _scan_jsonl(stream, config, errors)
    elif first.startswith("{") or lower.endswith(".json"):
        spec, index = _parse_judgebench(stream, config, errors)
    else:
        raise ImportRejected(
            [
                f"cannot tell the format of '{filename or 'the file'}': use .jsonl, .csv or "
                "Judge-Bench .json"
            ]
        )
    _validate_spec(spec, index, errors, check_options)
    errors.raise_if_any()
    return spec


#: The most characters of a file's first line read to tell its format (a longer first
#: line, such as a whole Judge-Bench document on one line, is not held).
SNIFF_CHARS = 1 << 18


def _sniff(stream: Stream) -> tuple[str | None, bool]:
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


def _is_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):
        return False


class Inputs:
    """A file's inputs, read again from the file each time they are iterated."""

    def __init__(self, read: Callable[[], Iterator[InputSpec]], count: int) -> None:
        self._read = read
        self._count = count

    def __iter__(self) -> Iterator[InputSpec]:
        return self._read()

    def __len__(self) -> int:
        return self._count


class _Index:
    """What the first pass keeps of each input, compactly: its id, its place (a line, or an
    instance of a Judge-Bench file) and the systems it has outputs for (``-1``: the record
    has a fault already named)."""

    def __init__(self, place: str = "line {}", where: str = "line {} (input '{}')") -> None:
        self.place, self.where = place, where
        self.ids: list[str] = []
        self.places = array("q")
        self.shape_of = array("l")
        self.shapes: dict[tuple[str, ...], int] = {}
        self.gold = False
        #: (where, record) of every record with a ``"gold"`` (checked by the kind later)
        self.golds: list[tuple[str, InputSpec]] = []
        #: (where, systems) of every record with outputs given as conversations
        self.conversations: list[tuple[str, list[str]]] = []
        self.valid = 0
        #: False when the study options could not be read (a broken first line)
        self.options_known = True

    def add(self, ident: str, place: int, systems: Iterable[str] | None, gold: bool = False):
        shape = -1
        if systems is not None:
            shape = self.shapes.setdefault(tuple(systems), len(self.shapes))
            self.valid += 1
        self.ids.append(ident)
        self.places.append(place)
        self.shape_of.append(shape)
        self.gold = self.gold or gold

    def systems(self) -> list[str]:
        """Every system named, in the order of first appearance."""
        return list(dict.fromkeys(name for shape in self.shapes for name in shape))


def _line_of(where: str) -> int:
    return int(where.split()[1])


def _systems_of(inputs: Iterable[InputSpec]) -> list[str]:
    return list(dict.fromkeys(name for record in inputs for name in record.outputs))


@dataclass
class _Config:
    """Study options given beside the file (``--config``, ``--name``, the API's fields)."""

    options: dict[str, Any]
    criteria: list[CriterionSpec] | None = None
    systems: list[str] | None = None


def _config(overrides: dict[str, Any], errors: _Errors) -> _Config:
    raw = dict(overrides)
    source = raw.pop("source", None)  # set by the caller, not a study file option
    if bad := unstorable(raw):
        raise ImportRejected([f"config: {bad}"])
    options, criteria, systems = _study_options(raw, "config", errors)
    if source is not None:
        options["source"] = str(source)[:300]
    return _Config(
        options,
        criteria if "criteria" in raw else None,
        systems if "systems" in raw else None,
    )


# --- study options -------------------------------------------------------------------------
def _languages(options: dict, where: str, errors: _Errors) -> None:
    """The worker language (BCP 47), the others a worker may switch to, and instructions per
    language, each code one with shipped catalogs (docs/languages.md); stored normalised."""
    try:
        codes = language_list(options.get("language", "en"), options.get("languages"))
        own = {
            supported(code): text
            for code, text in (options.get("instructions_by_language") or {}).items()
        }
    except LanguageError as exc:
        errors.add(f"{where}: {exc}")
        return
    if any(not isinstance(text, str) for text in own.values()):
        errors.add(f"{where}: 'instructions_by_language' maps language codes to Markdown texts")
        return
    if "language" in options or "languages" in options:
        options["language"], options["languages"] = codes[0], codes[1:]
    if own:
        options["instructions_by_language"] = own


def _study_options(raw: Any, where: str, errors: _Errors) -> tuple[dict, list[CriterionSpec], list]:
    if not isinstance(raw, dict):
        errors.add(f"{where}: 'study' must be an object")
        return {}, [], []
    options: dict[str, Any] = {}
    for key, value in raw.items():
        if key in ("criteria", "systems"):
            continue
        if key in KIND_OPTIONS and key not in STUDY_OPTIONS:
            options.setdefault("options", {})[key] = value  # the kind checks it
            continue
        expected = STUDY_OPTIONS.get(key)
        errors.bad_options.add(key)  # until it is taken below
        if expected is None:
            errors.add(f"{where}: unknown study option '{key}'")
        elif expected is float and isinstance(value, int | float) and not isinstance(value, bool):
            if (number := finite_number(value)) is None:
                errors.add(f"{where}: study option '{key}' must be a finite number")
            else:
                options[key] = number
                errors.bad_options.discard(key)
        elif not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            errors.add(f"{where}: study option '{key}' must be {expected.__name__}")
        elif expected is int and abs(value) > MAX_INT:
            errors.add(f"{where}: study option '{key}' is out of range (at most {MAX_INT})")
        else:
            options[key] = value
            errors.bad_options.discard(key)
    _languages(options, where, errors)
    raw_criteria = raw.get("criteria") or []
    if isinstance(raw_criteria, list) and raw_criteria:
        # a kind without Criterion rows (Kind.criterion_rows) validates the list as given
        options.setdefault("options", {})["criteria"] = raw_criteria
    if not isinstance(raw_criteria, list):
        errors.add(f"{where}: 'criteria' must be a list of criteria")
        raw_criteria = []
    criteria = [
        c
        for i, item in enumerate(raw_criteria)
        if (c := _criterion(item, f"{where}, criterion {i + 1}", errors))
    ]
    systems = raw.get("systems") or []
    if not isinstance(systems, list) or not all(isinstance(s, str) and s.strip() for s in systems):
        errors.add(f"{where}: 'systems' must be a list of names")
        systems = []
    for name in sorted({s for s in systems if systems.count(s) > 1}):
        errors.add(f"{where}: 'systems' names '{name}' more than once")
    return options, criteria, list(dict.fromkeys(systems))


def _criterion(raw: Any, where: str, errors: _Errors) -> CriterionSpec | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        errors.add(f"{where}: a criterion needs a 'name'")
        return None
    name = raw["name"]
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,60}", name):
        errors.add(f"{where}: criterion name '{name}' may use letters, digits, '_' and '-'")
        return None
    labels = raw.get("labels") or []
    scale = raw.get("scale") or [1, 5]
    if labels:
        if not isinstance(labels, list) or len({str(x) for x in labels}) < 2:
            errors.add(f"{where}: 'labels' needs at least two distinct labels")
            return None
        return CriterionSpec(name, str(raw.get("label") or name), labels=[str(x) for x in labels])
    if (
        not isinstance(scale, list)
        or len(scale) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in scale)
        or not 0 < scale[1] - scale[0] <= 20
    ):
        errors.add(f"{where}: 'scale' must be [min, max] whole numbers, 2 to 21 points")
        return None
    anchors = raw.get("anchors") or {}
    if not isinstance(anchors, dict):
        errors.add(f"{where}: 'anchors' must map scale points to text")
        anchors = {}
    return CriterionSpec(
        name,
        str(raw.get("label") or name),
        scale[0],
        scale[1],
        {str(k): str(v) for k, v in anchors.items()},
    )


# --- JSONL bundle ----------------------------------------------------------------------------
def _jsonl_objects(stream: Stream, errors: _Errors) -> Iterator[tuple[str, dict | None]]:
    """Each line with text, with where it is: the storable JSON object it holds, or
    ``None`` when it holds none (named in ``errors``; see :func:`formats.bundle.study_jsonl`)."""
    for where, record in study_jsonl(stream.lines()):
        if isinstance(record, str):
            errors.add(f"{where}: {record}")
            yield where, None
            continue
        yield where, record


def _scan_jsonl(stream: Stream, config: _Config, errors: _Errors) -> tuple[StudySpec, _Index]:
    options: dict[str, Any] = {}
    criteria: list[CriterionSpec] = []
    declared: list[str] = []
    index = _Index()
    seen_study = False
    for where, record in _jsonl_objects(stream, errors):
        if record is None:
            # a broken first line may have been the study line: its options are unknown
            index.options_known = index.options_known and (seen_study or bool(index.ids))
            continue
        if "study" in record:
            if index.valid or seen_study:
                errors.add(f"{where}: the 'study' line must come first, once")
            seen_study = True
            options, criteria, declared = _study_options(record["study"], where, errors)
            continue
        before = errors.total
        parsed = _input_record(record, where, errors)
        if parsed is not None:
            # a record with a fault named already gets no second message about its outputs
            outputs = parsed.outputs if errors.total == before else None
            index.add(parsed.external_id, _line_of(where), outputs, parsed.is_gold)
            if parsed.gold is not None and outputs is not None:
                index.golds.append((parsed.where, parsed))
            if parsed.messages:
                index.conversations.append((parsed.where, sorted(parsed.messages)))
        elif _valid_id(ident := record.get("id")):
            index.add(str(ident), _line_of(where), None)
    study = {**options, **config.options}
    inputs = Inputs(lambda: _jsonl_inputs(stream), index.valid)
    return _assemble(
        study,
        criteria if config.criteria is None else config.criteria,
        declared if config.systems is None else config.systems,
        inputs,
        index=index,
    ), index


def _jsonl_inputs(stream: Stream) -> Iterator[InputSpec]:
    """The inputs of a JSONL file already validated (``study``: its study options)."""
    errors = _Errors()
    for where, record in _jsonl_objects(stream, errors):
        if record and "study" not in record:
            if parsed := _input_record(record, where, errors):
                yield parsed


def _valid_id(ident: Any) -> bool:
    return isinstance(ident, str | int) and not isinstance(ident, bool) and str(ident) != ""


def _input_record(record: dict, where: str, errors: _Errors) -> InputSpec | None:
    """One input line (its ``"gold"`` is read by the study's kind later, see
    :func:`expected_of`). An ``input`` or output may be a conversation
    (:mod:`kinds.conversation`)."""
    ident = record.get("id")
    if not _valid_id(ident):
        errors.add(f"{where}: missing 'id' (a string or number naming the input)")
        return None
    where = f"{where} (input '{ident}')"
    outputs = record.get("outputs")
    if not isinstance(outputs, dict) or not outputs:
        errors.add(
            f"{where}: missing 'outputs' (an object mapping system name to output text "
            "or conversation)"
        )
        return None
    texts: dict[str, str] = {}
    messages: dict[str, list] = {}
    bad = False
    for name, out in outputs.items():
        if conversation.is_conversation(out):
            try:
                messages[str(name)] = conversation.validate(
                    out, f"{where}: output of system '{name}'", output=True
                )
            except conversation.ConversationError as exc:
                for message in exc.messages:
                    errors.add(message)
                bad = True
                continue
            texts[str(name)] = conversation.to_text(messages[str(name)])
        elif not isinstance(out, str) or not out.strip():
            errors.add(f"{where}: output of system '{name}' is empty or not text")
            bad = True
        else:
            texts[str(name)] = out
    text = record.get("input", "")
    turns = None
    if conversation.is_conversation(text):
        try:
            turns = conversation.validate(text, f"{where}: 'input'")
        except conversation.ConversationError as exc:
            for message in exc.messages:
                errors.add(message)
        text = conversation.to_text(turns or [])
    elif not isinstance(text, str):
        errors.add(f"{where}: 'input' must be text or a conversation (a list of messages)")
        text = ""
    priority = record.get("priority")
    if priority is not None and (priority := finite_number(priority)) is None:
        errors.add(f"{where}: 'priority' must be a finite number")
    metadata = record.get("metadata", {})
    if not isinstance(metadata, dict):
        errors.add(f"{where}: 'metadata' must be an object")
        metadata = {}
    if turns:
        metadata = {**metadata, "conversation": turns}
    reference = record.get("reference", "") or ""
    if not isinstance(reference, str):
        errors.add(f"{where}: 'reference' must be text")
        reference = ""
    gold = record.get("gold")
    if bad:
        return None
    return InputSpec(
        external_id=str(ident),
        text=text,
        outputs=texts,
        where=where,
        reference=reference,
        priority=priority,
        metadata=metadata,
        is_gold=gold is not None,
        gold=gold,
        messages=messages,
    )


# --- CSV bundle --------------------------------------------------------------------------------
CSV_REQUIRED = ("input_id", "input", "system", "output")


def _csv_rows(stream: Stream) -> tuple[csv.DictReader, list[str]]:
    try:
        return study_csv(stream.lines(newline=""))
    except ValueError as exc:
        raise ImportRejected([str(exc)]) from None


def _digest(text: str) -> int:
    """64 bits of a cryptographic hash of ``text`` (rows of one input must repeat its text)."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _scan_csv(stream: Stream, config: _Config, errors: _Errors) -> tuple[StudySpec, _Index]:
    reader, header = _csv_rows(stream)
    missing = [c for c in CSV_REQUIRED if c not in header]
    if missing:
        raise ImportRejected([f"line 1: the CSV header lacks column(s) {', '.join(missing)}"])
    twice = sorted({c for c in header if header.count(c) > 1})
    if twice:
        raise ImportRejected([f"line 1: the CSV header names column(s) {', '.join(twice)} twice"])
    # per input, by its number: the line of its first row, a digest of its text, its systems
    # (an entry of ``shapes``; -1 once a row of it is refused) and a given priority
    number: dict[str, int] = {}
    lines, digests, shape_of = array("q"), array("Q"), array("l")
    shapes: dict[tuple[str, ...], int] = {(): 0}
    by_shape: list[tuple[str, ...]] = [()]
    grown: dict[tuple[int, str], int] = {}  # (shape, system) → the shape with it added
    priorities: dict[int, str] = {}
    try:
        for row in reader:
            where = f"line {reader.line_num}"
            if None in row or any(v is None for v in row.values()):
                errors.add(f"{where}: wrong number of fields")
                continue
            ident, system, output = row["input_id"].strip(), row["system"].strip(), row["output"]
            if not ident or not system:
                errors.add(f"{where}: 'input_id' and 'system' must not be empty")
                continue
            n = number.get(ident)
            if n is None:
                n = number[ident] = len(lines)
                lines.append(reader.line_num)
                digests.append(_digest(row["input"]))
                shape_of.append(0)
                if (row.get("priority") or "").strip():
                    priorities[n] = row["priority"]
            elif digests[n] != _digest(row["input"]):
                errors.add(f"{where}: input '{ident}' has a different text than on line {lines[n]}")
            if not output.strip():
                errors.add(f"{where}: output of system '{system}' is empty")
                shape_of[n] = -1
                continue
            if shape_of[n] < 0:
                continue
            if system in by_shape[shape_of[n]]:
                errors.add(f"{where}: duplicate output for input '{ident}' and system '{system}'")
                continue
            key = (shape_of[n], system)
            if key not in grown:
                bigger = (*by_shape[shape_of[n]], system)
                grown[key] = shapes.setdefault(bigger, len(shapes))
                if grown[key] == len(by_shape):
                    by_shape.append(bigger)
            shape_of[n] = grown[key]
    except csv.Error as exc:  # the bad row starts after the last one read
        where = f"line {reader.line_num + 1}"
        if str(exc) == "unexpected end of data":
            errors.add(f"{where}: the file ends inside a quoted field; it looks cut off")
        else:
            errors.add(f"{where}: malformed CSV ({exc})")
    index = _Index()
    for ident, n in number.items():
        if n in priorities and _csv_priority(priorities[n]) is None:
            errors.add(f"line {lines[n]}: priority '{priorities[n]}' is not a finite number")
        index.add(ident, lines[n], by_shape[shape_of[n]] if shape_of[n] >= 0 else None)
    counts = {ident: len(by_shape[shape_of[n]]) for ident, n in number.items()}
    del number, digests
    inputs = Inputs(lambda: _csv_inputs(stream, counts), len(counts))
    spec = _assemble(
        config.options, config.criteria or [], config.systems or [], inputs, index=index
    )
    return spec, index


def _csv_priority(text: str) -> float | None:
    try:
        return finite_number(float(text))
    except ValueError:
        return None


def _csv_inputs(stream: Stream, counts: dict[str, int]) -> Iterator[InputSpec]:
    """The inputs of a CSV file already validated, in the order of their first rows; an
    input is given once its last row is read (``counts``: rows per input)."""
    reader, _ = _csv_rows(stream)
    pending: OrderedDict[str, dict[str, Any]] = OrderedDict()
    for row in reader:
        ident = row["input_id"].strip()
        record = pending.get(ident)
        if record is None:
            record = pending[ident] = {
                "where": f"line {reader.line_num} (input '{ident}')",
                "input": row["input"],
                "outputs": {},
                "reference": row.get("reference") or "",
                "priority": row.get("priority") or "",
            }
        record["outputs"][row["system"].strip()] = row["output"]
        while pending:
            first = next(iter(pending))
            if len(pending[first]["outputs"]) < counts[first]:
                break
            done = pending.popitem(last=False)[1]
            yield InputSpec(
                first,
                done["input"],
                done["outputs"],
                done["where"],
                done["reference"],
                _csv_priority(done["priority"]) if done["priority"].strip() else None,
            )


# --- Judge-Bench ---------------------------------------------------------------------------------
_PAIR = frozenset(("output_a", "output_b"))


def _parse_judgebench(stream: Stream, config: _Config, errors: _Errors) -> tuple[StudySpec, _Index]:
    """A Judge-Bench file in three readings of the stream: the document's members other
    than ``instances`` and the shape of every instance (is it pairwise?); then each
    instance is checked; ``spec.inputs`` reads them again when iterated. Only the
    members other than ``instances``, the labels and a compact index are kept."""
    document = judgebench.JudgeBenchFile(stream.chunks, MAX_ERRORS)
    top: dict[str, Any] = {}
    count, paired = 0, True
    try:
        for key, index, value, duplicate in document.members():
            where = f"'{key}'" if index is None else f"instances[{index}]"
            if duplicate:
                errors.add(f"{where}: {duplicate}")
            if bad := unstorable(value):
                errors.add(f"{where}: {bad}")
            if index is None:
                top.setdefault(key, value)
                continue
            count += 1
            body = value.get("instance") if isinstance(value, dict) else None
            paired = paired and isinstance(body, dict) and {"output_a", "output_b"} <= body.keys()
    except (judgebench.BadJSON, judgebench.TooDeep):
        raise ImportRejected([document.fault()]) from None
    for message in document.twice + document.lone:
        errors.add(message)
    if "" in top or not isinstance(top.get("instances"), list):
        raise ImportRejected(["a Judge-Bench file is an object with an 'instances' list"])
    if config.criteria is not None or config.systems is not None:
        raise ImportRejected(["config: a Judge-Bench file sets its own criteria and systems"])
    specs = _judged_properties(top.get("annotations"), errors)
    paired = paired and count > 0
    name = str(top.get("dataset") or "Judge-Bench import")
    options = {"name": name, "description": str(top.get("dataset_url") or "")}
    criteria: list[CriterionSpec] = []
    read: InstanceReader | None
    if paired:
        read, allow_tie = _pairwise_reader(specs, errors)
        prompt = next(iter(specs.values())).get("prompt", "")
        options |= {"kind": "pairwise", "allow_tie": allow_tie}
        if prompt and isinstance(prompt, str):
            options["instructions"] = _prompt_as_instructions(prompt)
        declared = ["output_a", "output_b"]
    else:
        read, criteria = _likert_reader(specs, errors)
        options |= {"kind": "likert"}
        declared = ["response"]
    index = _Index("instances[{}]", "instances[{}] (id '{}')")
    annotations: list[AnnotationSpec] = []
    if read is not None:
        seen: dict[str, int] = {}
        try:
            for place, inst in document.instances():
                record = read(place, inst, errors, annotations, seen)
                if record is not None and seen[record.external_id] == place:
                    index.add(record.external_id, place, record.outputs, record.is_gold)
        except (judgebench.BadJSON, judgebench.TooDeep):  # pragma: no cover - changed under us
            raise ImportRejected([document.fault()]) from None

    def inputs() -> Iterator[InputSpec]:
        assert read is not None  # spec.inputs is read only once the file is valid
        scratch = _Errors()
        for place, inst in document.instances():
            if (record := read(place, inst, scratch, None, None)) is not None:
                yield record

    spec = _assemble(
        {**options, **config.options}, criteria, declared, Inputs(inputs, index.valid), annotations
    )
    return spec, index


def _judged_properties(properties: Any, errors: _Errors) -> dict[str, dict]:
    """The judged properties declared in ``annotations``, by metric; a file whose
    properties have a fault is refused here (its instances are checked against them)."""
    try:
        specs, faults = judgebench.judged_properties(properties)
    except ValueError as exc:
        raise ImportRejected([str(exc)]) from None
    for fault in faults:
        errors.add(fault)
    if faults:
        raise ImportRejected(list(errors))
    return specs


def _prompt_as_instructions(prompt: str) -> str:
    """The judge prompt without its template slots, as worker instructions."""
    return re.sub(r"\{\{.*?\}\}", "…", prompt).strip()


def _instance_id(inst: dict, index: int, seen: dict[str, int] | None, errors: _Errors) -> str:
    raw = inst.get("id", index)
    if not isinstance(raw, str | int) or isinstance(raw, bool) or str(raw) == "":
        errors.add(f"instances[{index}]: 'id' must be text or a whole number")
    ident = str(raw)
    if seen is None:
        return ident
    if ident in seen:
        errors.add(
            f"instances[{index}]: duplicate id '{ident}' (first at instances[{seen[ident]}])"
        )
    seen.setdefault(ident, index)
    return ident


#: Reads one instance: (its number, the instance, errors, labels to add to or ``None``,
#: ids seen by number or ``None``) → its input, or ``None`` when it has a fault.
InstanceReader = Callable[
    [int, Any, _Errors, list[AnnotationSpec] | None, dict[str, int] | None], InputSpec | None
]


def _pairwise_reader(specs: dict, errors: _Errors) -> tuple[InstanceReader | None, bool]:
    """Reads the instances of a pairwise file (``output_a``/``output_b``), whose one
    categorical property's labels each prefer A, B or neither."""
    if len(specs) != 1 or next(iter(specs.values()))["category"] != "categorical":
        errors.add("a pairwise Judge-Bench file must judge exactly one categorical property")
        return None, False
    metric, prop = next(iter(specs.items()))
    labels = [str(x) for x in prop["labels_list"]]
    mapping = {label: preference_of(label) for label in labels}
    unmapped = [label for label, pref in mapping.items() if pref is None]
    if unmapped:
        errors.add(f"'{metric}': cannot tell which output label(s) {unmapped} prefer")
        return None, False

    def read(index, inst, errors, annotations, seen) -> InputSpec | None:
        ident = _instance_id(inst, index, seen, errors)
        body = inst["instance"]
        where = f"instances[{index}] (id '{ident}')"
        outs = {"output_a": body["output_a"], "output_b": body["output_b"]}
        if not all(isinstance(v, str) and v.strip() for v in outs.values()):
            errors.add(f"{where}: output_a and output_b must be non-empty text")
            return None
        if not isinstance(body.get("input", ""), str):
            errors.add(f"{where}: 'input' must be text")
            return None
        majority, scores = judgebench.human_scores(inst, where, errors.add).get(metric, (None, []))
        for position, score in enumerate(scores):
            if score is None:
                continue
            if str(score) not in mapping:
                errors.add(f"{where}: human score {score!r} is not in labels_list {labels}")
                continue
            if annotations is not None:
                annotations.append(AnnotationSpec(ident, str(position), value=mapping[str(score)]))
        extra = {k: v for k, v in body.items() if k not in ("input", "output_a", "output_b")}
        return InputSpec(
            ident,
            body.get("input", ""),
            outs,
            where,
            metadata=extra,
            expected={"value": mapping[str(majority)]}
            if majority is not None and mapping.get(str(majority))
            else {},
        )

    return read, any(pref == Preference.TIE.value for pref in mapping.values())


_OUTPUT_KEYS = ("output", "response", "hypothesis", "summary", "candidate", "text")
_INPUT_KEYS = ("input", "source", "context", "instruction", "question", "prompt")


def _likert_reader(specs: dict, errors: _Errors) -> tuple[InstanceReader, list[CriterionSpec]]:
    """Reads the instances of a file that judges one output each: a criterion per
    property (labels, or a scale of 2 to 21 whole points)."""
    criteria = []
    for metric, prop in specs.items():
        name = re.sub(r"[^A-Za-z0-9_-]+", "_", metric)[:60] or "property"
        if prop["category"] == "categorical":
            criteria.append(
                CriterionSpec(name, metric, labels=[str(x) for x in prop["labels_list"]])
            )
        else:
            low, high = sorted((prop["worst"], prop["best"]))
            if int(low) != low or int(high) != high or not 0 < high - low <= 20:
                errors.add(f"'{metric}': graded scale {low}–{high} must be 2 to 21 whole points")
                continue
            criteria.append(
                CriterionSpec(
                    name,
                    metric,
                    int(low),
                    int(high),
                    {str(int(prop["worst"])): "worst", str(int(prop["best"])): "best"},
                )
            )
    by_metric = {c.label: c.name for c in criteria}

    def read(index, inst, errors, annotations, seen) -> InputSpec | None:
        if not isinstance(inst, dict):
            errors.add(f"instances[{index}]: each instance must be an object")
            return None
        ident = _instance_id(inst, index, seen, errors)
        where = f"instances[{index}] (id '{ident}')"
        body = inst.get("instance")
        if isinstance(body, str):
            text, output, extra = "", body, {}
        elif isinstance(body, dict):
            out_key = next((k for k in _OUTPUT_KEYS if isinstance(body.get(k), str)), None)
            in_key = next((k for k in _INPUT_KEYS if isinstance(body.get(k), str)), None)
            if out_key is None:
                errors.add(f"{where}: no output text (one of {', '.join(_OUTPUT_KEYS)})")
                return None
            text, output = (body[in_key] if in_key else ""), body[out_key]
            extra = {k: v for k, v in body.items() if k not in (in_key, out_key)}
        else:
            errors.add(f"{where}: 'instance' must be text or an object")
            return None
        if not output.strip():
            errors.add(f"{where}: the judged text is empty")
            return None
        per_position: dict[int, dict[str, Any]] = {}
        for metric, (_, scores) in judgebench.human_scores(inst, where, errors.add).items():
            if metric not in by_metric:
                errors.add(f"{where}: property '{metric}' is not declared in 'annotations'")
                continue
            for position, score in enumerate(scores):
                if score is None:
                    continue
                if not judgebench.score_fits(score, specs[metric]):
                    errors.add(
                        f"{where}: '{metric}' score {score!r} is outside its scale or labels"
                    )
                    continue
                per_position.setdefault(position, {})[by_metric[metric]] = score
        if annotations is not None:
            annotations += [
                AnnotationSpec(ident, str(position), scores=scores)
                for position, scores in sorted(per_position.items())
            ]
        return InputSpec(ident, text, {"response": output}, where, metadata=extra)

    return read, criteria


# --- assembly and cross-record checks ----------------------------------------------------------
def _validate_kind_options(
    kind: kinds.Kind, spec: StudySpec, index: _Index, errors: _Errors, faulty: bool
) -> None:
    """The kind's own options checked by the kind (``Kind.validate_options``): the
    validated options go to ``Study.options``; a kind that keeps ``Criterion`` rows gets
    its criteria back as ``spec.criteria`` (Likert: the default one when none is given),
    any other kind validates the study line's ``criteria`` list as given."""
    opts = spec.options
    for key in sorted(set(opts.get("options", {})) - kind.extra_options - {"criteria"}):
        errors.add(f"study: {kind.noun or kind.name} studies take no '{key}' option")
    raw = {
        **{k: v for k, v in opts.items() if k != "options"},
        **opts.get("options", {}),
        "gold": bool(index.gold),
    }
    if kind.criterion_rows:
        raw["criteria"] = [asdict(c) for c in spec.criteria]
    elif spec.criteria and "criteria" not in kind.extra_options:
        errors.add(f"study: {kind.noun or kind.name} studies take no 'criteria'")
        return
    if not kind.conversation_outputs:
        for where, names in index.conversations:
            errors.add(
                f"{where}: the output of {', '.join(names)} is a conversation; a "
                f"{kind.noun or kind.name} study's outputs are plain text"
            )
    else:
        spec.criteria = []  # the kind keeps the study line's list in its options
    try:
        validated = kind.validate_options(raw, None if faulty else len(spec.systems))
    except kinds.OptionError as exc:
        for message in exc.messages:
            errors.add(message)
        return
    kind_opts = {**raw, **validated}
    for where, record in index.golds:
        try:
            expected_of(kind, kind_opts, record)
        except kinds.AnswerError as exc:
            errors.add(f"{where}: 'gold': {exc.message}")
    if kind.criterion_rows:
        spec.criteria = [CriterionSpec(**c) for c in validated.pop("criteria", [])]
    for key in ANSWER_SWITCHES & validated.keys():  # the kind's default (ranking: no ties)
        opts[key] = validated.pop(key)
    opts["options"] = validated


def _assemble(options, criteria, declared, inputs, annotations=None, index=None) -> StudySpec:
    systems = list(declared) or (index.systems() if index else _systems_of(inputs))
    return StudySpec(dict(options), systems, inputs, criteria, annotations or [])


def _validate_spec(
    spec: StudySpec, index: _Index, errors: _Errors, check_options: OptionCheck | None = None
) -> None:
    """The checks across records and of the options as a whole, added to ``errors`` (which
    hold the faults of single records and options found while reading). Checks that
    count the inputs or systems are left out once a record is refused: they would count
    without it."""
    faulty = bool(errors)
    opts = spec.options
    opts.setdefault("name", "Imported study")
    flagged = set(errors.bad_options)

    def flag(key: str, message: str) -> None:
        flagged.add(key)
        errors.add(message)

    kind = kinds.get(opts["kind"]) if opts.get("kind") in kinds.NAMES else None
    if index.options_known:  # else a broken first line already stands for them
        if kind is None and "kind" not in flagged:
            names = ", ".join(kinds.NAMES)
            flag("kind", f"study: 'kind' must be one of {names} (got {opts.get('kind')!r})")
        for key, low in (("redundancy", 1), ("batch_size", 1), ("lease_seconds", 30)):
            if key in opts and opts[key] < low:
                flag(key, f"study: '{key}' must be at least {low}")
        if opts.get("collection", "all") not in ("all", "adaptive"):
            flag("collection", "study: 'collection' must be 'all' or 'adaptive'")
        elif opts.get("collection") == "adaptive" and kind is not None and not kind.adaptive:
            flag("collection", f"study: {kind.noun} studies cannot be collected adaptively")
        if "gamma" in opts and not 0 < opts["gamma"] <= 0.5:
            flag("gamma", "study: 'gamma' must be in (0, 0.5]")
        if check_options is not None:
            for message in check_options({k: v for k, v in opts.items() if k not in flagged}):
                errors.add(message)
    if opts.get("collection") == "adaptive" and spec.annotations:
        errors.add(
            "study: an adaptive study starts without labels; import this file with "
            "collection 'all' to analyse its labels"
        )
    if not index.ids and not faulty:
        errors.add("the file holds no inputs")
    names = [c.name for c in spec.criteria]
    if len(set(names)) != len(names):
        errors.add("study: criterion names must be distinct")
    for criterion in spec.criteria:
        if len(criterion.label) > MAX_NAME:
            errors.add(
                f"study: the label of criterion '{criterion.name}' is longer than "
                f"{MAX_NAME} characters"
            )
    for name in spec.systems:
        if not name.strip():
            errors.add("study: a system name is empty")
        elif len(name) > MAX_NAME:
            errors.add(f"study: system name '{name[:40]}…' is longer than {MAX_NAME} characters")
    if kind is not None:
        _validate_kind_options(kind, spec, index, errors, faulty)
    seen: dict[str, int] = {}
    known = set(spec.systems)
    shapes = list(index.shapes)
    for ident, place, shape in zip(index.ids, index.places, index.shape_of, strict=True):
        where = index.where.format(place, ident)
        if ident in seen:
            first = index.place.format(seen[ident])
            errors.add(f"{where}: duplicate input id '{ident}' (first on {first})")
            continue
        seen[ident] = place
        if len(ident) > MAX_NAME:
            errors.add(f"{where}: the input id is longer than {MAX_NAME} characters")
        if shape < 0:
            continue
        for name in shapes[shape]:
            if name not in known:
                errors.add(
                    f"{where}: unknown system '{name}' (declared: {', '.join(spec.systems)})"
                )
        missing = [name for name in spec.systems if name not in shapes[shape]]
        if missing:
            errors.add(f"{where}: missing output for system(s) {', '.join(missing)}")
