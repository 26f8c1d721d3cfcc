"""The task kinds (``kinds/``): registry, display order, answers in system order, pair
preferences and scores, gold answers; and the labels the apps read through them
(``annotator.selectors.label_rows`` / ``score_rows``), and the migration that moved the
old rows onto them."""

from __future__ import annotations

import random

import pytest

import kinds
from kinds.likert import DEFAULT_CRITERION
from tests.leasing import next_lease

PAIRWISE = kinds.get("pairwise")
LIKERT = kinds.get("likert")
PAIR_OPTS = {"allow_tie": True, "allow_both_good": False, "allow_both_bad": True}
FLUENCY = {"name": "fluency", "label": "Fluent?", "scale_min": 1, "scale_max": 5}
SAFE = {"name": "safe", "label": "Safe?", "labels": ["yes", "no"]}
LIKERT_OPTS = {"criteria": [FLUENCY, SAFE]}


def test_the_registry_names_every_kind_and_refuses_others():
    assert kinds.NAMES[:2] == ("pairwise", "likert")
    assert dict(kinds.choices())["likert"] == "Likert rating"
    with pytest.raises(KeyError):
        kinds.get("ranking-of-nothing")


@pytest.mark.parametrize("kind", [PAIRWISE, LIKERT])
def test_display_order_is_a_permutation_drawn_per_assignment(kind):
    n = kind.outputs_per_item({}, 3)
    rng = random.Random(0)
    orders = [kind.display_order(n, rng) for _ in range(200)]
    assert all(sorted(o) == list(range(n)) for o in orders)
    assert len({tuple(o) for o in orders}) == (2 if n == 2 else 1)


def test_pairwise_answer_is_brought_to_system_order():
    assert PAIRWISE.parse_answer(PAIR_OPTS, [0, 1], {"answer": "left"}) == {
        "raw": "left",
        "value": "A",
    }
    assert PAIRWISE.parse_answer(PAIR_OPTS, [1, 0], {"answer": "left"})["value"] == "B"
    assert PAIRWISE.parse_answer(PAIR_OPTS, [1, 0], {"answer": "right"})["value"] == "A"
    assert PAIRWISE.parse_answer(PAIR_OPTS, [1, 0], {"answer": "both_bad"})["value"] == "both_bad"


@pytest.mark.parametrize("data", [{}, {"answer": "both_good"}, {"answer": ["left"]}, {"answer": 1}])
def test_pairwise_refuses_an_answer_the_study_does_not_allow(data):
    with pytest.raises(kinds.AnswerError, match="Choose one of: left, right, tie, both_bad."):
        PAIRWISE.parse_answer(PAIR_OPTS, [0, 1], data)


@pytest.mark.parametrize(
    ("value", "preference"), [("A", 1.0), ("B", 0.0), ("tie", 0.5), ("both_bad", 0.5)]
)
def test_pairwise_preference_is_of_the_first_output_over_the_second(value, preference):
    answer = {"raw": "x", "value": value}
    assert PAIRWISE.pair_preferences(PAIR_OPTS, answer) == [("preference", 0, 1, preference)]
    assert PAIRWISE.scores(PAIR_OPTS, answer) == {}
    assert PAIRWISE.gold_correct(PAIR_OPTS, {"value": value}, answer)
    assert not PAIRWISE.gold_correct(PAIR_OPTS, {"value": "B" if value == "A" else "A"}, answer)


def test_pairwise_items_are_every_system_pair_in_system_order():
    assert PAIRWISE.item_groups(PAIR_OPTS, 3, random.Random(0)) == [(0, 1), (0, 2), (1, 2)]
    with pytest.raises(kinds.OptionError, match="at least two systems"):
        PAIRWISE.validate_options(PAIR_OPTS, 1)
    assert PAIRWISE.validate_options({}, None)["allow_tie"] is True


def test_likert_answer_is_validated_per_criterion():
    answer = LIKERT.parse_answer(LIKERT_OPTS, [0], {"scores": {"fluency": "4", "safe": "no"}})
    assert answer == {"scores": {"fluency": 4, "safe": "no"}}
    assert LIKERT.scores(LIKERT_OPTS, answer) == {"fluency": {0: 4.0}}  # labels have no order
    assert LIKERT.pair_preferences(LIKERT_OPTS, answer) == []
    assert LIKERT.summary(LIKERT_OPTS, answer) == {
        "raw_answer": "",
        "value": "",
        "scores": {"fluency": 4, "safe": "no"},
    }
    with pytest.raises(kinds.AnswerError) as refused:
        LIKERT.parse_answer(
            LIKERT_OPTS, [0], {"scores": {"fluency": "9", "safe": "maybe", "extra": 1}}
        )
    message = refused.value.message
    assert "'fluency' must be between 1 and 5" in message
    assert "'maybe' is not one of the labels of 'safe'" in message
    assert "Unknown criteria: extra." in message
    with pytest.raises(kinds.AnswerError, match="Rate 'Fluent\\?'"):
        LIKERT.parse_answer(LIKERT_OPTS, [0], {"scores": {"safe": "yes"}})


@pytest.mark.parametrize("kind", kinds.NAMES)
def test_a_field_sent_twice_is_refused_by_every_kind(kind):
    """A form field sent twice reaches the kind as a list of its texts; no kind keeps one
    of them silently (Likert kept the last): each names the field and refuses."""
    impl = kinds.get(kind)
    opts, order, outputs, fields = {
        "pairwise": (PAIR_OPTS, [0, 1], (), {"answer": ["left", "right"]}),
        "likert": (LIKERT_OPTS, [0], (), {"scores": {"fluency": ["2", "5"], "safe": "yes"}}),
        "ranking": ({"allow_tie": False}, [0, 1, 2], (), {"ranking": ["[[0],[1],[2]]"] * 2}),
        "error_spans": (
            {"categories": [], "max_spans": 100},
            [0],
            ["The text."],
            {"spans": "[]", "score": ["20", "80"]},
        ),
    }[kind]
    with pytest.raises(kinds.AnswerError, match="Give one answer for .*: it was sent 2 times"):
        impl.parse_answer(opts, order, fields, outputs=outputs)


def test_likert_options_default_to_one_overall_criterion_and_check_adaptive_studies():
    assert LIKERT.validate_options({}, 3) == {"criteria": [DEFAULT_CRITERION]}
    with pytest.raises(kinds.OptionError) as refused:
        LIKERT.validate_options({"collection": "adaptive", "criteria": [SAFE], "gold": True}, 1)
    assert len(refused.value.messages) == 3
    assert LIKERT.item_groups(LIKERT_OPTS, 3, random.Random(0)) == [(0,), (1,), (2,)]


def test_likert_gold_answer_is_matched_within_its_tolerance():
    answer = {"scores": {"fluency": 4, "safe": "yes"}}
    assert LIKERT.gold_correct(LIKERT_OPTS, {"scores": {"fluency": 5}, "tolerance": 1}, answer)
    assert not LIKERT.gold_correct(LIKERT_OPTS, {"scores": {"fluency": 2}, "tolerance": 1}, answer)
    assert not LIKERT.gold_correct(LIKERT_OPTS, {"scores": {"safe": "no"}}, answer)
    assert not LIKERT.gold_correct(LIKERT_OPTS, {}, answer)


def test_scores_give_a_pair_preference_by_their_sign():
    assert kinds.preferences_from_scores(4, 2) == 1.0
    assert kinds.preferences_from_scores(2, 4) == 0.0
    assert kinds.preferences_from_scores(3, 3.4, dead_zone=0.5) == 0.5


# --- through the database ---------------------------------------------------------------------
def _label(study, worker: str, **answer):
    """One worker's answer to their next item: ``answer`` maps display order to the answer
    (``left_better=True`` picks the first system's output, wherever it is shown)."""
    from annotator import services

    part = services.participation_enter(study=study, platform="link", external_id=worker)
    lease = next_lease(participation=part)
    if "first_better" in answer:
        answer = {
            "answer": "left" if answer["first_better"] == (lease.display_order[0] == 0) else "right"
        }
    annotation, _ = services.annotation_submit(
        annotator=part.annotator, token=lease.token, data=answer
    )
    return lease, annotation


def test_label_rows_are_pair_preferences_in_system_order(make_study):
    from annotator import selectors

    study = make_study(redundancy=4)  # alpha, beta; three inputs
    leases = [_label(study, f"w{i}", first_better=i % 2 == 0)[0] for i in range(4)]
    assert {tuple(lease.display_order) for lease in leases} <= {(0, 1), (1, 0)}
    rows = selectors.label_rows(study)
    names = dict(study.systems.values_list("pk", "name"))
    assert len(rows) == 4
    assert {
        (names[s], names[o]) for s, o in zip(rows["system"], rows["other_system"], strict=True)
    } == {("alpha", "beta")}
    assert list(rows["preference"]) == [1.0, 0.0, 1.0, 0.0]
    assert set(rows["criterion"]) == {"preference"}
    assert selectors.score_rows(study).empty
    # a flagged label leaves the rows unless asked for
    study.annotations.filter(pk=study.annotations.order_by("pk").first().pk).update(is_flagged=True)
    assert len(selectors.label_rows(study)) == 3
    assert len(selectors.label_rows(study, include_flagged=True)) == 4


def test_score_rows_are_each_outputs_numeric_ratings(make_study):
    from annotator import selectors
    from tests.conftest import bundle

    records = [{"id": "in0", "input": "q", "outputs": {"s1": "a", "s2": "b"}}]
    study = make_study(
        bundle(records, {"kind": "likert", "criteria": [{"name": "fluency"}, SAFE]}),
        redundancy=1,
    )
    _label(study, "w1", scores={"fluency": "2", "safe": "yes"})
    lease, annotation = _label(study, "w2", scores={"fluency": "5", "safe": "no"})
    assert annotation.answer == {"scores": {"fluency": 5, "safe": "no"}}
    assert annotation.scores == annotation.answer["scores"] and annotation.value == ""
    assert lease.display_order == [0]
    rows = selectors.score_rows(study)
    names = dict(study.systems.values_list("pk", "name"))
    got = sorted(
        (names[s], c, v)
        for s, c, v in zip(rows["system"], rows["criterion"], rows["score"], strict=True)
    )
    assert got == [("s1", "fluency", 2.0), ("s2", "fluency", 5.0)]
    assert selectors.label_rows(study).empty  # Likert compares scores, never pairs itself
    # a label stored with its value and scores but no answer (before answers were kept) is
    # read from them; its scores are read only for such labels
    annotation.__class__.objects.filter(pk=annotation.pk).update(answer={})
    rows = selectors.score_rows(study)
    assert sorted(zip(rows["criterion"], rows["score"], strict=True)) == [
        ("fluency", 2.0),
        ("fluency", 5.0),
    ]


def test_label_rows_read_a_label_without_an_answer_from_its_value(make_study):
    from annotator import selectors

    study = make_study(redundancy=2)
    _, first = _label(study, "w1", first_better=True)
    _, second = _label(study, "w2", first_better=False)
    study.annotations.filter(pk=first.pk).update(answer={}, value="A")
    study.annotations.filter(pk=second.pk).update(answer={}, value="B", scores={"x": 1})
    rows = selectors.label_rows(study).sort_values("annotation")
    assert list(rows["preference"]) == [1.0, 0.0]


def test_a_refused_answer_stores_nothing(make_study):
    from annotator import services
    from annotator.errors import InvalidAnswer
    from annotator.models import Annotation, Assignment

    study = make_study()
    part = services.participation_enter(study=study, platform="link", external_id="w")
    lease = next_lease(participation=part)
    with pytest.raises(InvalidAnswer, match="Choose one of"):
        services.annotation_submit(
            annotator=part.annotator, token=lease.token, data={"answer": "up"}
        )
    assert Annotation.objects.count() == 0
    assert Assignment.objects.get(pk=lease.pk).state == "issued"


@pytest.mark.django_db(transaction=True)
def test_the_migration_moves_old_items_orders_and_answers_onto_the_kinds(migrate):
    """0014_task_kinds: output_a/output_b become positions 0/1, left_is_a a display order,
    expected_answer a known answer, raw answer, value and scores the stored answer."""
    from django.utils import timezone

    before, after = (
        [("annotator", "0013_assignment_seen_at")],
        [("annotator", "0014_task_kinds")],
    )
    old = migrate(before)
    now = timezone.now()
    study = old.get_model("annotator", "Study").objects.create(name="old", kind="pairwise")
    inp = old.get_model("annotator", "Input").objects.create(study=study, external_id="i", text="q")
    a, b = (
        old.get_model("annotator", "Output").objects.create(
            input=inp,
            system=old.get_model("annotator", "System").objects.create(study=study, name=n),
            text=n,
        )
        for n in ("s1", "s2")
    )
    Item = old.get_model("annotator", "Item")
    pair = Item.objects.create(
        study=study, input=inp, output_a=a, output_b=b, redundancy=1, expected_answer="B"
    )
    single = Item.objects.create(study=study, input=inp, output_a=b, redundancy=1)
    worker = old.get_model("annotator", "Annotator").objects.create(external_id="w")
    Assignment = old.get_model("annotator", "Assignment")
    shown = {}
    for item, left_is_a, name in ((pair, False, "pair"), (single, True, "single")):
        shown[name] = Assignment.objects.create(
            study=study,
            item=item,
            annotator=worker,
            left_is_a=left_is_a,
            issued_at=now,
            expires_at=now,
        ).pk
    old.get_model("annotator", "Annotation").objects.create(
        study=study,
        item=pair,
        annotator=worker,
        raw_answer="left",
        value="B",
        config_version=1,
        submitted_at=now,
    )
    new = migrate(after)
    links = new.get_model("annotator", "ItemOutput").objects.order_by("item_id", "position")
    assert [(link.item_id, link.output_id, link.position) for link in links] == [
        (pair.pk, a.pk, 0),
        (pair.pk, b.pk, 1),
        (single.pk, b.pk, 0),
    ]
    assert new.get_model("annotator", "Item").objects.get(pk=pair.pk).expected == {"value": "B"}
    orders = dict(
        new.get_model("annotator", "Assignment").objects.values_list("pk", "display_order")
    )
    assert orders == {shown["pair"]: [1, 0], shown["single"]: [0]}
    assert new.get_model("annotator", "Annotation").objects.get().answer == {
        "raw": "left",
        "value": "B",
    }


def test_a_simulated_likert_rating_follows_the_truth_on_every_scale():
    rng = random.Random(3)
    best, _ = LIKERT.simulate_answer(LIKERT_OPTS, [0], [9.0], (1.0, 9.0), {}, rng, 0.9)
    worst, at_random = LIKERT.simulate_answer(LIKERT_OPTS, [0], [1.0], (1.0, 9.0), {}, rng, 0.9)
    assert best["scores"]["fluency"] > worst["scores"]["fluency"] and not at_random
    assert best["scores"]["safe"] in ("yes", "no")
    assert LIKERT.parse_answer(LIKERT_OPTS, [0], best)  # what it gives is a valid answer
    _, unknown = LIKERT.simulate_answer(LIKERT_OPTS, [0], [None], None, {}, rng, 0.9)
    assert unknown


def test_a_simulated_pairwise_answer_names_the_better_output_in_display_order():
    rng = random.Random(0)
    picks = [
        PAIRWISE.simulate_answer(PAIR_OPTS, [1, 0], [3.0, 1.0], (1.0, 3.0), {}, rng, 1.0)[0]
        for _ in range(5)
    ]
    assert picks == [{"answer": "right"}] * 5  # A is better and shown on the right
    data, at_random = PAIRWISE.simulate_answer(PAIR_OPTS, [0, 1], [None, None], None, {}, rng, 1)
    assert at_random and data["answer"] in ("left", "right", "tie")
    data, at_random = PAIRWISE.simulate_answer(
        PAIR_OPTS, [0, 1], [None, None], None, {"value": "B"}, rng, 1.0
    )
    assert (data, at_random) == ({"answer": "right"}, False)


@pytest.mark.parametrize(
    ("name", "opts", "n_systems", "shape"),
    [
        ("pairwise", {}, 4, "pair"),
        ("likert", {}, 4, "scored"),
        ("error_spans", {}, 4, "scored"),
        ("ranking", {"per_item": 3}, 4, "several"),
        ("ranking", {}, 3, "several"),
    ],
)
def test_each_kind_names_the_item_shape_the_protocol_collects_it_in(name, opts, n_systems, shape):
    kind = kinds.get(name)
    assert shape in kinds.ITEM_SHAPES
    assert kind.item_shape(opts, n_systems) == shape


def test_a_kind_declares_its_judgebench_properties():
    """The Judge-Bench export asks the kind (``Kind.judgebench_properties``), never reads a
    template's context or the study's rows."""
    from formats.judgebench_export import JudgeBenchProperty

    assert PAIRWISE.judgebench_properties(PAIR_OPTS, "Which?") == [
        JudgeBenchProperty("preference", ("A", "B", "tie", "both_bad"), description="Which?")
    ]
    assert LIKERT.judgebench_properties(LIKERT_OPTS, "") == [
        JudgeBenchProperty("fluency", (), 1, 5, "Fluent?"),
        JudgeBenchProperty("safe", ("yes", "no"), description="Safe?"),
    ]
    assert kinds.get("ranking").judgebench_properties({}, "") == []
