"""Judge and metric rating files (JSONL, CSV or a JSON array): one rating per record.

Read by ``manage.py import_ratings`` (:mod:`annotator.ratings`) and by the analysis CLI's
``--judge`` (:func:`analysis.loaders_judges.read_judges`); each checks the records against its own
data. A record has ``judge``, ``input_id`` and ``system`` (or, for the analysis, ``item``),
optionally ``system_b`` and ``criterion``, and a ``label`` or a ``score``.
"""

from __future__ import annotations

from formats.bundle import Record, csv_records, json_list_records, jsonl_records


def rating_records(
    text: str, filename: str = "", required: tuple[str, ...] = ()
) -> tuple[list[Record], list[str]]:
    """The records of a rating file by its suffix: ``.csv``, ``.json`` (an array) or JSON
    Lines, and the fault that stopped the reading (a JSON array that is not one). A record
    that cannot be read is a message (see :mod:`formats.bundle`)."""
    suffix = filename.lower().rsplit(".", 1)[-1] if "." in filename else ""
    if suffix == "csv":
        return list(csv_records(text, required)), []
    if suffix == "json":
        return json_list_records(text)
    return list(jsonl_records(text)), []
