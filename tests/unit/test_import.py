"""Import: the bundle formats and Judge-Bench, and whole-file rejection of bad input."""

import json

import pytest

from annotator import services
from annotator.errors import ImportRejected
from annotator.models import Annotation, Annotator, Input, Item, Output, Study, System
from tests.conftest import JUDGEBENCH_EXAMPLE, LLMBAR, bundle, pairwise_bundle

MODELS = (Study, System, Input, Output, Item, Annotation, Annotator)


def counts():
    return {m.__name__: m.objects.count() for m in MODELS}


def rejected(data: bytes, filename: str = "x.jsonl") -> list[str]:
    before = counts()
    with pytest.raises(ImportRejected) as info:
        services.study_import(data, filename=filename)
    assert counts() == before, "a rejected file must leave the database unchanged"
    return info.value.errors


@pytest.mark.django_db
def test_llmbar_judgebench_import_creates_pairwise_study_with_expert_labels():
    study = services.study_import(LLMBAR.read_bytes(), filename=LLMBAR.name)
    doc = json.loads(LLMBAR.read_text())
    assert study.kind == "pairwise"
    assert study.name == doc["dataset"]
    assert list(study.systems.values_list("name", flat=True)) == ["output_a", "output_b"]
    assert study.inputs.count() == 100
    assert Item.objects.filter(study=study).count() == 100
    assert study.options["allow_tie"] is False  # labels_list is model_a / model_b only
    # individual_human_scores became imported annotations, normalised to system order
    first = doc["instances"][0]
    item = Item.objects.get(study=study, input__external_id=first["id"])
    labels = first["annotations"]["quality_single_turn"]["individual_human_scores"]
    assert [a.value for a in item.annotations.all()] == [
        {"model_a": "A", "model_b": "B"}[label] for label in labels
    ]
    assert item.expected == {"value": "A"}
    assert [a.answer for a in item.annotations.all()] == [
        {"value": a.value} for a in item.annotations.all()
    ]
    assert item.output_list()[0].text == first["instance"]["output_a"]
    expected_total = sum(
        len(i["annotations"]["quality_single_turn"]["individual_human_scores"])
        for i in doc["instances"]
    )
    assert Annotation.objects.filter(study=study, source="import").count() == expected_total
    assert Item.objects.filter(study=study, n_done__gt=0).count() == 0  # imports fill no quota


@pytest.mark.django_db
def test_judgebench_graded_schema_example_becomes_likert_with_scores():
    path = JUDGEBENCH_EXAMPLE
    study = services.study_import(path.read_bytes(), filename=path.name)
    assert study.kind == "likert"
    crits = {c["name"]: (c["scale_min"], c["scale_max"]) for c in study.options["criteria"]}
    assert crits == {"grammaticality": (1, 7), "fluency": (1, 7)}
    scores = list(
        Annotation.objects.filter(item__input__external_id="1")
        .order_by("annotator__external_id")
        .values_list("scores", flat=True)
    )
    assert scores == [
        {"grammaticality": 2, "fluency": 1},
        {"grammaticality": 6, "fluency": 6},
        {"grammaticality": 3, "fluency": 3},
    ]
    # annotator position i is the same pseudonymous annotator across instances
    assert Annotator.objects.filter(platform="import").count() == 3


@pytest.mark.django_db
def test_judgebench_categorical_single_instances():
    doc = {
        "dataset": "toxicity",
        "annotations": [
            {"metric": "toxic", "category": "categorical", "labels_list": ["yes", "no"]}
        ],
        "instances": [
            {
                "id": "t1",
                "instance": "a sentence",
                "annotations": {"toxic": {"individual_human_scores": ["no", "no", "yes"]}},
            },
        ],
    }
    study = services.study_import(json.dumps(doc).encode(), filename="tox.json")
    [criterion] = study.options["criteria"]
    assert criterion["labels"] == ["yes", "no"]
    assert sorted(a.scores["toxic"] for a in Annotation.objects.filter(study=study)) == [
        "no",
        "no",
        "yes",
    ]


@pytest.mark.django_db
def test_jsonl_bundle_with_config_and_three_systems():
    data = pairwise_bundle(n_inputs=4, systems=("s1", "s2", "s3"), redundancy=5, allow_tie=False)
    study = services.study_import(data, filename="b.jsonl")
    assert (study.redundancy, study.options["allow_tie"]) == (5, False)
    assert Item.objects.filter(study=study).count() == 4 * 3  # 3 pairs per input
    pairs = {
        tuple(o.system.name for o in item.output_list())
        for item in Item.objects.filter(study=study)
    }
    assert pairs == {("s1", "s2"), ("s1", "s3"), ("s2", "s3")}
    assert set(Item.objects.filter(study=study).values_list("redundancy", flat=True)) == {5}


@pytest.mark.django_db
def test_csv_bundle_long_format():
    text = (
        "input_id,input,system,output,priority\n"
        'q1,"What is 2+2?",m1,4,0.5\n'
        'q1,"What is 2+2?",m2,"four, I think",0.5\n'
        "q2,Name a colour,m1,red,\n"
        "q2,Name a colour,m2,blue,\n"
    )
    study = services.study_import(text.encode(), filename="s.csv", overrides={"kind": "pairwise"})
    assert study.inputs.get(external_id="q1").priority == 0.5
    assert study.inputs.get(external_id="q2").priority is None
    assert Output.objects.get(input__external_id="q1", system__name="m2").text == "four, I think"


@pytest.mark.django_db
def test_likert_bundle_default_criterion():
    study = services.study_import(
        bundle([{"id": 1, "input": "x", "outputs": {"m": "y"}}], {"kind": "likert"}),
        filename="l.jsonl",
    )
    assert [(c["name"], c["scale_min"], c["scale_max"]) for c in study.options["criteria"]] == [
        ("overall", 1, 5)
    ]


@pytest.mark.django_db
def test_broken_json_line_is_named():
    data = pairwise_bundle(n_inputs=3) + b'{"id": "x", "outputs": {\n'
    errors = rejected(data)
    assert errors == [
        "line 5: not valid JSON (Expecting property name enclosed in double quotes at column 25)"
    ]


@pytest.mark.django_db
def test_missing_output_duplicate_id_and_unknown_system_all_reported():
    study = {"kind": "pairwise", "systems": ["a", "b"]}
    data = bundle(
        [
            {"id": "1", "input": "x", "outputs": {"a": "o", "b": "o"}},
            {"id": "2", "input": "x", "outputs": {"a": "o"}},
            {"id": "1", "input": "x", "outputs": {"a": "o", "b": "o"}},
            {"id": "3", "input": "x", "outputs": {"a": "o", "b": "o", "zeta": "o"}},
        ],
        study,
    )
    errors = rejected(data)
    assert "line 3 (input '2'): missing output for system(s) b" in errors
    assert "line 4 (input '1'): duplicate input id '1' (first on line 2)" in errors
    assert "line 5 (input '3'): unknown system 'zeta' (declared: a, b)" in errors
    assert len(errors) == 3


@pytest.mark.django_db
def test_wrong_encoding_is_rejected_with_line():
    data = pairwise_bundle(n_inputs=2).replace(b"question 1", "questión 1".encode("latin-1"))
    errors = rejected(data)
    assert len(errors) == 1 and errors[0].startswith("line 3: the file is not UTF-8 text")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("data", "filename", "message"),
    [
        (b"", "e.jsonl", "the file is empty"),
        (b'{"study": {"kind": "pairwise"}}\n', "e.jsonl", "the file holds no inputs"),
        (
            b'{"study": {"kind": "rating"}}\n{"id":1,"outputs":{"a":"x","b":"y"}}\n',
            "e.jsonl",
            "study: 'kind' must be one of pairwise, likert, ranking, error_spans (got 'rating')",
        ),
        (
            b'{"id":1,"outputs":{"a":"x","b":""}}\n{"id":2,"outputs":{"a":"x","b":"y"}}',
            "e.jsonl",
            "line 1 (input '1'): output of system 'b' is empty or not text",
        ),
        (
            b"input_id,input,system\nq,x,m\n",
            "e.csv",
            "line 1: the CSV header lacks column(s) output",
        ),
        (
            b'{"instances": [], "annotations": [{"metric": "m", "category": "graded"}]',
            "e.json",
            "line 1: not valid JSON (the file ends before the document is complete at column 73)",
        ),
    ],
)
def test_bad_files_are_rejected_whole(data, filename, message):
    assert message in rejected(data, filename)


@pytest.mark.django_db
def test_judgebench_score_outside_labels_and_duplicate_ids():
    doc = json.loads(LLMBAR.read_text())
    doc["instances"][3]["annotations"]["quality_single_turn"]["individual_human_scores"] = [
        "model_c"
    ]
    doc["instances"][7]["id"] = doc["instances"][2]["id"]
    errors = rejected(json.dumps(doc).encode(), "bad.json")
    iid = doc["instances"][3]["id"]
    assert (
        f"instances[3] (id '{iid}'): human score 'model_c' is not in labels_list "
        "['model_a', 'model_b']" in errors
    )
    assert (
        f"instances[7]: duplicate id '{doc['instances'][2]['id']}' (first at instances[2])"
        in errors
    )


@pytest.mark.django_db
def test_import_command_prints_id_and_fails_cleanly(tmp_path, capsys):
    from django.core.management import CommandError, call_command

    good = tmp_path / "good.jsonl"
    good.write_bytes(pairwise_bundle())
    call_command("import_study", str(good))
    study_id = int(capsys.readouterr().out.strip())
    assert Study.objects.get(pk=study_id).name == "pairwise test"
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"id": 1}\n')
    before = counts()
    with pytest.raises(CommandError, match="line 1 \\(input '1'\\): missing 'outputs'"):
        call_command("import_study", str(bad))
    assert counts() == before
