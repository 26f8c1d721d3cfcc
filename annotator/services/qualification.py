"""The qualification test a worker takes before the work."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.utils import timezone

import kinds

from ..errors import (
    InvalidAnswer,
)
from ..models import (
    Participation,
    QualificationAttempt,
    QualificationQuestion,
    QualificationTest,
)
from .leasing import _RNG


def qualification_next(participation: Participation) -> dict[str, Any] | None:
    """The next test question (with its drawn display order), or ``None`` when done.

    The test comes before any item. A worker gets up to ``max_attempts`` attempts in each
    study (a shared test is taken afresh per study); each attempt draws a fresh question
    order. The first question of a later attempt carries ``previous``, the failed
    attempt's score, so the page can say why the worker sees the test again."""
    if participation.status != Participation.Status.QUALIFYING:
        return None
    with transaction.atomic():
        part = Participation.objects.select_for_update().get(pk=participation.pk)
        if part.status != Participation.Status.QUALIFYING:
            return None
        test = part.study.qualification
        if test is None:  # the researcher removed the test: nothing stands in the way
            _qualification_settle(part, passed=True)
            return None
        attempts = QualificationAttempt.objects.filter(
            test=test, study_id=part.study_id, annotator_id=part.annotator_id
        )
        attempt = attempts.order_by("-number").first()
        previous = None
        if attempt is not None and attempt.passed is not None:
            if attempt.passed or attempt.number >= test.max_attempts:
                _qualification_settle(part, passed=attempt.passed)  # decided already
                return None
            previous, attempt = attempt, None
        if attempt is None:
            attempt = _attempt_start(test, part, previous)
            if not attempt.order:  # a test without questions
                _attempt_score(attempt, part)
                return None
    position = len(attempt.answers)
    if position >= len(attempt.order):
        return None
    if position == 0 and attempt.number > 1 and previous is None:
        previous = attempts.filter(number=attempt.number - 1).first()
    slot = attempt.order[position]
    return {
        "question": QualificationQuestion.objects.get(pk=slot["question"]),
        "display_order": list(slot["display_order"]),
        "position": position + 1,
        "total": len(attempt.order),
        "attempt": attempt.number,
        "max_attempts": test.max_attempts,
        "previous": (
            {
                "n_correct": previous.n_correct,
                "total": len(previous.order),
                "needed": test.pass_threshold,
            }
            if previous is not None and position == 0
            else None
        ),
    }


def _attempt_start(
    test: QualificationTest, part: Participation, previous: QualificationAttempt | None
) -> QualificationAttempt:
    """A new attempt with the questions in a fresh random order, each with its own display
    order drawn by the test's kind. A retry never opens with the question the failed
    attempt ended on, so a repeated post of that last answer cannot count in the new
    attempt."""
    sizes = {pk: len(outputs) for pk, outputs in test.questions.values_list("pk", "outputs")}
    ids = list(sizes)
    rng = _RNG  # the module's one source of chance (tests replace it with a seeded one)
    rng.shuffle(ids)
    if previous is not None and len(ids) > 1 and previous.order:
        last = previous.order[-1]["question"]
        if ids[0] == last:
            swap = rng.randrange(1, len(ids))
            ids[0], ids[swap] = ids[swap], ids[0]
    return QualificationAttempt.objects.create(
        test=test,
        study_id=part.study_id,
        annotator_id=part.annotator_id,
        number=previous.number + 1 if previous is not None else 1,
        order=[
            {"question": pk, "display_order": test.kind_impl.display_order(sizes[pk], rng)}
            for pk in ids
        ],
    )


def _attempt_score(attempt: QualificationAttempt, part: Participation) -> None:
    """Score a complete attempt: a pass lets the worker work; a failure leaves them
    qualifying while attempts remain, else fails them in this study for good."""
    attempt.passed = attempt.n_correct >= attempt.test.pass_threshold
    attempt.finished_at = timezone.now()
    attempt.save()
    if attempt.passed or attempt.number >= attempt.test.max_attempts:
        _qualification_settle(part, passed=attempt.passed)


def _qualification_settle(part: Participation, *, passed: bool) -> None:
    part.status = Participation.Status.ACTIVE if passed else Participation.Status.FAILED
    part.save(update_fields=["status"])


def qualification_answer(
    participation: Participation, *, question_id: int, data: Mapping[str, Any]
) -> Participation:
    """Record one answer (no feedback): ``data``, the submitted form in display order, is
    read by the test's kind (``parse_answer``, given the question's outputs as the task page
    gives an item's: error spans check the marks against them; a refused answer raises
    :class:`InvalidAnswer` and stores nothing) and scored against the question's known
    answer (``gold_correct``). After the last one, score the attempt: a pass lets the
    worker work, a failure starts the next attempt (at the next question asked) or, after
    the last attempt, fails the worker in this study for good. A stale or repeated post is
    ignored."""
    with transaction.atomic():
        participation = Participation.objects.select_for_update().get(pk=participation.pk)
        if participation.status != Participation.Status.QUALIFYING:
            return participation
        attempt = (
            QualificationAttempt.objects.select_for_update()
            .filter(
                test_id=participation.study.qualification_id,
                study_id=participation.study_id,
                annotator=participation.annotator,
            )
            .order_by("-number")
            .first()
        )
        if attempt is None or attempt.passed is not None:
            return participation  # no question was asked, or a repeated post of the last one
        position = len(attempt.answers)
        if position >= len(attempt.order) or attempt.order[position]["question"] != question_id:
            return participation  # a stale or repeated post: already recorded
        slot = attempt.order[position]
        question = QualificationQuestion.objects.get(pk=question_id)
        test = attempt.test
        kind = test.bound_kind()
        try:
            answer = kind.parse_answer(slot["display_order"], data, outputs=list(question.outputs))
        except kinds.AnswerError as exc:
            raise InvalidAnswer(exc.message) from None
        correct = kind.gold_correct(question.expected, answer)
        attempt.answers = [*attempt.answers, {**slot, "answer": answer, "correct": correct}]
        attempt.n_correct += int(correct)
        if len(attempt.answers) == len(attempt.order):
            _attempt_score(attempt, participation)
        else:
            attempt.save()
    return participation
