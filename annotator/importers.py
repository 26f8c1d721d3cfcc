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

The pure parts are in :mod:`formats`: the stream (:mod:`formats.stream`), the specs
(:mod:`formats.specs`), the scans of a CSV bundle (:mod:`formats.bundle`), a JSON Lines one
(:mod:`formats.jsonl_study`) and a Judge-Bench file (:mod:`formats.judgebench_study`).
Kept here: what needs Django or the kinds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

import kinds
from formats import stream as _stream
from formats.bundle import finite_number, scan_csv, unstorable
from formats.jsonl_study import scan_jsonl
from formats.judgebench import MAX_DEPTH as MAX_DEPTH  # the nesting limit, named here too
from formats.judgebench_study import scan_judgebench
from formats.specs import MAX_ERRORS as MAX_ERRORS  # named here too (docs, tests)
from formats.specs import (
    Config,
    Errors,
    Index,
    InputSpec,
    StudySpec,
)
from formats.stream import CHUNK as CHUNK  # named here too (tests)
from formats.stream import Source, Stream, is_object, sniff

from .errors import ImportRejected, ImportTooLarge
from .languages import LanguageError, language_list, supported

#: Default of the setting ``HUMEVAL_IMPORT_MAX_BYTES``.
DEFAULT_MAX_BYTES = 200 * 1024 * 1024
#: Longest input id, system name and criterion label (their database columns).
MAX_NAME = 200
#: Largest whole-number study option (a PostgreSQL ``integer``).
MAX_INT = 2**31 - 1

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
#: Study-line keys some kind accepts (``Kind.extra_options``); the kind validates them.
KIND_OPTIONS = frozenset().union(*(kinds.get(name).extra_options for name in kinds.NAMES))


def expected_of(kind: kinds.Bound, record: InputSpec) -> dict[str, Any]:
    """The known answer of ``record`` in system order: its ``"gold"`` read by the study's
    kind, else what the reader stored; ``kinds.AnswerError`` when the kind refuses it."""
    if record.gold is None:
        return record.expected
    return kind.parse_expected(
        record.gold, systems=list(record.outputs), outputs=list(record.outputs.values())
    )


# --- size and encoding -----------------------------------------------------------------------
def max_import_bytes() -> int:
    """The size limit of an imported file: the setting ``HUMEVAL_IMPORT_MAX_BYTES``."""
    from django.conf import settings

    return int(getattr(settings, "HUMEVAL_IMPORT_MAX_BYTES", DEFAULT_MAX_BYTES))


@contextmanager
def _rejections() -> Iterator[None]:
    """A file refused by a reader in :mod:`formats` as the service error the apps answer."""
    try:
        yield
    except _stream.TooLarge as exc:
        raise ImportTooLarge(exc.errors[0]) from None
    except _stream.Rejected as exc:
        raise ImportRejected(exc.errors) from None


def too_large(size: int | None, limit: int) -> ImportTooLarge:
    """The rejection of a file of ``size`` bytes (``None``: only known to exceed ``limit``)."""
    return ImportTooLarge(_stream.too_large(size, limit).errors[0])


def read_limited(source: Source, limit: int | None = None) -> bytes:
    """The bytes of a file to import (:func:`formats.stream.read_limited`); ``limit``
    defaults to the setting ``HUMEVAL_IMPORT_MAX_BYTES``."""
    with _rejections():
        return _stream.read_limited(source, max_import_bytes() if limit is None else limit)


def decode(data: bytes) -> str:
    """UTF-8 text (:func:`formats.stream.decode`), or :class:`ImportRejected` naming the line."""
    with _rejections():
        return _stream.decode(data)


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
    with _rejections():
        return _scan(data, filename, overrides, check_options)


def _scan(
    data: Source,
    filename: str,
    overrides: dict[str, Any] | None,
    check_options: OptionCheck | None,
) -> StudySpec:
    stream = Stream(data, max_import_bytes())
    first, more = sniff(stream)
    if first is None:
        raise ImportRejected(["the file is empty"])
    errors = Errors()
    config = _config(overrides or {}, errors)
    lower = filename.lower()
    if lower.endswith(".csv"):
        spec, index = scan_csv(stream, config, errors)
    elif lower.endswith(".jsonl") or (first.startswith("{") and more and is_object(first)):
        spec, index = scan_jsonl(stream, config, errors, _study_options)
    elif first.startswith("{") or lower.endswith(".json"):
        spec, index = scan_judgebench(stream, config, errors)
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


def _config(overrides: dict[str, Any], errors: Errors) -> Config:
    raw = dict(overrides)
    source = raw.pop("source", None)  # set by the caller, not a study file option
    if bad := unstorable(raw):
        raise ImportRejected([f"config: {bad}"])
    options, systems = _study_options(raw, "config", errors)
    if source is not None:
        options["source"] = str(source)[:300]
    return Config(
        options,
        raw["criteria"] if "criteria" in raw else None,
        systems if "systems" in raw else None,
    )


# --- study options -------------------------------------------------------------------------
def _languages(options: dict, where: str, errors: Errors) -> None:
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


def _study_options(raw: Any, where: str, errors: Errors) -> tuple[dict, list]:
    if not isinstance(raw, dict):
        errors.add(f"{where}: 'study' must be an object")
        return {}, []
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
    if not isinstance(raw_criteria, list):
        errors.add(f"{where}: 'criteria' must be a list of criteria")
    elif raw_criteria:  # the kind validates them (``Kind.validate_options``)
        options.setdefault("options", {})["criteria"] = raw_criteria
    systems = raw.get("systems") or []
    if not isinstance(systems, list) or not all(isinstance(s, str) and s.strip() for s in systems):
        errors.add(f"{where}: 'systems' must be a list of names")
        systems = []
    for name in sorted({s for s in systems if systems.count(s) > 1}):
        errors.add(f"{where}: 'systems' names '{name}' more than once")
    return options, list(dict.fromkeys(systems))


def _validate_kind_options(
    kind: kinds.Kind, spec: StudySpec, index: Index, errors: Errors, faulty: bool
) -> None:
    """The kind's own options checked by the kind (``Kind.validate_options``): the
    validated options, answer switches and criteria included, go to ``Study.options``."""
    opts = spec.options
    for message in kind.unknown_options(opts.get("options", {})):
        errors.add(f"study: {message}")
    raw = {
        **{k: v for k, v in opts.items() if k != "options"},
        **opts.get("options", {}),
        "gold": bool(index.gold),
    }
    if spec.criteria:  # a Judge-Bench file's properties, read as criteria
        raw["criteria"] = [asdict(c) for c in spec.criteria]
        spec.criteria = []
    if not kind.conversation_outputs:
        for where, names in index.conversations:
            errors.add(
                f"{where}: the output of {', '.join(names)} is a conversation; a "
                f"{kind.noun or kind.name} study's outputs are plain text"
            )
    for key in kinds.ANSWER_SWITCHES:  # study-line keys that live in the kind's options
        opts.pop(key, None)
    try:
        validated = kind.validate_options(raw, None if faulty else len(spec.systems))
    except kinds.OptionError as exc:
        for message in exc.messages:
            errors.add(message)
        return
    bound = kind.bind({**raw, **validated})
    for where, record in index.golds:
        try:
            expected_of(bound, record)
        except kinds.AnswerError as exc:
            errors.add(f"{where}: 'gold': {exc.message}")
    opts["options"] = validated


def _validate_spec(
    spec: StudySpec, index: Index, errors: Errors, check_options: OptionCheck | None = None
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
            checked = flagged | {*kinds.ANSWER_SWITCHES, "options"}  # the kind checks those
            for message in check_options({k: v for k, v in opts.items() if k not in checked}):
                errors.add(message)
    if opts.get("collection") == "adaptive" and spec.annotations:
        errors.add(
            "study: an adaptive study starts without labels; import this file with "
            "collection 'all' to analyse its labels"
        )
    if not index.ids and not faulty:
        errors.add("the file holds no inputs")
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
