"""JSON Lines and CSV records, each with where it was read (``line N``).

A record that cannot be read comes as a message instead of a dict, so a reader can report
every faulty line at once. :func:`study_jsonl` and :func:`study_csv` read the importer's
study bundles as a stream, strictly, and :func:`scan_csv` checks a CSV bundle in one pass;
:func:`finite_number` and :func:`unstorable` are the tests of a value every reader shares.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any

from formats.specs import Config, Errors, Index, Inputs, InputSpec, StudySpec, assemble
from formats.stream import Rejected, Stream

#: One record: (where, the record) or (where, what is wrong with it).
Record = tuple[str, "dict[str, Any] | str"]
#: Characters no database column takes: NUL, and halves of a surrogate pair on their own.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
#: The JSON escapes that decode to such a character (decoded UTF-8 holds neither raw).
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


def jsonl_records(text: str) -> Iterator[Record]:
    """One JSON object per non-blank line."""
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            yield f"line {number}", f"not valid JSON ({exc.msg} at column {exc.colno})"
            continue
        yield f"line {number}", record if isinstance(record, dict) else "not a JSON object"


def csv_records(text: str, required: Iterable[str] = ()) -> Iterator[Record]:
    """One dict per CSV row (header keys, empty cells left out); a header without the
    ``required`` columns is one fault on line 1."""
    reader = csv.DictReader(io.StringIO(text, newline=""))
    missing = set(required) - set(reader.fieldnames or [])
    if missing:
        yield "line 1", f"the CSV header lacks column(s) {', '.join(sorted(missing))}"
        return
    try:
        for row in reader:
            if None in row:
                yield f"line {reader.line_num}", "wrong number of fields"
                continue
            yield f"line {reader.line_num}", {k: v for k, v in row.items() if v not in ("", None)}
    except csv.Error as exc:
        yield f"line {reader.line_num}", f"malformed CSV ({exc})"


def json_list_records(text: str) -> tuple[list[Record], list[str]]:
    """The objects of a JSON array (``record I``), or the one fault that stops the reading."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        return [], [f"line {exc.lineno}: not valid JSON ({exc.msg})"]
    if not isinstance(doc, list):
        return [], ["a JSON file of records is a list of objects"]
    return [
        (f"record {i}", r if isinstance(r, dict) else "not a JSON object")
        for i, r in enumerate(doc)
    ], []


def finite_number(value: Any) -> float | None:
    """A number as a finite float, or ``None`` (not a number, a bool, NaN, ±inf, too big)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


class _DuplicateKey(ValueError):
    pass


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return obj


def _loads(text: str) -> tuple[Any, bool]:
    """``json.loads`` that refuses an object naming the same key twice; also whether the
    value may hold what no database stores (a NUL, a lone surrogate, NaN or ±inf), so that
    only then is it walked by :func:`unstorable` and clean files parse at full speed."""
    odd = False

    def number(literal: str) -> float:
        nonlocal odd
        value = float(literal)
        odd = odd or not math.isfinite(value)
        return value

    def constant(literal: str) -> float:  # NaN, Infinity, -Infinity
        nonlocal odd
        odd = True
        return float(literal)

    value = json.loads(text, object_pairs_hook=_object, parse_float=number, parse_constant=constant)
    return value, odd or _SUSPECT_ESCAPE.search(text) is not None


def _json_problem(exc: Exception) -> str:
    if isinstance(exc, _DuplicateKey):
        return f"the key '{exc.args[0]}' appears twice in one object"
    if isinstance(exc, RecursionError):
        return "not valid JSON (nested too deeply)"
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON ({exc.msg} at column {exc.colno})"
    if "integer string conversion" in str(exc):
        return "not valid JSON (a number has too many digits)"
    return f"not valid JSON ({exc})"


def unstorable(value: Any) -> str | None:
    """Why a parsed value cannot be stored, or ``None``: a NUL character, an unpaired
    surrogate (``\\ud800`` on its own) or a non-finite number (``NaN``, ``1e999``)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if bad := _UNSTORABLE.search(item):
                char = bad.group()
                if char == "\x00":
                    return "text contains a NUL character (\\u0000)"
                return f"text contains an unpaired surrogate (\\u{ord(char):04x})"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"a number is not finite ({item})"
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def study_jsonl(lines: Iterable[str]) -> Iterator[Record]:
    """A study bundle's JSON Lines, read strictly, one line at a time (``lines`` keep their
    breaks): each line with text as the JSON object it holds, or what is wrong with it (not
    JSON, a key named twice, not an object, or a value no database stores)."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            record, suspect = _loads(line[:-1] if line.endswith("\n") else line)
        except (ValueError, RecursionError) as exc:
            yield where, _json_problem(exc)
            continue
        if not isinstance(record, dict):
            yield where, "each line must be a JSON object"
            continue
        if suspect and (bad := unstorable(record)):
            yield where, bad
            continue
        yield where, record


def study_csv(lines: Iterable[str]) -> tuple[csv.DictReader[str], list[str]]:
    """A study bundle's CSV rows, read strictly one at a time (a quote left open or a stray
    quote after a closing one is an error, not text), and the header; :class:`ValueError`
    naming line 1 when the header is malformed. ``lines``: text read with ``newline=""``."""
    reader = csv.DictReader(lines, strict=True)
    try:
        header = reader.fieldnames or []
    except csv.Error as exc:
        raise ValueError(f"line 1: malformed CSV header ({exc})") from None
    return reader, list(header)


# --- the CSV study bundle, scanned ----------------------------------------------------------
CSV_REQUIRED = ("input_id", "input", "system", "output")


def _csv_rows(stream: Stream) -> tuple[csv.DictReader[str], list[str]]:
    try:
        return study_csv(stream.lines(newline=""))
    except ValueError as exc:
        raise Rejected([str(exc)]) from None


def _digest(text: str) -> int:
    """64 bits of a cryptographic hash of ``text`` (rows of one input must repeat its text)."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def scan_csv(stream: Stream, config: Config, errors: Errors) -> tuple[StudySpec, Index]:
    reader, header = _csv_rows(stream)
    missing = [c for c in CSV_REQUIRED if c not in header]
    if missing:
        raise Rejected([f"line 1: the CSV header lacks column(s) {', '.join(missing)}"])
    twice = sorted({c for c in header if header.count(c) > 1})
    if twice:
        raise Rejected([f"line 1: the CSV header names column(s) {', '.join(twice)} twice"])
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
    index = Index()
    for ident, n in number.items():
        if n in priorities and _csv_priority(priorities[n]) is None:
            errors.add(f"line {lines[n]}: priority '{priorities[n]}' is not a finite number")
        index.add(ident, lines[n], by_shape[shape_of[n]] if shape_of[n] >= 0 else None)
    counts = {ident: len(by_shape[shape_of[n]]) for ident, n in number.items()}
    del number, digests
    inputs = Inputs(lambda: _csv_inputs(stream, counts), len(counts))
    spec = assemble(config.options, [], config.systems or [], inputs, index=index)
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
