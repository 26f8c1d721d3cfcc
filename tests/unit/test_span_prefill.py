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
