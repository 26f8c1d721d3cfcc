"""The study report of an error-span study: the kind's section (``Kind.report_sections`` →
``analysis.sections``) built from the answers stored through the services, in the report
dict (JSON), its text and its HTML; the score also as the report's ordinal property."""

import json

import pytest

from analysis.render import render_html, render_text
from analysis.selectors import study_report
from annotator import services
from annotator.models import Item
from tests.conftest import bundle, make_superuser
from tests.leasing import next_lease

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
    while (a := next_lease(participation=part)) is not None:
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


@pytest.mark.django_db
def test_the_score_is_an_interval_scale_in_bins_and_the_kinds_section_comes_first(client):
    """Issue 25, item 7: the 0-100 score is not 101 categories. Its alpha is at the interval
    level, its distributions and perception chart use ten bins (0-9 ... 90-100), the page
    states the range and bins instead of listing 0, 1, 2, ..., 100, and the error-span section
    comes before the score's property section (on the page and in the text report)."""

    from analysis import agreement

    study = esa_study()
    annotate(study, "w1", [(0, 5, "major")])  # bad 30, good 90
    annotate(study, "w2", [(0, 5, "minor")])
    report = study_report(study, n_boot=20)
    (prop,) = report["properties"]
    assert prop["level"] == "interval" and prop["bins"][0] == "0–9" and len(prop["bins"]) == 10
    assert [r["metric"] for r in prop["reliability"]] == ["krippendorff_alpha"]
    section_alpha = report["sections"][0]["figures"][0]
    assert prop["reliability"][0]["value"] == pytest.approx(section_alpha["value"], abs=1e-12)
    dist = {d["label"]: d["count"] for d in prop["label_distribution"]}
    assert list(dist) == prop["bins"] and dist["30–39"] == 6 and dist["90–100"] == 6
    assert all(len(r["distribution"]) == 10 for r in prop["likert"]["systems"])
    bins = prop["perception"]["bins"]
    assert len(bins) == 10 and prop["perception"]["labels"] == prop["bins"]
    assert {b["bin"]: b["items"] for b in bins if b["items"]} == {"30–39": 3.0, "90–100": 3.0}
    assert prop["workers"]["reason"].startswith("not computed for a fine score")
    # the same alpha as the analysis core at the interval level on the scores
    from analysis.selectors import study_dataset

    ann = study_dataset(study).annotations
    ann = ann[~ann["is_gold"]]
    core = agreement.krippendorff_alpha(ann, level="interval", labels=list(range(101)), n_boot=0)
    assert prop["reliability"][0]["value"] == pytest.approx(core.value, abs=1e-9)

    text = render_text(report)
    assert text.index("== Error spans ==") < text.index("== score (")
    assert "0, 1, 2" not in text and "Scores 0–100, shown in 10 bins" in text

    user = make_superuser()
    client.force_login(user)
    html = client.get(f"/studies/{study.pk}/report/", {"n_boot": 20}).content.decode()
    body = html.split('class="hv-report"')[1]
    headings = [h.split("<")[0].strip() for h in body.split("<h2>")[1:]]
    assert headings[:2] == ["Error spans", "score"]
    assert "0, 1, 2, 3" not in body and ", 99, 100" not in body
    assert "scores 0–100, shown in 10 bins: 0–9, 10–19, …, 90–100" in body
    perception = body.split("<h3>Perception chart</h3>")[1]
    assert "human median = 30–39" in perception and "human median = 31" not in perception
    assert "no items in this bin" not in perception  # empty bins named once, not drawn
    assert "No items in the bins 0–9, 10–19" in perception
