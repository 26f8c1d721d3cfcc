"""Judge-Bench out: ``export_labels --format judgebench`` and ``GET
/api/studies/<id>/judgebench/`` write a document both Judge-Bench readers take back, with
the same report and, through ``import_study``, the same labels."""

from __future__ import annotations

import io
import json
import math

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from analysis import selectors
from analysis.__main__ import report_for_file
from annotator import services
from annotator.models import Annotation, Study
from formats.judgebench_export import majority
from tests.conftest import pairwise_bundle
from tests.leasing import next_lease
from tests.unit.test_report import annotate, client_for

SAME = ("counts", "excluded", "scale", "label_distribution", "labels", "level", "perception")


def _close(a, b) -> bool:
    """Equal, numbers to 1e-9 (the items are summed in another order)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def _same_report(study, path) -> None:
    from_db = selectors.study_report(study, n_boot=50, worker_models=True)
    from_file = report_for_file(path, n_boot=50, worker_models=True)
    assert from_file["counts"] == from_db["counts"]
    for a, b in zip(from_db["properties"], from_file["properties"], strict=True):
        assert a["name"] == b["name"]
        for key in SAME:
            assert a[key] == b[key], key
        assert _close(a["reliability"], b["reliability"])
        # the instances name their systems: per-system figures are the study's
        for key in ("pairwise", "ranking"):
            assert (key in a) == (key in b), key
            if key in a:
                assert _close(a[key], b[key]), key
        # position k of individual_human_scores is one worker: per-worker figures survive
        ds = sorted(round(w["dawid_skene"], 9) for w in a["workers"]["workers"])
        assert ds == sorted(round(w["dawid_skene"], 9) for w in b["workers"]["workers"])


@pytest.mark.django_db
def test_pairwise_study_round_trip(make_study, tmp_path):
    study = make_study(pairwise_bundle(n_inputs=4, systems=("s1", "s2", "s3")), redundancy=3)
    annotate(study, workers=("w1", "w2", "w3", "w4"))
    out = tmp_path / "study.judgebench.json"
    call_command("export_labels", study.pk, format="judgebench", output=str(out))
    doc = json.loads(out.read_text())
    assert doc["annotations"] == [
        {"metric": "preference", "category": "categorical", "labels_list": ["A", "B", "tie"]}
    ]
    assert len(doc["instances"]) == study.items.count() == 12
    first = doc["instances"][0]["instance"]
    assert {"input", "output_a", "output_b", "system_a", "system_b", "input_id"} <= first.keys()
    _same_report(study, out)
    # import_study recreates it, the labels as imported labels, one per label
    buf = io.StringIO()
    call_command("import_study", str(out), stdout=buf)
    again = Study.objects.get(pk=int(buf.getvalue()))
    assert again.kind == "pairwise" and again.inputs.count() == 12
    mine = Annotation.objects.filter(study=study)
    theirs = Annotation.objects.filter(study=again)
    assert theirs.count() == mine.count() and set(theirs.values_list("source", flat=True)) == {
        "import"
    }
    for label in ("A", "B", "tie"):
        assert theirs.filter(value=label).count() == mine.filter(value=label).count()
    workers = theirs.order_by().values("annotator").distinct().count()
    assert workers == mine.order_by().values("annotator").distinct().count() == 3


@pytest.mark.django_db
def test_likert_study_round_trip(make_study, tmp_path):
    criteria = [
        {"name": "fluency", "label": "How fluent?", "scale": [1, 5]},
        {"name": "safe", "label": "Is it safe?", "labels": ["yes", "no"]},
    ]
    study = make_study(
        pairwise_bundle(n_inputs=3, systems=("m1", "m2"), kind="likert", criteria=criteria),
        redundancy=3,
    )
    annotate(
        study,
        workers=("a", "b", "c"),
        likert=lambda rng: {"fluency": rng.randint(1, 5), "safe": rng.choice(["yes", "no"])},
    )
    out = tmp_path / "likert.json"
    call_command("export_labels", study.pk, format="judgebench", output=str(out))
    doc = json.loads(out.read_text())
    assert doc["annotations"][0] == {
        "metric": "fluency",
        "category": "graded",
        "worst": 1,
        "best": 5,
        "description": "How fluent?",
    }
    assert doc["annotations"][1]["labels_list"] == ["yes", "no"]
    _same_report(study, out)
    buf = io.StringIO()
    call_command("import_study", str(out), stdout=buf)
    again = Study.objects.get(pk=int(buf.getvalue()))
    scores = sorted(
        json.dumps(s, sort_keys=True) for s in again.annotations.values_list("scores", flat=True)
    )
    assert scores == sorted(
        json.dumps(s, sort_keys=True) for s in study.annotations.values_list("scores", flat=True)
    )


def test_majority_is_the_most_frequent_label_or_none_on_a_tie():
    assert majority(["A", "B", "A", None]) == "A"
    assert majority(["A", "B"]) is None and majority([None]) is None


@pytest.mark.django_db
def test_api_route_serves_the_document_to_researchers_only(make_study, tmp_path):
    study = make_study(pairwise_bundle(n_inputs=2), redundancy=2)
    annotate(study, workers=("w1", "w2"))
    owner = User.objects.create_user("owner", password="x" * 12)
    study.researchers.add(owner)
    response = client_for(owner).get(f"/api/studies/{study.pk}/judgebench/")
    assert response.status_code == 200
    out = tmp_path / "api.json"
    out.write_bytes(response.getvalue())
    call_command("export_labels", study.pk, format="judgebench", output=str(tmp_path / "cli.json"))
    assert json.loads(out.read_text()) == json.loads((tmp_path / "cli.json").read_text())
    stranger = User.objects.create_user("stranger", password="x" * 12)
    assert client_for(stranger).get(f"/api/studies/{study.pk}/judgebench/").status_code == 404
    assert client_for().get(f"/api/studies/{study.pk}/judgebench/").status_code == 401


def _streamed_and_in_memory(study, tmp_path) -> tuple[str, dict]:
    from annotator.selectors import study_judgebench

    out = tmp_path / f"{study.pk}.json"
    call_command("export_labels", study.pk, format="judgebench", output=str(out))
    return out.read_text(encoding="utf-8"), study_judgebench(study)


@pytest.mark.django_db
@pytest.mark.parametrize("form", ["pairwise", "pairwise_criteria", "likert", "empty"])
def test_the_streamed_document_is_the_in_memory_one_byte_for_byte(make_study, tmp_path, form):
    """export_labels writes instance by instance (formats.judgebench_export.judgebench_chunks):
    the same JSON, even the same bytes, as json.dumps of the document built in memory."""
    if form == "likert":
        criteria = [
            {"name": "fluency", "label": "Fluent? ✓", "scale": [1, 5]},
            {"name": "safe", "label": "Safe?", "labels": ["yes", "no"]},
        ]
        bundle = pairwise_bundle(n_inputs=3, kind="likert", criteria=criteria)
    elif form == "pairwise_criteria":
        criteria = [{"name": "helpful", "label": "Helpful? ✓"}, {"name": "safe"}]
        bundle = pairwise_bundle(n_inputs=3, systems=("a", "b", "c"), criteria=criteria)
    else:
        bundle = pairwise_bundle(n_inputs=3, systems=("a", "b", "c"))
    study = make_study(bundle, redundancy=2)
    if form == "likert":
        annotate(
            study,
            workers=("a", "b"),
            likert=lambda rng: {"fluency": rng.randint(1, 5), "safe": rng.choice(["yes", "no"])},
        )
    elif form == "pairwise_criteria":
        for k, name in enumerate(("a", "b")):
            part = services.participation_enter(study=study, platform="link", external_id=name)
            while (a := next_lease(participation=part)) is not None:
                answer = {"answer-helpful": ("left", "right")[k], "answer-safe": "tie"}
                services.annotation_submit(annotator=part.annotator, token=a.token, data=answer)
    elif form == "pairwise":
        annotate(study, workers=("a", "b", "c"))
    text, document = _streamed_and_in_memory(study, tmp_path)
    assert json.loads(text) == document
    assert text == json.dumps(document, ensure_ascii=False, indent=1) + "\n"
    assert len(document["instances"]) == study.items.count()
    assert (form == "empty") == (not any(i["annotations"] for i in document["instances"]))


def test_the_writer_reports_progress_and_names_a_label_of_an_unknown_item():
    from formats import judgebench_export as jb

    props = [jb.JudgeBenchProperty(jb.PREFERENCE, ("A", "B"))]
    items = [{"id": i, "input": f"q{i}"} for i in range(1200)]
    seen: list[int] = []
    text = "".join(
        jb.judgebench_chunks("d", props, iter(items), [(3, "w", {"preference": "A"})], seen.append)
    )
    assert json.loads(text) == jb.judgebench_document(
        "d", props, items, [(3, "w", {"preference": "A"})]
    )
    assert seen == [500, 1000, 1200]
    with pytest.raises(ValueError, match="unknown item 5000"):
        "".join(jb.judgebench_chunks("d", props, iter(items), [(5000, "w", {"preference": "A"})]))
