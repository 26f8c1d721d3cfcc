"""Judge-prefilled error spans (issue 28): ``run_judge`` on an error-span study stores the
spans the judge proposes, parsed strictly, or the raw answer and the reason."""

from __future__ import annotations

import pytest

from annotator import judging
from annotator.models import JudgeRating
from tests.conftest import bundle
from tests.unit.test_judge import KEY, judge_server, run  # noqa: F401 - the fixture

TEXTS = {
    "e0": ("teh cat sat on the MAT", "a clean answer"),
    "e1": ("fine", "fine too"),  # the input says MALFORMED: unparseable answers
    "e2": ("BAD and BAD", "teh end"),
}


@pytest.fixture
def spans_study(make_study):
    records = [
        {
            "id": i,
            "input": f"question {i}" + (" MALFORMED" if i == "e1" else ""),
            "outputs": dict(zip(("m1", "m2"), texts, strict=True)),
        }
        for i, texts in TEXTS.items()
    ]
    return make_study(bundle(records, {"kind": "error_spans", "redundancy": 1}))


def test_run_judge_stores_the_proposed_spans(spans_study, judge_server, monkeypatch):  # noqa: F811
    monkeypatch.setenv(judging.API_KEY_ENV, KEY)
    server = judge_server()
    out, _ = run(spans_study, server)
    assert "6 ratings stored (2 unparseable), 0 already stored, 0 failed, of 6" in out
    prompts = [r["body"]["messages"][0]["content"] for r in server.requests()]
    assert all("List every error in the response." in p for p in prompts)
    got = {
        (r.input.external_id, r.system.name): r
        for r in JudgeRating.objects.filter(study=spans_study).select_related("input", "system")
    }
    r = got["e0", "m1"]
    assert (r.label, r.parse_ok) == ("errors", True)
    assert r.proposal["spans"] == [
        {"start": 0, "end": 3, "severity": "minor", "text": "teh"},
        {"start": 19, "end": 22, "severity": "major", "text": "MAT"},
    ]
    assert (got["e0", "m2"].label, got["e0", "m2"].proposal["spans"]) == ("error_free", [])
    # a repeated quote is placed at its next free occurrence
    assert [s["start"] for s in got["e2", "m1"].proposal["spans"]] == [0, 8]
    bad = got["e1", "m1"]
    assert (bad.parse_ok, bad.label, bad.score) == (False, "", None)
    assert bad.proposal["error"].startswith("not one JSON value")
    assert bad.raw_answer.startswith("Well, both have merits")
    out, _ = run(spans_study, server)
    assert "0 ratings stored (0 unparseable), 6 already stored" in out


def test_a_criterion_is_refused_for_error_spans(spans_study, judge_server, monkeypatch):  # noqa: F811
    from django.core.management.base import CommandError

    monkeypatch.setenv(judging.API_KEY_ENV, KEY)
    with pytest.raises(CommandError, match="no criteria"):
        run(spans_study, judge_server(), "--criterion", "x")
