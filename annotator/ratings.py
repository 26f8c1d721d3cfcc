"""Parse judge and metric rating files (JSONL or CSV); no database access.

One rating per line or row, with ``input_id`` and ``system`` and then one of

* ``score``: a number for that output (a metric such as COMET, or a Likert score when a
  ``criterion`` is named);
* ``system_b`` and ``label``: a preference between two outputs, ``A`` / ``B`` / ``tie`` in
  the order ``system``, ``system_b`` (a system name is accepted for the preferred side);
* ``label``: a categorical judgement of one output on a ``criterion``.

``judge`` names the metric or model; a command-line ``--judge`` fills it where missing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from formats.ratings import rating_records
from formats.vocab import PREFERENCES

from .errors import ImportRejected
from .importers import MAX_ERRORS, decode


@dataclass(frozen=True)
class RatingSpec:
    judge: str
    input_id: str
    system: str
    other_system: str
    criterion: str
    score: float | None
    label: str
    where: str

    @property
    def key(self) -> tuple:
        return (self.judge, self.input_id, self.system, self.other_system, self.criterion)


def parse_ratings(data: bytes, filename: str = "", judge: str = "") -> list[RatingSpec]:
    text = decode(data)
    if not text.strip():
        raise ImportRejected(["the file is empty"])
    csv_or_jsonl = filename if filename.lower().endswith(".csv") else ""
    records, _ = rating_records(text, csv_or_jsonl, required=("input_id", "system"))
    errors: list[str] = []
    ratings: list[RatingSpec] = []
    seen: dict[tuple, str] = {}
    for where, record in records:
        if isinstance(record, str):
            errors.append(f"{where}: {record}")
            continue
        rating = _rating(record, where, judge, errors)
        if rating is None:
            continue
        if rating.key in seen:
            errors.append(f"{where}: the same rating again (first on {seen[rating.key]})")
            continue
        seen[rating.key] = where
        ratings.append(rating)
    if not ratings and not errors:
        errors.append("the file holds no ratings")
    if errors:
        raise ImportRejected(errors[:MAX_ERRORS])
    return ratings


def _text(record: dict, key: str) -> str:
    value = record.get(key, "")
    return (
        str(value).strip() if isinstance(value, str | int) and not isinstance(value, bool) else ""
    )


def _rating(record: dict, where: str, default_judge: str, errors: list[str]) -> RatingSpec | None:
    judge = _text(record, "judge") or default_judge
    input_id, system = _text(record, "input_id"), _text(record, "system")
    other = _text(record, "system_b")
    criterion = _text(record, "criterion")
    if not judge:
        errors.append(f"{where}: no 'judge' (give one in the file or with --judge)")
        return None
    if not input_id or not system:
        errors.append(f"{where}: 'input_id' and 'system' are required")
        return None
    score: float | None = None
    if "score" in record:
        try:
            score = float(record["score"])
        except (TypeError, ValueError):
            errors.append(f"{where}: score {record['score']!r} is not a number")
            return None
        if not math.isfinite(score):
            errors.append(f"{where}: score must be a finite number")
            return None
    label = _text(record, "label")
    if other:
        if other == system:
            errors.append(f"{where}: 'system' and 'system_b' must differ")
            return None
        named = {system.lower(): "A", other.lower(): "B"}
        label = PREFERENCES.get(label.lower()) or named.get(label.lower(), "")
        if not label:
            errors.append(
                f"{where}: a preference 'label' is A, B or tie (got {record.get('label')!r})"
            )
            return None
        score = None
    elif score is None and not label:
        errors.append(f"{where}: give a 'score', or 'system_b' and a preference 'label'")
        return None
    return RatingSpec(
        judge[:100], input_id, system, other, criterion[:60], score, label[:60], where
    )
