"""One answer names every fault of a study file (options and records alike), through the
service, the API and the admin form; and the reader keeps memory bounded by one input, not
the file (`bench/import_memory.py` measures the whole import)."""

from __future__ import annotations

import io
import json
import tracemalloc

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotator import importers, services
from annotator.errors import ImportRejected
from annotator.models import Input, Study
from tests.conftest import boss_client, make_superuser
from tests.unit.test_hostile_import import counts

#: The file of issue 16: an empty output, a line that is not JSON, a duplicate id and
#: redundancy 1000 (the model allows at most 100) in the study line.
FOUR_FAULTS = (
    b'{"study": {"name": "four faults", "kind": "pairwise", "redundancy": 1000}}\n'
    b'{"id": "q1", "input": "one", "outputs": {"a": "yes", "b": "no"}}\n'
    b'{"id": "q2", "input": "two", "outputs": {"a": "", "b": "no"}}\n'
    b'{"id": "q3", "input": "three", "outputs": {"a": "yes", "b": \n'
    b'{"id": "q1", "input": "one again", "outputs": {"a": "yes", "b": "no"}}\n'
)
FOUR_ERRORS = [
    "line 3 (input 'q2'): output of system 'a' is empty or not text",
    "line 4: not valid JSON (Expecting value at column 61)",
    "study: 'redundancy': Ensure this value is less than or equal to 100.",
    "line 5 (input 'q1'): duplicate input id 'q1' (first on line 2)",
]


def rejected(data: bytes, filename: str, **overrides) -> list[str]:
    before = counts()
    with pytest.raises(ImportRejected) as info:
        services.study_import(data, filename=filename, overrides=overrides or None)
    assert counts() == before, "a rejected file must leave every table unchanged"
    return info.value.errors


@pytest.mark.django_db
def test_four_faults_are_named_in_one_answer():
    assert rejected(FOUR_FAULTS, "four.jsonl") == FOUR_ERRORS


@pytest.mark.django_db
def test_the_file_imports_once_the_four_faults_are_fixed():
    fixed = (
        FOUR_FAULTS.replace(b"1000", b"3")
        .replace(b'"a": ""', b'"a": "maybe"')
        .replace(b'"b": \n', b'"b": "no"}}\n')
        .replace(b'"id": "q1", "input": "one again"', b'"id": "q4", "input": "one again"')
    )
    study = services.study_import(fixed, filename="four.jsonl")
    assert study.redundancy == 3
    assert sorted(study.inputs.values_list("external_id", flat=True)) == ["q1", "q2", "q3", "q4"]


@pytest.mark.django_db
def test_csv_faults_and_option_faults_in_one_answer():
    data = (
        b"input_id,input,system,output\n"
        b"q1,one,a,yes\n"
        b"q1,one,b,\n"  # empty output
        b"q2,two,a,yes,extra\n"  # wrong number of fields
        b"q3,three,a,yes\n"
        b"q3,three,a,again\n"  # duplicate output
        b"q3,three,b,no\n"
    )
    errors = rejected(data, "x.csv", kind="pairwise", redundancy=1000, lease_seconds=5)
    assert errors == [
        "line 3: output of system 'b' is empty",
        "line 4: wrong number of fields",
        "line 6: duplicate output for input 'q3' and system 'a'",
        "study: 'lease_seconds' must be at least 30",
        "study: 'redundancy': Ensure this value is less than or equal to 100.",
    ]


@pytest.mark.django_db
def test_judgebench_faults_and_option_faults_in_one_answer():
    doc = {
        "dataset": "faults",
        "annotations": [
            {"metric": "pref", "category": "categorical", "labels_list": ["model_a", "model_b"]}
        ],
        "instances": [
            {"id": "j0", "instance": {"input": "x", "output_a": "a", "output_b": "b"}},
            {"id": "j1", "instance": {"input": "x", "output_a": "", "output_b": "b"}},
            {"id": "j0", "instance": {"input": "x", "output_a": "a", "output_b": "b"}},
            {
                "id": "j3",
                "instance": {"input": "x", "output_a": "a", "output_b": "b"},
                "annotations": {"pref": {"individual_human_scores": ["model_c"]}},
            },
        ],
    }
    errors = rejected(json.dumps(doc).encode(), "x.json", max_strikes=0)
    assert errors == [
        "instances[1] (id 'j1'): output_a and output_b must be non-empty text",
        "instances[2]: duplicate id 'j0' (first at instances[0])",
        "instances[3] (id 'j3'): human score 'model_c' is not in labels_list "
        "['model_a', 'model_b']",
        "study: 'max_strikes': Ensure this value is greater than or equal to 1.",
    ]


@pytest.mark.django_db
def test_a_broken_study_line_is_named_alone_not_as_missing_options():
    data = b'{"study": {"kind": "pairwise",\n' + FOUR_FAULTS.split(b"\n", 1)[1]
    errors = rejected(data, "x.jsonl")
    assert errors[0].startswith("line 1: not valid JSON")
    assert not any(e.startswith("study:") for e in errors), errors


@pytest.mark.django_db
def test_the_cap_of_errors_holds():
    lines = [b'{"study": {"kind": "pairwise", "redundancy": 1000}}']
    lines += [b"not json"] * (importers.MAX_ERRORS + 50)
    errors = rejected(b"\n".join(lines), "x.jsonl")
    assert len(errors) == importers.MAX_ERRORS
    assert all(e.startswith(f"line {i + 2}: not valid JSON") for i, e in enumerate(errors))


@pytest.mark.django_db
def test_api_answers_400_naming_the_four_faults():
    user = make_superuser()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    upload = io.BytesIO(FOUR_FAULTS)
    upload.name = "four.jsonl"
    before = counts()
    response = client.post("/api/studies/import/", {"file": upload}, format="multipart")
    assert response.status_code == 400
    assert response.json() == {
        "detail": "The file was rejected; nothing was imported.",
        "errors": FOUR_ERRORS,
    }
    assert counts() == before


@pytest.mark.django_db
def test_admin_import_form_lists_the_four_faults():
    client = boss_client()
    upload = io.BytesIO(FOUR_FAULTS)
    upload.name = "four.jsonl"
    before = counts()
    response = client.post("/admin/annotator/study/import/", {"file": upload})
    assert response.status_code == 200
    assert response.context["errors"] == FOUR_ERRORS
    page = response.content.decode()
    for error in FOUR_ERRORS:
        assert error.replace("'", "&#x27;") in page
    assert counts() == before


def test_the_reader_holds_one_input_not_the_file():
    """Validating and then reading every input of an 8 MB JSONL or CSV file allocates far
    less than the file: the first pass keeps ids and system names, the second one input at
    a time (the whole file in memory would be 8 MB as bytes, again as text, and more as
    parsed records)."""
    outputs = {s: "an answer that goes on for a while " * 24 for s in ("a", "b", "c")}
    lines = [json.dumps({"study": {"kind": "pairwise"}})]
    lines += [json.dumps({"id": f"q{i}", "input": "?", "outputs": outputs}) for i in range(3000)]
    jsonl = ("\n".join(lines) + "\n").encode()
    rows = ["input_id,input,system,output"]
    rows += [f"q{i},?,{s},{t}" for i in range(3000) for s, t in outputs.items()]
    csv_data = ("\n".join(rows) + "\n").encode()
    for data, name in ((jsonl, "big.jsonl"), (csv_data, "big.csv")):
        assert len(data) > 7_000_000
        tracemalloc.start()
        try:
            spec = importers.scan_study_file(io.BytesIO(data), name, {"kind": "pairwise"})
            n = sum(1 for record in spec.inputs if record.outputs)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert n == len(spec.inputs) == 3000
        assert peak < 0.4 * len(data), (name, peak, len(data))


@pytest.mark.django_db
def test_a_csv_input_spread_over_the_file_keeps_its_place_and_outputs():
    data = (
        b"input_id,input,system,output\n"
        b"q1,one,a,1a\nq2,two,a,2a\nq2,two,b,2b\nq3,three,a,3a\nq1,one,b,1b\nq3,three,b,3b\n"
    )
    study = services.study_import(data, filename="x.csv", overrides={"kind": "pairwise"})
    inputs = Input.objects.filter(study=study).order_by("pk")
    assert [i.external_id for i in inputs] == ["q1", "q2", "q3"]
    assert {
        (o.input.external_id, o.system.name, o.text) for i in inputs for o in i.outputs.all()
    } == {(q, s, f"{q[1]}{s}") for q in ("q1", "q2", "q3") for s in ("a", "b")}
    assert Study.objects.get(pk=study.pk).items.count() == 3
