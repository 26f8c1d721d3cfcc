"""A study's labels as the text of one export file, piece by piece: the one writer the
``export_labels`` command, the API's Judge-Bench export and the background export jobs
(``annotator/jobs.py``, the API's and the admin's) share. No HTML, no request."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator

from django.db.models import QuerySet

from . import selectors
from .models import Annotation, Study
from .renderers import csv_text, jsonl_lines

#: Each export format: its label and its file name's ending.
FORMATS = {
    "csv": ("CSV", ".csv"),
    "jsonl": ("JSON Lines", ".jsonl"),
    "json": ("JSON", ".json"),
    "judgebench": ("Judge-Bench", ".judgebench.json"),
}
#: Of ``FORMATS``, the ones of label rows (every kind has them).
ROW_FORMATS = ("csv", "jsonl", "json")


def export_total(study: Study, fmt: str) -> int:
    """What ``progress`` counts up to: instances (items) for Judge-Bench, labels otherwise."""
    if fmt == "judgebench":
        return study.items.count()
    return Annotation.objects.filter(study=study).count()


def export_chunks(
    study: Study,
    fmt: str,
    annotations: QuerySet[Annotation] | None = None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[str]:
    """The labels of ``annotations`` (default: all of the study's) as ``fmt`` (of
    :data:`FORMATS`); ``progress(n)`` is told the instances (Judge-Bench) or labels written.
    Judge-Bench of a kind without that form raises
    :class:`~annotator.errors.NoJudgeBenchForm` before anything is read."""
    if fmt == "judgebench":
        return selectors.study_judgebench_chunks(study, annotations, progress=progress)
    if fmt not in ROW_FORMATS:
        raise ValueError(f"no export format {fmt!r}")
    if annotations is None:
        annotations = selectors.annotations_for_export(study)
    rows = _counted(selectors.export_rows(annotations.iterator(chunk_size=2000)), progress)
    if fmt == "csv":
        kind = study.bound_kind()
        return iter(csv_text(rows, kind.score_columns(), kind.export_fields()))
    if fmt == "jsonl":
        return iter(jsonl_lines(rows))
    return json_array(rows)


def _counted(rows: Iterable[dict], progress: Callable[[int], None] | None) -> Iterator[dict]:
    n = 0
    for row in rows:
        yield row
        n += 1
        if progress is not None:
            progress(n)


def json_array(rows: Iterable[dict]) -> Iterator[str]:
    """Label rows as one JSON array, a row per line."""
    yield "["
    for i, row in enumerate(rows):
        yield ("," if i else "") + "\n" + json.dumps(row, ensure_ascii=False)
    yield "\n]\n"
