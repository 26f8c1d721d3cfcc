"""The platform's report with a judge on every item and humans on some: the judge-assisted
(PPI++) block, and the style-controlled ranking read from the outputs' texts."""

from __future__ import annotations

import random

import pytest

from analysis import selectors as report_selectors
from annotator import judging, services
from tests.conftest import bundle
from tests.leasing import next_lease
from tests.unit.test_judge import KEY, MODEL, judge_servers, run

pytestmark = pytest.mark.django_db


@pytest.fixture
def judge_server(tmp_path):
    with judge_servers(tmp_path) as start:
        yield start


@pytest.fixture
def study(make_study):
    rng = random.Random(4)
    records = [
        {
            "id": f"q{i}",
            "input": f"question {i}",
            "outputs": {
                s: "word " * rng.randint(2, 40) + ("\n- a list item" if rng.random() < 0.3 else "")
                for s in ("s1", "s2", "s3")
            },
        }
        for i in range(20)
    ]
    return make_study(bundle(records, {"name": "assisted", "kind": "pairwise", "redundancy": 1}))


def test_report_assists_human_labels_with_the_judges_ratings(study, judge_server, monkeypatch):
    monkeypatch.setenv(judging.API_KEY_ENV, KEY)
    rng = random.Random(1)
    part = services.participation_enter(study=study, platform="link", external_id="w1")
    for _ in range(30):  # humans label half of the 60 items
        a = next_lease(participation=part)
        answer = rng.choices(["left", "right", "tie"], weights=[4, 4, 1])[0]
        services.annotation_submit(annotator=part.annotator, token=a.token, data={"answer": answer})
    run(study, judge_server())
    report = report_selectors.study_report(study, n_boot=0)
    prop = report["properties"][0]
    a = prop["assisted"]
    assert a["judge"] == MODEL
    assert a["n_human_items"] == 30 and a["n_judge_only_items"] == 30
    assert {r["system"] for r in a["ranking"]} == {"s1", "s2", "s3"} or a["ranking_reason"]
    assert len(a["win_rates"]) == 3
    style = prop["style"]
    assert style["humans"]["n"] == 30
    assert {c["covariate"] for c in style["humans"]["coefficients"]} >= {"length", "position"}
    # the stand-in judge always prefers the longer answer: no finite style-controlled fit
    (judge,) = style["judges"]
    assert judge["judge"] == MODEL and "separation" in judge["reason"]
