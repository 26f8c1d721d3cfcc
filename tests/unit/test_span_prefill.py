"""Judge-prefilled error spans, the kind's side (kinds/span_prefill.py): the study options and
the answer's origins and actions checked against the suggestions the item showed."""

from __future__ import annotations

import json

import pytest

from kinds import span_prefill
from kinds.base import AnswerError, OptionError
from kinds.error_spans import KIND

TEXT = "teh cat sat on the MAT"
SUGGESTED = [
    {"start": 0, "end": 3, "severity": "minor", "text": "teh"},
    {"start": 19, "end": 22, "severity": "major", "text": "MAT"},
]


def opts(state="shown", spans=SUGGESTED):
    base = KIND.validate_options({"prefill_spans": "on", "prefill_control_share": 0.25}, 1)
    return base | {span_prefill.SHOWN: {"state": state, "spans": spans}}


def span(start, end, severity, **meta):
    return {"start": start, "end": end, "severity": severity, "text": TEXT[start:end]} | meta


def parse(o, spans, score="60"):
    return KIND.parse_answer(o, [0], {"spans": json.dumps(spans), "score": score}, outputs=[TEXT])


def test_options_are_checked():
    assert KIND.validate_options({}, 1) == {"categories": [], "max_spans": 100}
    on = KIND.validate_options({"prefill_spans": "on", "prefill_control_share": 0.2}, 1)
    assert on["prefill_spans"] == "on" and on["prefill_control_share"] == 0.2
    for bad, msg in [
        ({"prefill_spans": "yes"}, "prefill_spans must be off or on"),
        ({"prefill_spans": "on", "prefill_control_share": 1.5}, "from 0 to 1"),
        ({"prefill_spans": "on", "prefill_control_share": True}, "from 0 to 1"),
        ({"prefill_control_share": 0.3}, "need prefill_spans: on"),
        ({"prefill_spans": "on", "prefill_judge": 3}, "prefill_judge must be"),
    ]:
        with pytest.raises(OptionError, match=msg):
            KIND.validate_options(bad, 1)


def test_accept_edit_delete_and_new_are_recorded():
    answer = parse(
        opts(),
        [
            span(0, 3, "major", origin="judge", action="edited", suggestion=0),
            span(4, 7, "minor", origin="worker", action="new"),
            span(19, 22, "major", origin="judge", action="deleted", suggestion=1),
        ],
    )
    assert [(s["start"], s["origin"], s["action"]) for s in answer["spans"]] == [
        (0, "judge", "edited"),
        (4, "worker", "new"),
    ]
    assert answer["spans"][0]["suggestion"] == 0 and "suggestion" not in answer["spans"][1]
    assert answer["deleted"] == [
        {"start": 19, "end": 22, "severity": "major", "category": None, "text": "MAT"}
        | {"suggestion": 1}
    ]
    assert answer["prefill"] == "shown" and answer["score"] == 60
    accepted = parse(
        opts(),
        [
            span(0, 3, "minor", origin="judge", action="accepted", suggestion=0),
            span(19, 22, "major", origin="judge", action="accepted", suggestion=1),
        ],
    )
    assert [s["action"] for s in accepted["spans"]] == ["accepted", "accepted"]
    assert accepted["deleted"] == []
    row = KIND.export_row(opts(), accepted, ["m1"], [0])
    assert row["prefill"] == "shown" and row["spans"][1]["origin"] == "judge"
    assert set(KIND.export_fields(opts())) == set(KIND.export_types(opts()))


def test_the_control_share_has_no_suggestions_and_records_it():
    answer = parse(opts("control", []), [span(4, 7, "minor")])
    assert answer["prefill"] == "control"
    assert answer["spans"][0] | {} == span(4, 7, "minor", category=None) | {
        "origin": "worker",
        "action": "new",
    }
    with pytest.raises(AnswerError, match="no such suggestion"):
        parse(
            opts("control", []),
            [span(0, 3, "minor", origin="judge", action="accepted", suggestion=0)],
        )


@pytest.mark.parametrize(
    ("spans", "message"),
    [
        ([span(0, 3, "minor", origin="judge", action="accepted", suggestion=0)], "every suggested"),
        (
            [
                span(0, 3, "major", origin="judge", action="accepted", suggestion=0),
                span(19, 22, "major", origin="judge", action="accepted", suggestion=1),
            ],
            "left as it was",
        ),
        (
            [
                span(0, 3, "minor", origin="judge", action="accepted", suggestion=0),
                span(19, 22, "major", origin="judge", action="accepted", suggestion=0),
            ],
            "given twice",
        ),
        ([span(4, 7, "minor", origin="model")], "origin must be"),
        ([span(4, 7, "minor", origin="worker", action="accepted")], "action new"),
        (
            [
                span(0, 3, "minor", origin="judge", action="kept", suggestion=0),
                span(19, 22, "major", origin="judge", action="deleted", suggestion=1),
            ],
            "accepted, edited or deleted",
        ),
    ],
)
def test_bad_prefill_answers_are_refused(spans, message):
    with pytest.raises(AnswerError, match=message):
        parse(opts(), spans)


def test_without_prefill_the_answer_is_unchanged():
    o = KIND.validate_options({}, 1)
    answer = parse(o, [span(4, 7, "minor")])
    assert answer == {"spans": [span(4, 7, "minor", category=None)], "score": 60}
    with pytest.raises(AnswerError, match="unknown field"):
        parse(o, [span(4, 7, "minor", origin="worker")])


def test_the_report_block_from_stored_answers():
    """A worked example: 3 suggestions (1 accepted, 1 edited, 1 deleted), 2 spans the workers
    added; F1 judge vs final 0.5 and 1 (mean 0.75); with suggestions 1.5 spans and score 55,
    without (control) 0.5 spans and score 80."""
    from analysis.prefill_report import prefill_block

    def s(start, end, severity, origin, action):
        return {"start": start, "end": end, "severity": severity, "origin": origin} | {
            "action": action
        }

    answers = [
        {
            "spans": [s(0, 3, "minor", "judge", "accepted"), s(4, 7, "minor", "worker", "new")],
            "deleted": [{"start": 19, "end": 22, "severity": "major"}],
            "prefill": "shown",
            "score": 60,
        },
        {"spans": [s(15, 18, "major", "judge", "edited")], "prefill": "shown", "score": 50},
        {"spans": [s(0, 3, "minor", "worker", "new")], "prefill": "control", "score": 70},
        {"spans": [], "prefill": "control", "score": 90},
    ]
    block = prefill_block([1, 2, 3, 4], answers)
    assert block["labels"] == {"shown": 2, "control": 2, "none": 0}
    rates = block["rates"]
    assert rates["n_suggestions"] == 3 and rates["added_by_humans"] == 2
    assert [rates[a]["n"] for a in ("accepted", "edited", "deleted")] == [1, 1, 1]
    assert rates["accepted"]["value"] == pytest.approx(1 / 3)
    assert block["judge_final_f1"] == pytest.approx(0.75)
    effect = {row["figure"]: row for row in block["effect"]}
    assert (effect["n_spans"]["with"], effect["n_spans"]["without"]) == (1.5, 0.5)
    assert effect["n_spans"]["difference"] == pytest.approx(1.0)
    assert effect["score"]["difference"] == pytest.approx(-25.0)
    assert prefill_block([1], [{"spans": [], "score": 3}]) is None  # no prefill: no block


def test_a_resized_suggestion_keeps_its_origin_and_the_judges_offsets():
    """Issue 28: moving a suggestion's boundaries is an edit (``resized``), recorded with the
    offsets the judge proposed (taken from what the item showed, not from the form)."""
    answer = parse(
        opts(),
        [
            span(0, 7, "minor", origin="judge", action="edited", suggestion=0, resized=True),
            span(15, 22, "minor", origin="judge", action="edited", suggestion=1, resized=True),
        ],
    )
    first, second = answer["spans"]
    assert (first["text"], first["origin"], first["action"], first["suggestion"]) == (
        "teh cat",
        "judge",
        "edited",
        0,
    )
    assert first["resized"] is True
    assert (first["suggested_start"], first["suggested_end"]) == (0, 3)
    assert (second["start"], second["end"], second["severity"]) == (15, 22, "minor")
    assert (second["suggested_start"], second["suggested_end"]) == (19, 22)
    regraded = parse(
        opts(),
        [
            span(0, 3, "major", origin="judge", action="edited", suggestion=0, resized=False),
            span(19, 22, "major", origin="judge", action="accepted", suggestion=1),
        ],
    )["spans"]
    assert regraded[0]["resized"] is False and "suggested_start" not in regraded[0]
    assert "resized" not in regraded[1]
    row = KIND.export_row(opts(), answer, ["m1"], [0])
    assert row["spans"][0]["suggested_start"] == 0
    assert set(row["spans"][0]) <= set(KIND.export_types(opts())["spans"][0])


def _ok_other():
    return span(19, 22, "major", origin="judge", action="accepted", suggestion=1)


@pytest.mark.parametrize(
    ("first", "message"),
    [
        # moved without saying so, or said so without moving
        (span(0, 7, "minor", origin="judge", action="edited", suggestion=0), "resized must say"),
        (
            span(0, 3, "major", origin="judge", action="edited", suggestion=0, resized=True),
            "resized must say",
        ),
        # an accepted or deleted suggestion cannot move, nor claim to be resized
        (span(0, 7, "minor", origin="judge", action="accepted", suggestion=0), "left as it was"),
        (
            span(0, 7, "minor", origin="judge", action="accepted", suggestion=0, resized=True),
            "on an edited suggestion",
        ),
        (
            span(0, 3, "minor", origin="judge", action="edited", suggestion=0, resized="yes"),
            "true or false",
        ),
        # a worker's own span is never resized; a resized one points to a shown suggestion
        (span(0, 7, "minor", origin="worker", action="new", resized=True), "action new"),
        (
            span(0, 7, "minor", origin="judge", action="edited", suggestion=5, resized=True),
            "no such suggestion",
        ),
        # the new boundaries are checked against the text
        (
            span(0, 3, "minor", origin="judge", action="edited", suggestion=0, resized=True)
            | {"end": 99},
            "needs 0 <= start < end",
        ),
        (
            span(0, 7, "minor", origin="judge", action="edited", suggestion=0, resized=True)
            | {"text": "teh dog"},
            "text does not match",
        ),
        (
            span(0, 20, "minor", origin="judge", action="edited", suggestion=0, resized=True),
            "overlap",
        ),
    ],
)
def test_bad_resized_suggestions_are_refused(first, message):
    with pytest.raises(AnswerError, match=message):
        parse(opts(), [first, _ok_other()])


def test_the_report_block_counts_a_resize_as_an_edit_and_f1_uses_the_judges_offsets():
    """Worked example: 4 suggestions: 1 accepted, 1 re-graded, 1 resized (0-3 → 0-7), 1
    deleted. Rates: accepted, deleted 1/4 each; edited 2/4 = resized 1/4 + re-graded 1/4.
    F1 judge vs final, characters: annotation 0 judge {0-3, 19-22} vs final {0-7}: overlap 3,
    P = 3/6, R = 3/7, F1 = 2·3/(6+7) = 6/13; annotation 1 judge {4-7, 8-11} vs final the same
    (re-graded only): 1. Mean (6/13 + 1)/2 = 19/26."""
    from statsmodels.stats.proportion import proportion_confint

    from analysis.prefill_report import prefill_block

    resized = {"start": 0, "end": 7, "severity": "minor", "origin": "judge", "action": "edited"}
    resized |= {"resized": True, "suggested_start": 0, "suggested_end": 3}
    regraded = {"start": 4, "end": 7, "severity": "major", "origin": "judge", "action": "edited"}
    accepted = {"start": 8, "end": 11, "severity": "minor", "origin": "judge"}
    accepted |= {"action": "accepted"}
    answers = [
        {
            "spans": [resized],
            "deleted": [{"start": 19, "end": 22, "severity": "major"}],
            "prefill": "shown",
            "score": 60,
        },
        {"spans": [regraded | {"resized": False}, accepted], "prefill": "shown", "score": 50},
    ]
    block = prefill_block([1, 2], answers)
    rates = block["rates"]
    assert rates["n_suggestions"] == 4
    counts = {a: rates[a]["n"] for a in ("accepted", "edited", "resized", "regraded", "deleted")}
    assert counts == {"accepted": 1, "edited": 2, "resized": 1, "regraded": 1, "deleted": 1}
    assert rates["edited"]["value"] == 0.5 and rates["resized"]["value"] == 0.25
    low, high = proportion_confint(1, 4, alpha=0.05, method="wilson")
    assert (rates["resized"]["low"], rates["resized"]["high"]) == pytest.approx((low, high))
    assert block["judge_final_f1"] == pytest.approx(19 / 26)


@pytest.mark.django_db
def test_a_bad_resize_posted_to_the_task_page_is_a_400_and_stores_nothing(make_study):
    """The worker's form through the real view: a resized suggestion the item never showed,
    or one whose flag disagrees with its offsets, gets a 400 and changes nothing; the right
    one is stored with the judge's offsets."""
    from django.test import Client

    from annotator import services
    from annotator.models import Annotation, Assignment, Output
    from tests.conftest import bundle

    study = make_study(
        bundle(
            [{"id": "d1", "input": "Describe it.", "outputs": {"sys": TEXT}}],
            {"kind": "error_spans", "redundancy": 1, "prefill_spans": "on"},
        )
    )
    output = Output.objects.get(input__study=study)
    services.judge_rating_record(
        study,
        judge="j",
        input_id=output.input_id,
        system_id=output.system_id,
        raw_answer="{}",
        label="errors",
        proposal={"spans": SUGGESTED, "located": 2},
    )
    client = Client()
    client.get(f"/w/{study.public_id}/", {"worker": "w1"})
    assert "esa-move-here" in client.get(f"/w/{study.public_id}/task/").content.decode()
    token = str(Assignment.objects.get().token)
    other = span(19, 22, "major", origin="judge", action="accepted", suggestion=1)
    for first in (
        span(0, 7, "minor", origin="judge", action="edited", suggestion=2, resized=True),
        span(0, 7, "minor", origin="judge", action="edited", suggestion=0),
        span(0, 7, "minor", origin="judge", action="edited", suggestion=0, resized=True)
        | {"end": 40},
    ):
        data = {"token": token, "spans": json.dumps([first, other]), "score": "50"}
        response = client.post(f"/w/{study.public_id}/task/", data)
        assert response.status_code == 400, first
        assert Annotation.objects.count() == 0
    good = span(0, 7, "minor", origin="judge", action="edited", suggestion=0, resized=True)
    data = {"token": token, "spans": json.dumps([good, other]), "score": "50"}
    assert client.post(f"/w/{study.public_id}/task/", data).status_code == 302
    stored = Annotation.objects.get().answer["spans"][0]
    assert (stored["start"], stored["end"], stored["resized"]) == (0, 7, True)
    assert (stored["suggested_start"], stored["suggested_end"]) == (0, 3)
