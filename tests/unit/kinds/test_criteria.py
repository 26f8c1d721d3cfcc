"""Pairwise criteria, strength and rationale (kinds/criteria.py): options, answers in system
order, pair preferences and export columns, with worked examples."""

from __future__ import annotations

import pytest

from kinds import criteria as C  # noqa: N812
from kinds.base import AnswerError, OptionError

TWO = [
    {"name": "helpful", "label": "Which is more helpful?"},
    {"name": "safe", "label": "Which is safer?"},
]
ALL_ALLOWED = {"allow_tie": True, "allow_both_good": True, "allow_both_bad": True}


def opts(**kw):
    base = C.validate_options({k: v for k, v in kw.items() if not k.startswith("allow_")})
    return base | {k: v for k, v in kw.items() if k.startswith("allow_")}


# --- options ------------------------------------------------------------------------------
def test_absent_options_are_the_implicit_preference_criterion():
    o = C.validate_options({})
    assert o == {"criteria": [], "strength": False, "rationale": "none"}
    assert C.validate_options({"criteria": []}) == o  # what the importer passes for none
    assert C.criteria_of(o) == [{"name": "preference", "label": ""}]
    assert C.overall_criterion(o) == "preference"  # the pairwise kind's overall criterion
    assert not C.uses_form(o)
    assert C.field_name(o, "preference") == "answer"
    assert C.export_fields(o) == []


def test_declared_criteria_are_kept_in_order_and_labels_default_to_the_name():
    o = C.validate_options(
        {"criteria": [{"name": "safe"}, {"name": "helpful", "label": " Helpful? "}]}
    )
    assert o["criteria"] == [
        {"name": "safe", "label": "safe"},
        {"name": "helpful", "label": "Helpful?"},
    ]
    assert C.uses_form(o)
    assert C.field_name(o, "safe") == "answer-safe"


@pytest.mark.parametrize(
    ("given", "fragment"),
    [
        ({"criteria": "helpful"}, "must be a list"),
        ({"criteria": [{"name": f"c{k}"} for k in range(9)]}, "at most 8"),
        ({"criteria": [{"name": "a"}, {"name": "a"}]}, "appears twice"),
        ({"criteria": [{"name": "Helpful"}]}, "lower-case"),
        ({"criteria": [{"name": "has space"}]}, "lower-case"),
        ({"criteria": [{"name": "x" * 41}]}, "at most 40"),
        ({"criteria": [{"name": "a", "lable": "typo"}]}, "unknown keys lable"),
        ({"criteria": [{"name": "a", "label": "  "}]}, "label must be"),
        ({"criteria": [{"name": "rationale"}]}, "reserved"),
        ({"criteria": [{"name": "label"}]}, "reserved"),
        ({"criteria": [{"name": "score_x"}]}, "reserved"),
        ({"criteria": [{"name": "a"}, {"name": "a_strength"}]}, "clash"),
        ({"criteria": ["a"]}, "must be an object"),
        ({"strength": "yes"}, "strength must be true or false"),
        ({"rationale": "mandatory"}, "rationale must be one of none, optional, required"),
    ],
)
def test_bad_options_are_refused_with_a_message(given, fragment):
    with pytest.raises(OptionError) as err:
        C.validate_options(given)
    assert any(fragment in m for m in err.value.messages), err.value.messages


def test_every_option_problem_is_listed_at_once():
    with pytest.raises(OptionError) as err:
        C.validate_options({"criteria": [{"name": "A"}], "strength": 1, "rationale": "x"})
    assert len(err.value.messages) == 3


# --- the implicit criterion reproduces today's normalisation ------------------------------
#: Today's rule (annotator.choices.normalise before issue 18): display order [0, 1] shows A on
#: the left; a side-neutral answer is the same in both orders.
TODAY = {
    ("left", (0, 1)): "A",
    ("left", (1, 0)): "B",
    ("right", (0, 1)): "B",
    ("right", (1, 0)): "A",
} | {(r, o): r for r in ("tie", "both_good", "both_bad") for o in ((0, 1), (1, 0))}


@pytest.mark.parametrize(("raw", "order"), sorted(TODAY))
def test_implicit_criterion_matches_todays_normalisation(raw, order):
    """The pairwise kind (which delegates to kinds.criteria) stores today's answer."""
    from kinds.pairwise import KIND

    o = KIND.validate_options(ALL_ALLOWED, 2)
    answer = KIND.parse_answer(o, list(order), {"answer": raw})
    today = TODAY[raw, order]
    # exactly today's stored answer: no criteria, no strength
    assert answer == {"raw": raw, "value": today}
    expected = {"A": 1.0, "B": 0.0}.get(today, 0.5)
    assert KIND.pair_preferences(o, answer) == [("preference", 0, 1, expected)]
    assert KIND.gold_correct(o, {"value": today}, answer)
    assert KIND.overall_criterion(o) == "preference"
    assert KIND.export_fields(o) == [] and KIND.export_row(o, answer, ["x", "y"], order) == {}


def test_implicit_criterion_offers_todays_answers_in_todays_order():
    # annotator.models.Study.pairwise_answers: left, right, then tie/both_good/both_bad if allowed
    assert [v for v, _ in C.answer_choices({"allow_tie": True})] == ["left", "right", "tie"]
    assert [v for v, _ in C.answer_choices({"allow_tie": False, "allow_both_bad": True})] == [
        "left",
        "right",
        "both_bad",
    ]
    assert [v for v, _ in C.answer_choices(ALL_ALLOWED)] == [
        "left",
        "right",
        "tie",
        "both_good",
        "both_bad",
    ]


@pytest.mark.parametrize("raw", ["tie", "both_good"])
def test_a_side_neutral_answer_the_study_does_not_allow_is_refused(raw):
    with pytest.raises(AnswerError, match="Unknown answer"):
        C.parse_answer(opts(allow_tie=False), [0, 1], {"answer": raw})


# --- strength: worked examples ------------------------------------------------------------
# Display order [1, 0]: B is on the left. "left>>" then means B ≫ A: value B, strength -2.
@pytest.mark.parametrize(
    ("raw", "order", "value", "strength"),
    [
        ("left>>", [0, 1], "A", 2),
        ("left>", [0, 1], "A", 1),
        ("=", [0, 1], "tie", 0),
        ("right>", [0, 1], "B", -1),
        ("right>>", [0, 1], "B", -2),
        ("left>>", [1, 0], "B", -2),
        ("left>", [1, 0], "B", -1),
        ("=", [1, 0], "tie", 0),
        ("right>", [1, 0], "A", 1),
        ("right>>", [1, 0], "A", 2),
    ],
)
def test_five_point_answers_in_system_order(raw, order, value, strength):
    o = opts(strength=True)
    answer = C.parse_answer(o, order, {"answer": raw})
    assert answer["criteria"]["preference"] == {"raw": raw, "value": value, "strength": strength}
    assert (answer["raw"], answer["value"]) == (raw, value)
    # strong and weak wins are the same win for the protocol
    assert C.pair_preferences(o, answer) == [
        ("preference", 0, 1, {"A": 1.0, "B": 0.0, "tie": 0.5}[value])
    ]
    assert C.export_row(o, answer) == {"preference_strength": strength}


def test_the_five_point_value_agrees_with_todays_normalisation_of_its_side():
    for raw, side in [
        ("left>>", "left"),
        ("left>", "left"),
        ("right>", "right"),
        ("right>>", "right"),
    ]:
        for order in ([0, 1], [1, 0]):
            got = C.normalise(raw, order, strength=True)["value"]
            assert got == TODAY[side, tuple(order)]


def test_strength_without_ties_has_four_points_and_keeps_both_good():
    o = opts(strength=True, allow_tie=False, allow_both_good=True)
    assert [v for v, _ in C.answer_choices(o)] == [
        "left>>",
        "left>",
        "right>",
        "right>>",
        "both_good",
    ]
    assert C.parse_answer(o, [0, 1], {"answer": "both_good"})["criteria"]["preference"] == {
        "raw": "both_good",
        "value": "both_good",
        "strength": 0,
    }
    with pytest.raises(AnswerError):
        C.parse_answer(o, [0, 1], {"answer": "="})


def test_a_three_way_answer_is_refused_on_a_five_point_study_and_vice_versa():
    with pytest.raises(AnswerError):
        C.parse_answer(opts(strength=True), [0, 1], {"answer": "left"})
    with pytest.raises(AnswerError):
        C.parse_answer(opts(), [0, 1], {"answer": "left>"})


# --- several criteria ---------------------------------------------------------------------
def test_several_criteria_worked_example():
    o = opts(criteria=TWO, strength=True, rationale="optional")
    data = {
        "answer-helpful": "right>>",
        "answer-safe": "=",
        "rationale": "  B cites a source.\r\nA not.  ",
    }
    answer = C.parse_answer(o, [1, 0], data)  # B shown left, A shown right
    assert answer == {
        "criteria": {
            "helpful": {"raw": "right>>", "value": "A", "strength": 2},
            "safe": {"raw": "=", "value": "tie", "strength": 0},
        },
        "raw": "right>>",
        "value": "A",
        "rationale": "B cites a source.\nA not.",
    }
    assert C.pair_preferences(o, answer) == [("helpful", 0, 1, 1.0), ("safe", 0, 1, 0.5)]
    assert C.export_fields(o) == [
        "helpful",
        "helpful_strength",
        "safe",
        "safe_strength",
        "rationale",
    ]
    assert C.export_row(o, answer) == {
        "helpful": "A",
        "helpful_strength": 2,
        "safe": "tie",
        "safe_strength": 0,
        "rationale": "B cites a source.\nA not.",
    }


def test_the_summary_is_the_overall_criterion_when_declared_else_the_first():
    o = opts(criteria=[{"name": "safe"}, {"name": "overall"}])
    answer = C.parse_answer(o, [0, 1], {"answer-safe": "left", "answer-overall": "right"})
    assert (answer["raw"], answer["value"]) == ("right", "B")
    assert C.overall_criterion(o) == "overall"
    o = opts(criteria=TWO)
    answer = C.parse_answer(o, [0, 1], {"answer-helpful": "left", "answer-safe": "right"})
    assert (answer["raw"], answer["value"]) == ("left", "A")
    assert C.overall_criterion(o) == "helpful"
    assert C.export_fields(o) == ["helpful", "safe"]


def test_a_missing_criterion_answer_names_the_criterion():
    o = opts(criteria=TWO)
    with pytest.raises(AnswerError, match="Which is safer"):
        C.parse_answer(o, [0, 1], {"answer-helpful": "left"})
    with pytest.raises(AnswerError, match="Which is safer"):
        C.parse_answer(o, [0, 1], {"answer-helpful": "left", "answer-safe": ""})
    # the implicit field name does not answer a declared criterion
    with pytest.raises(AnswerError):
        C.parse_answer(o, [0, 1], {"answer": "left"})


def test_non_text_json_values_are_refused():
    with pytest.raises(AnswerError, match="must be text"):
        C.parse_answer(opts(), [0, 1], {"answer": ["left"]})
    with pytest.raises(AnswerError, match="must be text"):
        C.parse_answer(opts(rationale="optional"), [0, 1], {"answer": "left", "rationale": 3})


def test_a_bad_display_order_is_a_server_error_not_an_answer_error():
    with pytest.raises(ValueError, match="display order") as err:
        C.parse_answer(opts(), [0, 0], {"answer": "left"})
    assert not isinstance(err.value, AnswerError)


# --- rationale ----------------------------------------------------------------------------
def test_required_rationale_needs_a_non_space_character():
    o = opts(rationale="required")
    for blank in (None, "", "   \n\t "):
        data = {"answer": "left"} | ({} if blank is None else {"rationale": blank})
        with pytest.raises(AnswerError, match="reason"):
            C.parse_answer(o, [0, 1], data)
    assert C.parse_answer(o, [0, 1], {"answer": "left", "rationale": " x "})["rationale"] == "x"


def test_rationale_length_limit_counts_a_crlf_newline_once():
    o = opts(rationale="optional")
    text = "a" * 1000 + "\r\n" + "b" * 999  # 2000 characters once CRLF is one newline
    assert len(C.parse_answer(o, [0, 1], {"answer": "tie", "rationale": text})["rationale"]) == 2000
    with pytest.raises(AnswerError, match="at most 2000"):
        C.parse_answer(o, [0, 1], {"answer": "tie", "rationale": "c" * 2001})


def test_optional_rationale_may_be_empty_and_is_exported():
    o = opts(rationale="optional")
    answer = C.parse_answer(o, [0, 1], {"answer": "left"})
    assert answer["rationale"] == ""
    assert C.export_fields(o) == ["rationale"]
    assert C.export_row(o, answer) == {"rationale": ""}


def test_no_rationale_study_refuses_a_reason_and_stores_none():
    o = opts()
    assert "rationale" not in C.parse_answer(o, [0, 1], {"answer": "left", "rationale": "  "})
    with pytest.raises(AnswerError, match="no written reason"):
        C.parse_answer(o, [0, 1], {"answer": "left", "rationale": "because"})


# --- imported labels and the page ---------------------------------------------------------
def test_an_imported_label_counts_for_the_summary_criterion():
    o = opts(criteria=TWO)
    assert C.pair_preferences(o, {"value": "B"}) == [("helpful", 0, 1, 0.0)]
    assert C.pair_preferences(opts(), {"value": "tie"}) == [("preference", 0, 1, 0.5)]
    assert C.pair_preferences(opts(), {}) == []
    assert C.report_labels(o, {"value": "B"}) == [("helpful", "B")]
    assert C.export_row(opts(criteria=TWO, strength=True), {"value": "B"}) == {
        "helpful": "B",
        "helpful_strength": None,
        "safe": None,
        "safe_strength": None,
    }


def test_form_rows_give_each_criterion_its_field_label_and_number_keys():
    rows = C.form_rows(opts(criteria=TWO, strength=True), question="ignored")
    assert [(r["name"], r["field"], r["label"]) for r in rows] == [
        ("helpful", "answer-helpful", "Which is more helpful?"),
        ("safe", "answer-safe", "Which is safer?"),
    ]
    assert [(c["value"], c["key"]) for c in rows[0]["choices"]] == [
        ("left>>", "1"),
        ("left>", "2"),
        ("=", "3"),
        ("right>", "4"),
        ("right>>", "5"),
    ]
    implicit = C.form_rows(opts(strength=True), question="Which answer is better?")
    assert [(r["field"], r["label"]) for r in implicit] == [("answer", "Which answer is better?")]


def test_gold_checks_the_summary_or_the_named_criteria_and_ignores_strength():
    o = opts(criteria=TWO, strength=True)
    answer = C.parse_answer(o, [1, 0], {"answer-helpful": "right>", "answer-safe": "left>>"})
    # helpful: A (weakly), safe: B (strongly); the summary is helpful, the first criterion
    assert C.gold_correct(o, {"value": "A"}, answer)
    assert not C.gold_correct(o, {"value": "B"}, answer)
    assert C.gold_correct(o, {"criteria": {"safe": "B"}}, answer)
    assert C.gold_correct(o, {"criteria": {"helpful": "A", "safe": "B"}}, answer)
    assert not C.gold_correct(o, {"criteria": {"helpful": "A", "safe": "tie"}}, answer)
    assert not C.gold_correct(o, {}, answer)
    # the implicit criterion: today's rule, annotation.value == item.expected_answer
    for raw in ("left", "right", "tie"):
        plain = C.parse_answer(opts(), [1, 0], {"answer": raw})
        for known in ("A", "B", "tie"):
            assert C.gold_correct(opts(), {"value": known}, plain) == (plain["value"] == known)


@pytest.mark.parametrize("strength", [False, True])
@pytest.mark.parametrize("order", [[0, 1], [1, 0]])
def test_a_simulated_form_parses_and_follows_the_truth(strength, order):
    import random

    o = opts(criteria=TWO, strength=strength, rationale="required")
    rng = random.Random(3)
    for known in ("A", "B", "tie"):
        answer = C.parse_answer(o, order, C.simulate_form(o, order, known, rng, accuracy=1.0))
        assert {v["value"] for v in answer["criteria"].values()} == {known}
        assert answer["rationale"]
    # accuracy 0: always the wrong side
    answer = C.parse_answer(o, order, C.simulate_form(o, order, "A", rng, accuracy=0.0))
    assert {v["value"] for v in answer["criteria"].values()} == {"B"}
    # no truth: every answer offered, all parse
    seen = {
        C.simulate_form(o, order, None, rng, accuracy=1.0)["answer-helpful"] for _ in range(200)
    }
    assert seen == {v for v, _ in C.answer_choices(o)}


def test_instruction_sentences_name_the_questions_strength_and_reason():
    from pathlib import Path

    from django.template import Context, Engine

    root = Path(__file__).resolve().parents[3] / "kinds" / "templates"
    engine = Engine(
        dirs=[str(root)], autoescape=True, libraries={"i18n": "django.templatetags.i18n"}
    )
    template = engine.get_template("kinds/_criteria_instructions.html")

    def text(o):
        return template.render(Context(C.template_context(o, "Q?"))).strip()

    assert text(opts()) == ""  # a plain pairwise study: today's instructions unchanged
    two = [{"name": "a", "label": "Is <b> kept?"}, {"name": "b", "label": "Safer?"}]
    got = text(opts(criteria=two, strength=True, rationale="required"))
    assert got == (
        "You answer 2 questions about each pair: “Is &lt;b&gt; kept?”, “Safer?”. For each, say "
        "whether one response is much better, better, or whether they are about the same. Then "
        "write a short reason for your answer."
    )
    assert text(opts(rationale="optional")) == "You may add a short reason."


def test_the_module_examples_hold():
    import doctest

    assert doctest.testmod(C).failed == 0


# --- the pairwise kind delegates ----------------------------------------------------------
def test_the_pairwise_kind_validates_and_keeps_only_the_options_given():
    from kinds.pairwise import KIND

    plain = KIND.validate_options({}, 2)
    assert plain == {"allow_tie": True, "allow_both_good": False, "allow_both_bad": False}
    assert KIND.context(plain)["criteria_form"] is None
    o = KIND.validate_options({"criteria": TWO, "strength": True, "rationale": "required"}, 2)
    assert o["criteria"] == TWO and o["strength"] and o["rationale"] == "required"
    assert KIND.overall_criterion(o) == "helpful"
    assert [r["field"] for r in KIND.context(o)["criteria_form"]["rows"]] == [
        "answer-helpful",
        "answer-safe",
    ]
    assert KIND.card_settings(o)["criteria"] == ["helpful", "safe"]
    with pytest.raises(OptionError) as err:
        KIND.validate_options({"criteria": [{"name": "Bad name"}], "rationale": "x"}, 1)
    assert len(err.value.messages) == 3  # systems, name, rationale: every problem at once


def test_known_answers_name_the_better_system_overall_or_per_criterion():
    from kinds.pairwise import KIND

    o = KIND.validate_options({"criteria": TWO}, 2)
    kw = {"systems": ["m1", "m2"], "outputs": ["x", "y"]}
    assert KIND.parse_expected(o, "m2", **kw) == {"value": "B"}
    expected = KIND.parse_expected(o, {"safe": "m1", "helpful": "tie"}, **kw)
    assert expected == {"criteria": {"helpful": "tie", "safe": "A"}, "value": "tie"}
    answer = KIND.parse_answer(o, [1, 0], {"answer-helpful": "left", "answer-safe": "right"})
    assert not KIND.gold_correct(o, expected, answer)  # helpful: B, not tie
    assert KIND.gold_correct(o, {"criteria": {"safe": "A"}}, answer)
    for bad in ("m3", {"kind": "m1"}, {"safe": "m3"}, {}, 3):
        with pytest.raises(AnswerError):
            KIND.parse_expected(o, bad, **kw)
