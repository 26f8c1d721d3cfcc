"""The study report of an error-span study: the kind's section (``Kind.report_sections`` →
``analysis.sections``) built from the answers stored through the services, in the report
dict (JSON), its text and its HTML; the score also as the report's ordinal property."""

import json

import pytest

from analysis.render import render_html, render_text
from analysis.selectors import study_report
from annotator import services
from annotator.models import Item
from tests.conftest import bundle

TEXTS = {"good": "All fine here.", "bad": "Wrong words everywhere."}


def esa_study():
    records = [{"id": f"in{i}", "input": f"source {i}", "outputs": dict(TEXTS)} for i in range(3)]
    study = {"name": "esa report", "kind": "error_spans", "redundancy": 2, "open_links": True}
    return services.study_import(bundle(records, study), filename="esa.jsonl")


def span(text, start, end, severity):
    return {"start": start, "end": end, "severity": severity, "text": text[start:end]}


def annotate(study, worker, marks):
    """``worker`` answers every item: on "bad" outputs the spans ``marks`` gives, score 30;
    on "good" outputs no spans, score 90."""
    part = services.participation_enter(study=study, platform="link", external_id=worker)
    while (a := services.assignment_next(participation=part)) is not None:
        output = a.item.output_list()[0]
        bad = output.system.name == "bad"
        spans = [span(output.text, *m) for m in marks] if bad else []
        data = {"spans": json.dumps(spans), "score": "30" if bad else "90"}
        services.annotation_submit(annotator=part.annotator, token=a.token, data=data)


@pytest.mark.django_db
def test_the_report_has_the_error_span_section_in_json_text_and_html():
    study = esa_study()
    assert Item.objects.filter(study=study).count() == 6
    annotate(study, "w1", [(0, 5, "major")])  # "Wrong"
    annotate(study, "w2", [(0, 5, "minor"), (6, 11, "minor")])  # "Wrong", "words"
    report = study_report(study, n_boot=50)
    assert [p["name"] for p in report["properties"]] == ["score"]
    (section,) = report["sections"]
    assert section["name"] == "error_spans"
    figures = {f["name"]: f for f in section["figures"]}
    # on "bad" outputs: 5 shared of 5 + 10 marked characters -> F1 2*5/15; "good": both empty, 1
    f1 = figures["Span agreement: character F1"]["value"]
    assert f1 == pytest.approx((2 * 5 / 15 + 1) / 2)
    assert figures["Span agreement: character F1, same severity"]["value"] == pytest.approx(0.5)
    alpha = figures["Score: Krippendorff's alpha (interval)"]["value"]
    assert alpha == pytest.approx(1.0)  # both workers gave the same scores
    by_score, mqm = section["tables"]
    assert [row[0] for row in by_score["rows"]] == ["good", "bad"]
    assert by_score["rows"][0][3] == 90.0 and by_score["rows"][1][3] == 30.0
    mqm_rows = {row[0]: row for row in mqm["rows"]}
    # bad: w1 3 × one major (15), w2 3 × two minors (6): 21 over 6 labels
    assert mqm_rows["bad"][1:] == [6, 6, 3, 21.0, 3.5]
    assert mqm_rows["good"][1:] == [6, 0, 0, 0.0, 0.0]
    json.dumps(report)  # JSON-serialisable
    text = render_text(report)
    assert "== Error spans ==" in text and "MQM-weighted errors per system" in text
    html = render_html(report)
    assert "Error spans" in html and "Systems by mean score (0-100)" in html


@pytest.mark.django_db
def test_a_study_without_labels_reports_the_section_as_undefined():
    study = esa_study()
    report = study_report(study, n_boot=20)
    (section,) = report["sections"]
    assert all(f["value"] is None and f["reason"] for f in section["figures"])
    assert "undefined" in render_text(report)
    render_html(report)
