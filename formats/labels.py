"""The platform's label exports read as rows (pure: no Django).

``manage.py export_labels`` and ``GET /api/studies/{id}/annotations/`` write the same rows
(columns as in :data:`LABEL_FIELDS`) as JSON Lines, a JSON array, the API's
JSON page (an object with ``next``, ``previous`` and a ``results`` list) or CSV.
:func:`read_export` tells them apart by the content (the suffix only breaks a tie) and returns
the rows with where each was read, plus every fault found; what the rows mean is the caller's
business (:mod:`analysis.loaders`).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from formats import judgebench
from formats.bundle import jsonl_records

#: Columns of an exported label, in order. ``score_<criterion>`` columns follow in CSV; a
#: kind adds its own after them (``Kind.export_fields``).
LABEL_FIELDS = (
    "annotation_id",
    "study_id",
    "study_config_version",
    "guideline_revision",
    "item_id",
    "input_id",
    "round",
    "is_gold",
    "system_a",
    "system_b",
    "left_system",
    "raw_answer",
    "label",
    "preferred_system",
    "scores",
    "annotator",
    "source",
    "time_spent_ms",
    "submitted_at",
    "flagged",
)


@dataclass
class LabelRows:
    """The rows of a label export (``rows``), where each was read (``line N``/``record I``),
    whether they come from CSV (cells carry the export's spreadsheet guard), the API page's
    ``next`` link, and every fault found (``where: what``)."""

    rows: pd.DataFrame
    where: list[str]
    csv: bool = False
    next_page: str | None = None
    errors: list[str] = field(default_factory=list)


def read_export(text: str, suffix: str = "") -> LabelRows | Any:
    """The rows of a label export in ``text``, or -- for a JSON document that is no label
    export (a Judge-Bench file, say) -- the document, read by :func:`formats.judgebench.load`
    (a JSON array by :func:`json.loads`: the export's rows, read fast).

    :class:`ValueError` when the text is not valid JSON where JSON is expected, or not CSV.
    """
    start, suffix = text.lstrip()[:1], suffix.lower()
    if suffix == ".csv" or start not in ("{", "["):
        return csv_rows(text)
    if suffix in (".jsonl", ".ndjson"):
        return jsonl_rows(text)
    if start == "[":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"line {exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno})"
            ) from None
    else:
        try:
            doc = judgebench.load(text.encode("utf-8"))
        except ValueError:
            if _first_line_is_object(text):  # one object per line: JSON Lines
                return jsonl_rows(text)
            raise
    if isinstance(doc, list):
        return list_rows(doc)
    if isinstance(doc, dict) and isinstance(doc.get("results"), list):
        page = list_rows(doc["results"])
        page.next_page = doc.get("next") or None
        return page
    if isinstance(doc, dict) and "instances" not in doc and {"item_id", "annotator"} <= doc.keys():
        return jsonl_rows(text)  # one JSON Lines row
    return doc


def _first_line_is_object(text: str) -> bool:
    line = next((x for x in text.splitlines() if x.strip()), "")
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False


def jsonl_rows(text: str) -> LabelRows:
    """One row per JSON Lines object."""
    records, where, errors = [], [], []
    for at, record in jsonl_records(text):
        if isinstance(record, str):
            errors.append(f"{at}: {record}")
            continue
        records.append(record)
        where.append(at)
    return LabelRows(pd.DataFrame.from_records(records), where, errors=errors)


def list_rows(doc: list[Any]) -> LabelRows:
    """The rows of a JSON array (``record I``); each element must be an object."""
    errors = [
        f"record {i}: not a JSON object" for i, r in enumerate(doc) if not isinstance(r, dict)
    ]
    if errors:
        return LabelRows(pd.DataFrame(), [], errors=errors)
    return LabelRows(pd.DataFrame.from_records(doc), [f"record {i}" for i in range(len(doc))])


def csv_rows(text: str) -> LabelRows:
    """The rows of a CSV export, every cell as text (``line N``, the header is line 1)."""
    try:
        frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, na_filter=False)
    except (pd.errors.ParserError, csv.Error) as exc:
        raise ValueError(f"malformed CSV ({exc})") from None
    except pd.errors.EmptyDataError:
        raise ValueError("the file is empty") from None
    return LabelRows(frame, [f"line {i + 2}" for i in range(len(frame))], csv=True)
