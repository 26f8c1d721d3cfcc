"""JSON Lines and CSV records, each with where it was read (``line N``).

A record that cannot be read comes as a message instead of a dict, so a reader can report
every faulty line at once. :func:`finite_number` is the one test of a number every reader uses.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Iterator
from typing import Any

#: One record: (where, the record) or (where, what is wrong with it).
Record = tuple[str, "dict | str"]


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
