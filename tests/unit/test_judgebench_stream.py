"""Judge-Bench JSON is read as a stream (ijson): memory bounded by one instance, members
in any order, and every guarantee of the whole-document parser kept (duplicate keys,
non-finite numbers, lone surrogates, nesting depth, faults named by instance or by line and
column), also where a fault straddles two chunks of the file."""

from __future__ import annotations

import io
import json
import tracemalloc

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotator import importers, services
from annotator.errors import ImportRejected
from annotator.models import Annotation, Input, Output, Study
from tests.conftest import make_superuser
from tests.unit import test_hostile_import as hostile
from tests.unit.test_hostile_import import counts, judgebench, one_error, rejected

existing = hostile.existing  # the fixture: a database that already holds two studies

pytestmark = pytest.mark.django_db


def scan_errors(data: bytes) -> list[str]:
    with pytest.raises(ImportRejected) as caught:
        importers.scan_study_file(io.BytesIO(data), "x.json")
    return caught.value.errors


def instance(i: int, a: str = "ä", b: str = "ß") -> dict:
    return {
        "id": f"j{i}",
        "instance": {"input": f"Frage {i}", "output_a": a, "output_b": b},
        "annotations": {"pref": {"individual_human_scores": ["model_a", "model_b"]}},
    }


def test_the_reader_holds_one_instance_not_the_file():
    """An 8 MB Judge-Bench document on one line (as ``json.dump`` writes it) is validated
    and read back allocating far less than the file: the whole document parsed would be
    several times its size."""
    text = "an answer that goes on for a while " * 50
    doc = {
        "dataset": "big",
        "annotations": [
            {"metric": "pref", "category": "categorical", "labels_list": ["model_a", "model_b"]}
        ],
        "instances": [
            {"id": f"q{i}", "instance": {"input": "?", "output_a": text, "output_b": text}}
            for i in range(2000)
        ],
    }
    data = json.dumps(doc).encode()
    assert len(data) > 7_000_000 and data.count(b"\n") == 0
    tracemalloc.start()
    try:
        spec = importers.scan_study_file(io.BytesIO(data), "big.json")
        n = sum(1 for record in spec.inputs if record.outputs["output_b"] == text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert n == len(spec.inputs) == 2000 and spec.kind == "pairwise"
    assert peak < 0.4 * len(data), (peak, len(data))


def test_members_in_any_order_give_the_same_study():
    doc = judgebench(3)
    forward = importers.parse_study_file(json.dumps(doc).encode(), "a.json")
    backward = importers.parse_study_file(
        json.dumps(dict(reversed(list(doc.items())))).encode(), "b.json"
    )
    assert list(json.loads(json.dumps(dict(reversed(list(doc.items())))))) == [
        "instances",
        "annotations",
        "dataset",
    ]
    assert backward == forward
    assert forward.options["name"] == "hostile" and len(forward.annotations) == 6


def test_escaped_astral_characters_are_stored_and_lone_surrogates_named_by_line(existing):
    """``json.dumps`` escapes an emoji as a surrogate pair (kept); half a pair alone is
    refused with its line and escape (yajl would silently turn it into '?'); a literal
    backslash before ``ud83d`` is text, not an escape."""
    doc = judgebench(3)
    doc["instances"][0]["instance"]["output_a"] = "smile 😀"
    doc["instances"][1]["instance"]["output_a"] = "not an escape: \\ud83d"
    study = services.study_import(json.dumps(doc, indent=1).encode(), filename="ok.json")
    texts = set(Output.objects.filter(input__study=study).values_list("text", flat=True))
    assert {"smile 😀", "not an escape: \\ud83d"} <= texts
    data = json.dumps(judgebench(3), indent=1)
    lines = data.split("\n")
    at = next(i for i, line in enumerate(lines) if '"output_a"' in line)
    for escape in ("\\ud83d", "\\ude00", "\\udfff\\ud800"):
        bad = lines[:at] + [lines[at].replace('"\\u00e4"', f'"x{escape}y"')] + lines[at + 1 :]
        assert bad != lines
        errors = rejected("\n".join(bad).encode(), "x.json")
        first = escape[:6]
        assert errors[0] == f"line {at + 1}: text contains an unpaired surrogate ({first})"
    assert counts()["annotator.Study"] == existing["annotator.Study"] + 1


@pytest.mark.parametrize("shift", range(-14, 8))
def test_an_escape_across_two_chunks_is_judged_whole(shift):
    """The file is read 64 KiB at a time: a surrogate pair, a lone half and an escaped
    backslash before ``ud83d`` are told apart wherever the chunk boundary falls."""
    head = '{"annotations": [{"metric": "pref", "category": "categorical", '
    head += '"labels_list": ["model_a", "model_b"]}], "instances": ['
    pad = importers.CHUNK + shift - len(head) - len('{"id": "p", "instance": {"output_a": "')
    filler = f'{{"id": "p", "instance": {{"output_a": "{"x" * pad}'
    for escape, lone in (
        ("\\ud83d\\ude00", False),
        ("\\\\ud83d", False),
        ("\\ud83d", True),
        ("a\\ude00", True),
    ):
        data = (head + filler + escape + '", "output_b": "b"}}]}').encode()
        if lone:
            errors = scan_errors(data)
            assert errors == [f"line 1: text contains an unpaired surrogate ({escape[-6:]})"]
        else:
            spec = importers.parse_study_file(data, "x.json")
            assert spec.inputs[0].outputs["output_a"].endswith(json.loads(f'"{escape}"'))


def test_duplicate_keys_are_named_with_their_instance_and_every_fault_at_once(existing):
    doc = judgebench(3)
    doc["instances"][2]["instance"]["output_a"] = ""
    text = json.dumps(doc).replace('"output_b": "\\u00df"', '"output_b": "x", "output_b": "y"', 1)
    assert rejected(text.encode(), "x.json") == [
        "instances[0]: the key 'output_b' appears twice in one object",
        "instances[2] (id 'j2'): output_a and output_b must be non-empty text",
    ]
    text = json.dumps(judgebench(2)).replace('"dataset": "hostile"', '"dataset": 1, "dataset": 2')
    assert one_error(text.encode(), "x.json") == "the key 'dataset' appears twice in the document"
    text = json.dumps(judgebench(2)).replace(
        '"metric": "pref"', '"metric": "pref", "metric": "other"'
    )
    assert one_error(text.encode(), "x.json") == (
        "'annotations': the key 'metric' appears twice in one object"
    )
    text = json.dumps(judgebench(2))
    text = text[:-1] + ', "instances": ' + json.dumps(judgebench(1)["instances"]) + "}"
    assert one_error(text.encode(), "x.json") == (
        "the key 'instances' appears twice in the document"
    )
    assert counts() == existing


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_are_named_with_their_line_and_column(existing, literal):
    lines = json.dumps(judgebench(2), indent=1).split("\n")
    at = next(i for i, line in enumerate(lines) if '"id": "j1"' in line)
    lines[at] = lines[at].replace('"id": "j1"', f'"id": "j1", "score": {literal}')
    column = lines[at].index(literal) + 1
    assert one_error("\n".join(lines).encode(), "x.json") == (
        f"line {at + 1}: a number is not finite ({literal} at column {column})"
    )
    doc = judgebench(2)
    doc["instances"][1]["instance"]["weight"] = 1e999
    text = json.dumps(doc).replace("Infinity", "1e999")
    assert one_error(text.encode(), "x.json") == "instances[1]: a number is not finite (inf)"
    assert counts() == existing


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda line: line[:-1], "after key and value, inside map, I expect ',' or '}'"),
        (lambda line: line.replace('日本"', '日本" x'), "unexpected character"),
        (lambda line: line.replace('日本"', '日本\\q"'), "inside a string, '\\' occurs"),
    ],
)
def test_a_syntax_error_deep_in_a_large_file_is_named_at_json_s_line_and_column(damage, problem):
    """Beyond the first chunks, after multi-byte characters on its line: the position is
    the one ``json`` names (line, and column in characters)."""
    lines = json.dumps(judgebench(1200), indent=1, ensure_ascii=False).split("\n")
    assert len("\n".join(lines).encode()) > 3 * importers.CHUNK
    at = next(i for i, line in enumerate(lines) if '"Frage 1100 ' in line)
    lines[at] = damage(lines[at])
    data = "\n".join(lines)
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(data)
    error = expected.value
    assert error.lineno in (at + 1, at + 2)
    (message,) = scan_errors(data.encode())
    assert message.startswith(f"line {error.lineno}: not valid JSON ({problem}"), message
    # yajl stops at the end of the offending token, json names its start
    column = int(message.rsplit(" at column ", 1)[1].rstrip(")"))
    assert error.colno <= column <= error.colno + len('"output_a"'), (message, error.colno)


def test_nesting_deeper_than_the_limit_inside_an_instance_is_named():
    doc = judgebench(2)
    doc["instances"][1]["instance"]["deep"] = json.loads("[" * 600 + "]" * 600)
    lines = json.dumps(doc, indent=None, separators=(",", ":")).replace('"id":"j1"', '\n"id":"j1"')
    column = lines.split("\n")[1].index("[" * 10) + importers.MAX_DEPTH - 3
    assert scan_errors(lines.encode()) == [
        f"line 2: not valid JSON (nested too deeply at column {column})"
    ]
    doc["instances"][1]["instance"]["deep"] = json.loads("[" * 400 + "]" * 400)
    spec = importers.parse_study_file(json.dumps(doc).encode(), "ok.json")
    assert len(spec.inputs[1].metadata["deep"]) == 1


def test_the_api_imports_a_judgebench_upload_with_its_labels():
    user = make_superuser()
    api_client = APIClient()
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    doc = judgebench(5)
    upload = io.BytesIO(json.dumps(doc).encode())
    upload.name = "five.json"
    response = api_client.post("/api/studies/import/", {"file": upload}, format="multipart")
    assert response.status_code == 201, response.content
    study = Study.objects.get(pk=response.json()["id"])
    assert Input.objects.filter(study=study).count() == 5
    assert Annotation.objects.filter(study=study).count() == 10
