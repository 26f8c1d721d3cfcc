"""File formats for label export: JSON Lines and CSV (safe to open in a spreadsheet)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from typing import Any

from rest_framework.renderers import BaseRenderer

from .selectors import LABEL_FIELDS

#: A cell starting with one of these is read as a formula by spreadsheet programs.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def neutralise_cell(value: Any) -> Any:
    """Prefix text a spreadsheet would evaluate with an apostrophe (OWASP advice)."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def _rows(data: Any) -> list[dict]:
    if isinstance(data, dict) and "results" in data:
        return data["results"]
    if isinstance(data, dict):
        return [data]
    return list(data or [])


def jsonl_lines(rows: Iterable[dict]) -> Iterable[str]:
    for row in rows:
        yield json.dumps(row, ensure_ascii=False, default=str) + "\n"


def csv_text(rows: Iterable[dict], criteria: list[str] | None = None) -> Iterable[str]:
    """CSV of label rows; Likert scores spread over ``score_<criterion>`` columns."""
    if criteria is None:
        rows = list(rows)
        criteria = sorted({name for row in rows for name in (row.get("scores") or {})})
    fields = [f for f in LABEL_FIELDS if f != "scores"] + [f"score_{c}" for c in criteria]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(fields)
    yield buffer.getvalue()
    for row in rows:
        buffer.seek(0)
        buffer.truncate()
        scores = row.get("scores") or {}
        flat = {**row, **{f"score_{c}": scores.get(c) for c in criteria}}
        writer.writerow(
            ["" if flat.get(f) is None else neutralise_cell(flat.get(f)) for f in fields]
        )
        yield buffer.getvalue()


class JSONLinesRenderer(BaseRenderer):
    media_type = "application/jsonl"
    format = "jsonl"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        if isinstance(data, dict) and "detail" in data:
            return "".join(jsonl_lines([data])).encode()
        return "".join(jsonl_lines(_rows(data))).encode()


class CSVRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        if isinstance(data, dict) and "detail" in data:
            return f"error\n{neutralise_cell(str(data['detail']))}\n".encode()
        return "".join(csv_text(_rows(data))).encode()
