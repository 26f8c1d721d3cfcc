"""Known answers per kind (``Kind.parse_expected`` / ``gold_correct``): gold inputs of a
pairwise and a Likert study, and qualification tests of either kind (a Likert study screens
its workers on its own Likert task, pass and fail), the admin's question form, and the
migration that moved old pairwise questions and attempts onto the kinds."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

import kinds
from annotator import services
from annotator.errors import ImportRejected, InvalidAnswer
from annotator.models import (
    Item,
    QualificationAttempt,
    QualificationQuestion,
    QualificationTest,
)
from tests.conftest import boss_client, bundle
from tests.leasing import next_lease

PAIRWISE = kinds.get("pairwise")
LIKERT = kinds.get("likert")
FLUENCY = {"name": "fluency", "label": "Fluent?", "scale_min": 1, "scale_max": 5}
SAFE = {"name": "safe", "label": "Safe?", "labels": ["yes", "no"]}
LIKERT_OPTS = {"criteria": [FLUENCY, SAFE]}
TWO = {"systems": ["s1", "s2"], "outputs": ["a", "b"]}
ONE = {"systems": ["s1"], "outputs": ["a"]}


# --- the kinds ---------------------------------------------------------------------------
@pytest.mark.parametrize(("gold", "value"), [("s1", "A"), ("s2", "B"), ("tie", "tie")])
def test_a_pairwise_known_answer_names_the_better_system(gold, value):
    expected = PAIRWISE.parse_expected({}, gold, **TWO)
    assert expected == {"value": value}
    # the stored form reads as itself (an edited question saves again)
    assert PAIRWISE.parse_expected({}, expected, **TWO) == expected
    assert PAIRWISE.gold_correct({}, expected, {"raw": "x", "value": value})
    other = "B" if value == "A" else "A"
    assert not PAIRWISE.gold_correct({}, expected, {"raw": "x", "value": other})


@pytest.mark.parametrize(
    ("gold", "where", "message"),
    [
        ("s3", TWO, "'gold' names the better output ('s1', 's2') or 'tie'"),
        (1, TWO, "'gold' names the better output"),
        ({"value": "left"}, TWO, "'gold' names the better output"),
        ("s1", {"systems": ["s1", "s2", "s3"], "outputs": ["a", "b", "c"]}, "exactly two"),
    ],
)
def test_a_pairwise_known_answer_is_refused_with_a_reason(gold, where, message):
    with pytest.raises(kinds.AnswerError, match=message.replace("(", r"\(").replace(")", r"\)")):
        PAIRWISE.parse_expected({}, gold, **where)


def test_a_likert_known_answer_is_a_score_per_criterion_with_a_tolerance():
    gold = {"scores": {"fluency": 4, "safe": "yes"}, "tolerance": 1}
    expected = LIKERT.parse_expected(LIKERT_OPTS, gold, **ONE)
    assert expected == gold
    assert LIKERT.parse_expected(LIKERT_OPTS, expected, **ONE) == expected
    assert LIKERT.parse_expected(LIKERT_OPTS, {"scores": {"fluency": "2"}}, **ONE) == {
        "scores": {"fluency": 2},
        "tolerance": 0,
    }

    def correct(fluency, safe="yes"):
        answer = LIKERT.parse_answer(
            LIKERT_OPTS, [0], {"scores": {"fluency": fluency, "safe": safe}}
        )
        return LIKERT.gold_correct(LIKERT_OPTS, expected, answer)

    assert [correct(v) for v in (1, 2, 3, 4, 5)] == [False, False, True, True, True]
    assert not correct(4, safe="no")  # a label matches exactly, whatever the tolerance


@pytest.mark.parametrize(
    ("gold", "message"),
    [
        (4, 'a Likert known answer is {"scores"'),
        ({"scores": {}}, "at least one criterion"),
        ({"scores": {"tone": 3}}, "'tone' is not a criterion of the study"),
        ({"scores": {"fluency": 9}}, "'fluency' must be between 1 and 5"),
        ({"scores": {"fluency": 3.5}}, "'fluency' needs a whole number"),
        ({"scores": {"safe": "maybe"}}, "'maybe' is not one of the labels of 'safe'"),
        ({"scores": {"fluency": 3}, "tolerance": -1}, "'tolerance' must be 0 or more"),
        ({"scores": {"fluency": 3}, "tolerance": "1"}, "'tolerance' must be a number"),
        ({"scores": {"fluency": 3}, "value": "A"}, "unknown keys in the known answer: value"),
    ],
)
def test_a_likert_known_answer_is_refused_with_a_reason(gold, message):
    with pytest.raises(kinds.AnswerError, match=message.replace("{", r"\{")):
        LIKERT.parse_expected(LIKERT_OPTS, gold, **ONE)


def test_a_kind_without_known_answers_refuses_them():
    class Bare(kinds.Kind):
        name = noun = "bare"

    with pytest.raises(kinds.AnswerError, match="a bare study takes no known answers"):
        Bare().parse_expected({}, "x", **TWO)


def test_a_simulated_likert_worker_answers_a_known_score_near_it():
    import random

    rng = random.Random(1)
    expected = {"scores": {"fluency": 4, "safe": "no"}, "tolerance": 1}
    answers = [
        LIKERT.simulate_answer(LIKERT_OPTS, [0], [None], None, expected, rng, 1.0)
        for _ in range(50)
    ]
    assert not any(at_random for _, at_random in answers)
    fluency = [data["scores"]["fluency"] for data, _ in answers]
    assert sum(abs(v - 4) <= 1 for v in fluency) >= 40
    assert {data["scores"]["safe"] for data, _ in answers} == {"no"}


# --- gold inputs on import -----------------------------------------------------------------
LIKERT_STUDY = {
    "name": "rated",
    "kind": "likert",
    "redundancy": 1,
    "criteria": [FLUENCY],
    "gold_rate_start": 0.0,
    "gold_rate_end": 0.0,
    "open_links": True,
}


def likert_records(n: int = 4, **gold) -> list[dict]:
    records = [
        {"id": f"i{k}", "input": f"q{k}", "outputs": {"s1": f"a{k}", "s2": f"b{k}"}}
        for k in range(n)
    ]
    records += [
        {
            "id": f"g{k}",
            "input": f"known {k}",
            "outputs": {"s1": f"known {k}", "s2": f"also known {k}"},
            "gold": g,
        }
        for k, g in enumerate(gold.values())
    ]
    return records


@pytest.mark.django_db
def test_a_likert_study_imports_gold_inputs_read_by_its_kind():
    study = services.study_import(
        bundle(likert_records(g0={"scores": {"fluency": 5}, "tolerance": 1}), LIKERT_STUDY),
        filename="s.jsonl",
    )
    gold = Item.objects.filter(study=study, is_gold=True)
    assert [item.expected for item in gold] == [{"scores": {"fluency": 5}, "tolerance": 1}] * 2
    assert Item.objects.filter(study=study, is_gold=False).exclude(expected={}).count() == 0


@pytest.mark.django_db
def test_a_bad_gold_names_its_line_and_nothing_is_imported():
    bad = bundle(likert_records(g0={"scores": {"fluency": 7}}), LIKERT_STUDY)
    with pytest.raises(ImportRejected) as caught:
        services.study_import(bad, filename="s.jsonl")
    assert "line 6 (input 'g0'): 'gold': 'fluency' must be between 1 and 5" in caught.value.errors
    pair = {k: v for k, v in LIKERT_STUDY.items() if k != "criteria"} | {"kind": "pairwise"}
    records = [{"id": "g", "input": "q", "outputs": {"s1": "a", "s2": "b"}, "gold": "s9"}]
    with pytest.raises(ImportRejected) as caught:
        services.study_import(bundle(records, pair), filename="p.jsonl")
    assert caught.value.errors == [
        "line 2 (input 'g'): 'gold': 'gold' names the better output ('s1', 's2') or 'tie'"
    ]
    assert not Item.objects.exists()


@pytest.mark.django_db
def test_a_pairwise_gold_names_a_system_as_before():
    pair = {k: v for k, v in LIKERT_STUDY.items() if k != "criteria"} | {"kind": "pairwise"}
    records = [{"id": "g", "input": "q", "outputs": {"s1": "a", "s2": "b"}, "gold": "s2"}]
    study = services.study_import(bundle(records, pair), filename="p.jsonl")
    assert Item.objects.get(study=study).expected == {"value": "B"}


# --- qualification in a Likert study -------------------------------------------------------
@pytest.fixture
def likert_screened(db):
    """A Likert study whose items with a known rating became its own qualification test."""
    study = services.study_import(bundle(likert_records(6), LIKERT_STUDY), filename="s.jsonl")
    opts = study.kind_options()
    for k, item in enumerate(Item.objects.filter(study=study).order_by("pk")[:3]):
        item.expected = LIKERT.parse_expected(
            opts, {"scores": {"fluency": 1 + k}, "tolerance": 1}, systems=["s"], outputs=["x"]
        )
        item.save(update_fields=["expected"])
    test = services.study_prepare_checks(study, n_qualification=3, seed=2)
    test.pass_threshold = 3
    test.save()
    return study, test


def answer_all(part, right: bool, offset: int = 1) -> None:
    for _ in range(3):  # one attempt
        step = services.qualification_next(part)
        known = step["question"].expected["scores"]["fluency"]
        given = known + offset if right else (5 if known <= 2 else 1)
        services.qualification_answer(
            part, question_id=step["question"].pk, data={"scores": {"fluency": str(given)}}
        )
        part.refresh_from_db()


def test_a_likert_study_gets_a_likert_test_of_its_own_items(likert_screened):
    study, test = likert_screened
    assert (test.kind, study.qualification_id) == ("likert", test.pk)
    assert test.kind_options()["criteria"][0]["name"] == "fluency"
    questions = list(test.questions.all())
    assert [len(q.outputs) for q in questions] == [1, 1, 1]
    assert sorted(q.expected["scores"]["fluency"] for q in questions) == [1, 2, 3]


@pytest.mark.parametrize(("right", "status"), [(True, "active"), (False, "qualifying")])
def test_a_likert_worker_passes_within_the_tolerance_and_fails_outside(
    likert_screened, right, status
):
    study, test = likert_screened
    part = services.participation_enter(study=study, platform="prolific", external_id="w")
    assert part.status == "qualifying"
    answer_all(part, right)
    attempt = QualificationAttempt.objects.get()
    assert (attempt.n_correct, attempt.passed) == ((3, True) if right else (0, False))
    assert part.status == status
    assert all(a["display_order"] == [0] for a in attempt.answers)
    assert all(set(a["answer"]["scores"]) == {"fluency"} for a in attempt.answers)
    if right:
        assert next_lease(participation=part) is not None


def test_a_refused_qualification_answer_stores_nothing(likert_screened):
    study, _ = likert_screened
    part = services.participation_enter(study=study, platform="prolific", external_id="w")
    step = services.qualification_next(part)
    for data in ({"scores": {"fluency": "9"}}, {"scores": {}}, {"answer": "left"}):
        with pytest.raises(InvalidAnswer):
            services.qualification_answer(part, question_id=step["question"].pk, data=data)
    assert QualificationAttempt.objects.get().answers == []
    # the page: status 400, the same question again, nothing stored
    client = Client()
    client.get(f"/w/{study.public_id}/", {"worker": "page"})
    page = client.get(f"/w/{study.public_id}/qualify/")
    html = page.content.decode()
    assert page.status_code == 200 and 'name="score-fluency"' in html
    assert 'value="left"' not in html  # the Likert template, not the pairwise one
    question = QualificationAttempt.objects.get(annotator__external_id="page").order[0]
    refused = client.post(
        f"/w/{study.public_id}/qualify/",
        {"question": question["question"], "score-fluency": "0"},
    )
    assert refused.status_code == 400
    assert "&#x27;fluency&#x27; must be between 1 and 5" in refused.content.decode()
    assert QualificationAttempt.objects.get(annotator__external_id="page").answers == []
    done = client.post(
        f"/w/{study.public_id}/qualify/", {"question": question["question"], "score-fluency": "3"}
    )
    assert done.status_code == 302
    assert len(QualificationAttempt.objects.get(annotator__external_id="page").answers) == 1


def test_a_study_uses_only_a_test_of_its_own_kind(likert_screened, make_study):
    _, test = likert_screened
    pairwise = make_study()
    pairwise.qualification = test
    with pytest.raises(ValidationError, match="a likert test; a pairwise study screens"):
        pairwise.full_clean()
    test.kind, test.options = "pairwise", {}
    with pytest.raises(ValidationError, match="The test has questions of its kind"):
        test.full_clean()


def test_a_simulated_crowd_answers_a_likert_test_through_the_kind(likert_screened):
    from annotator.simulated_crowd import crowd_run

    study, _ = likert_screened
    report = crowd_run(study, workers=3, seed=4, per_worker=1)
    assert report.qualification_answers >= 9
    assert QualificationAttempt.objects.filter(passed__isnull=False).count() >= 3


def test_a_question_made_of_a_conversation_shows_the_conversation(make_study):
    turns = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "Bye?"},
    ]
    records = [{"id": "c", "input": turns, "outputs": {"s1": "Bye!", "s2": "No."}}]
    study = make_study(bundle(records, {"name": "chat", "kind": "pairwise", "redundancy": 1}))
    Item.objects.filter(study=study).update(expected={"value": "A"})
    test = services.study_prepare_checks(study, n_qualification=1, seed=0)
    assert test.questions.get().conversation == turns
    client = Client()
    client.get(f"/w/{study.public_id}/", {"worker": "c"})
    html = client.get(f"/w/{study.public_id}/qualify/").content.decode()
    assert 'class="turn turn-assistant"' in html and "Bye?" in html


# --- the admin's question form -----------------------------------------------------------------
def test_the_admin_reads_a_question_s_known_answer_through_the_test_s_kind(db):
    client = boss_client()
    url = "/admin/annotator/qualificationtest/add/"
    form = {
        "name": "rating test",
        "kind": "likert",
        "options": '{"criteria": [{"name": "fluency", "scale_min": 1, "scale_max": 5}]}',
        "pass_threshold": 1,
        "max_attempts": 2,
        "questions-TOTAL_FORMS": 1,
        "questions-INITIAL_FORMS": 0,
        "questions-0-prompt": "Say hello",
        "questions-0-outputs": '["Hello!"]',
        "questions-0-expected": '{"scores": {"fluency": 9}}',
        "questions-0-order": 0,
    }
    refused = client.post(url, form)
    assert refused.status_code == 200
    assert "&#x27;fluency&#x27; must be between 1 and 5" in refused.content.decode()
    assert not QualificationTest.objects.exists()
    bad_outputs = client.post(url, {**form, "questions-0-outputs": '"Hello!"'})
    assert "Give the outputs as a JSON list of non-empty texts." in bad_outputs.content.decode()
    bad_turns = client.post(url, {**form, "questions-0-conversation": '[{"role": 1}]'})
    assert "Give the conversation as a JSON list of {role, content} turns." in (
        bad_turns.content.decode()
    )
    saved = client.post(url, {**form, "questions-0-expected": '{"scores": {"fluency": "4"}}'})
    assert saved.status_code == 302
    question = QualificationQuestion.objects.get()
    assert (question.test.kind, question.outputs) == ("likert", ["Hello!"])
    assert question.expected == {"scores": {"fluency": 4}, "tolerance": 0}
    # a pairwise question: "A" (the first output) is stored in the kind's form
    pair = {
        **form,
        "name": "pair test",
        "kind": "pairwise",
        "options": "",
        "questions-0-outputs": '["one", "two"]',
        "questions-0-expected": '"B"',
    }
    assert client.post(url, pair).status_code == 302
    assert QualificationQuestion.objects.get(test__name="pair test").expected == {"value": "B"}
    wrong = client.post(url, {**pair, "name": "x", "questions-0-expected": '"C"'})
    assert "&#x27;gold&#x27; names the better output (&#x27;A&#x27;, &#x27;B&#x27;)" in (
        wrong.content.decode()
    )


# --- the migration -------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_the_migration_moves_old_questions_and_attempts_onto_the_kinds(migrate):
    """0015_qualification_kinds: output_a/output_b/answer become outputs and a known
    answer, left_is_a a display order (and a stored answer in system order)."""
    before = [("annotator", "0014_task_kinds")]
    after = [("annotator", "0015_qualification_kinds")]
    old = migrate(before)
    study = old.get_model("annotator", "Study").objects.create(name="old", kind="pairwise")
    test = old.get_model("annotator", "QualificationTest").objects.create(name="t")
    question = old.get_model("annotator", "QualificationQuestion").objects.create(
        test=test, prompt="p", output_a="first", output_b="second", answer="B"
    )
    worker = old.get_model("annotator", "Annotator").objects.create(external_id="w")
    slot = {"question": question.pk, "left_is_a": False}
    attempt = old.get_model("annotator", "QualificationAttempt").objects.create(
        test=test,
        study=study,
        annotator=worker,
        order=[slot],
        answers=[{**slot, "raw": "left", "correct": True}],
        n_correct=1,
    )
    new = migrate(after)
    moved = new.get_model("annotator", "QualificationQuestion").objects.get(pk=question.pk)
    assert (moved.outputs, moved.expected) == (["first", "second"], {"value": "B"})
    assert new.get_model("annotator", "QualificationTest").objects.get().kind == "pairwise"
    done = new.get_model("annotator", "QualificationAttempt").objects.get(pk=attempt.pk)
    assert done.order == [{"question": question.pk, "display_order": [1, 0]}]
    assert done.answers == [
        {
            "question": question.pk,
            "display_order": [1, 0],
            "raw": "left",
            "answer": {"raw": "left", "value": "B"},
            "correct": True,
        }
    ]
    # the converted answer scores as the kind scores it
    assert PAIRWISE.gold_correct({}, moved.expected, done.answers[0]["answer"])
    back = migrate(before)  # and back
    again = back.get_model("annotator", "QualificationQuestion").objects.get(pk=question.pk)
    assert (again.output_a, again.output_b, again.answer) == ("first", "second", "B")
    restored = back.get_model("annotator", "QualificationAttempt").objects.get(pk=attempt.pk)
    assert restored.order == [slot]
