"""File formats for label export: JSON Lines and CSV (safe to open in a spreadsheet)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from typing import Any

from rest_framework.renderers import BaseRenderer

from formats.labels import LABEL_FIELDS

#: A cell starting with one of these is read as a formula by spreadsheet programs.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def neutralise_cell(value: Any) -> Any:
    """Prefix text a spreadsheet would evaluate with an apostrophe (OWASP advice)."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def _is_error(data: Any, renderer_context: dict | None) -> bool:
    response = (renderer_context or {}).get("response")
    if response is not None:
        return response.status_code >= 400
    return isinstance(data, dict) and "detail" in data


def error_messages(data: Any) -> list[str]:
    """The messages of an error body: ``detail``, then ``field: message`` per field error."""
    if not isinstance(data, dict):
        return [str(m) for m in (data if isinstance(data, list) else [data])]
    messages = [str(data["detail"])] if "detail" in data else []
    messages += [str(e) for e in data.get("errors", [])]
    for field, errors in data.items():
        if field in ("detail", "errors"):
            continue
        for error in errors if isinstance(errors, list) else [errors]:
            messages.append(f"{field}: {error}")
    return messages


def _rows(data: Any) -> list[dict]:
    if isinstance(data, dict) and "results" in data:
        return data["results"]
    if isinstance(data, dict):
        return [data]
    return list(data or [])


def jsonl_lines(rows: Iterable[dict]) -> Iterable[str]:
    for row in rows:
        yield json.dumps(row, ensure_ascii=False, default=str) + "\n"


def csv_text(
    rows: Iterable[dict], criteria: list[str] | None = None, extra: list[str] | None = None
) -> Iterable[str]:
    """CSV of label rows; Likert scores spread over ``score_<criterion>`` columns, then the
    kind's own columns (``extra``, ``Kind.export_fields``; read from the rows when not
    given), a list or object in them written as JSON."""
    if criteria is None or extra is None:
        rows = list(rows)
    if criteria is None:
        criteria = sorted({name for row in rows for name in (row.get("scores") or {})})
    if extra is None:
        extra = list(dict.fromkeys(k for row in rows for k in row if k not in LABEL_FIELDS))
    fields = [f for f in LABEL_FIELDS if f != "scores"] + [f"score_{c}" for c in criteria]
    fields += [f for f in extra if f not in fields]
    buffer = io.StringIO()
    # CRLF rows (RFC 4180): the writer quotes a cell only if it holds a character of the
    # line terminator, so with "\n" a cell holding a bare CR went out unquoted and every
    # reader split the row there, making the text after the CR a new, un-neutralised cell
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(fields)
    yield buffer.getvalue()
    for row in rows:
        buffer.seek(0)
        buffer.truncate()
        scores = row.get("scores") or {}
        flat = {**row, **{f"score_{c}": scores.get(c) for c in criteria}}
        flat |= {f: json.dumps(row[f]) for f in extra if isinstance(row.get(f), list | dict)}
        writer.writerow(
            ["" if flat.get(f) is None else neutralise_cell(flat.get(f)) for f in fields]
        )
        yield buffer.getvalue()


class JSONLinesRenderer(BaseRenderer):
    media_type = "application/jsonl"
    format = "jsonl"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        """Label rows, one per line; an error is one line, its JSON body."""
        if _is_error(data, renderer_context):
            return "".join(jsonl_lines([data])).encode()
        return "".join(jsonl_lines(_rows(data))).encode()


class CSVRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        """Label rows; an error is an ``error`` column with one row per message (never the
        label header over empty cells, which would read as a label)."""
        if _is_error(data, renderer_context):
            buffer = io.StringIO()
            writer = csv.writer(buffer, lineterminator="\r\n")
            writer.writerow(["error"])
            writer.writerows([neutralise_cell(m)] for m in error_messages(data))
            return buffer.getvalue().encode()
        return "".join(csv_text(_rows(data))).encode()
