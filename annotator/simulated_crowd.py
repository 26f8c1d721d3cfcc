"""Simulated crowdworkers: they enter a study and answer through the same services the worker
pages call (``participation_enter``, the qualification test, ``task_next``/``task_answer``),
so every rule of the platform (leases, redundancy, gold checks, blocking, rounds, budget)
applies to them as to people.

The truth of an item is, first found: ``Input.metadata["truth"]`` (system → quality, higher
is better; for Likert mapped linearly onto each scale); the item's known answer (a ``gold``
or Judge-Bench ``majority_human``); else none, and the worker answers at random. Each worker
names the truly better output with an accuracy drawn once from ``ACCURACY``; Likert ratings
get Gaussian noise of ``LIKERT_NOISE`` points. Everything is drawn from one seed.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from . import services
from .choices import Preference, RawAnswer
from .errors import ServiceError, WorkerBlocked
from .models import Assignment, Participation, Study

PLATFORM = "simulated"
ACCURACY = (0.75, 0.95)
LIKERT_NOISE = 0.7
#: Answers a worker gives in one visit unless the run goes on until the study is done.
PER_WORKER = 10


@dataclass
class CrowdReport:
    """What a run did."""

    answers: int = 0
    workers: int = 0
    qualification_answers: int = 0
    failed: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    random_answers: int = 0
    stopped: str = ""


@dataclass
class _Worker:
    external_id: str
    accuracy: float
    rng: random.Random
    answered: int = 0
    entered: bool = False
    gone: bool = False


def crowd_run(
    study: Study,
    *,
    workers: int = 20,
    seed: int = 0,
    until_done: bool = False,
    max_answers: int | None = None,
    per_worker: int = PER_WORKER,
    wait_seconds: float = 60.0,
) -> CrowdReport:
    """Let ``workers`` simulated workers work on ``study`` in turns, one answer per turn.

    Without ``until_done`` each worker gives at most ``per_worker`` answers; with it they
    keep coming back until no worker finds work. With a real Celery worker (not eager) a
    turn in which nobody found work waits up to ``wait_seconds`` for the protocol to decide
    the round and release the next. ``max_answers`` caps the run's answers in all cases.
    """
    rng = random.Random(seed)
    crowd = [
        _Worker(f"sim-{seed}-{n}", rng.uniform(*ACCURACY), random.Random(rng.getrandbits(64)))
        for n in range(workers)
    ]
    report = CrowdReport()
    idle_since: float | None = None
    while True:
        worked = False
        for worker in crowd:
            if max_answers is not None and report.answers >= max_answers:
                report.stopped = f"reached --max-answers {max_answers}"
                return report
            if worker.gone or (not until_done and worker.answered >= per_worker):
                continue
            worked |= _turn(study, worker, report)
        if worked:
            idle_since = None
            continue
        if not until_done:
            report.stopped = (
                f"every worker gave {per_worker} answers or found no work"
                if any(not w.gone for w in crowd)
                else "no worker may work"
            )
            return report
        if settings.CELERY_TASK_ALWAYS_EAGER or all(w.gone for w in crowd):
            report.stopped = "no work left"
            return report
        idle_since = idle_since or time.monotonic()
        if time.monotonic() - idle_since > wait_seconds:
            report.stopped = f"no work for {wait_seconds:g} s"
            return report
        time.sleep(1.0)


def _turn(study: Study, worker: _Worker, report: CrowdReport) -> bool:
    """One answer by ``worker`` (entering and taking the test first if needed); whether they
    gave one."""
    part = services.participation_enter(
        study=study, platform=PLATFORM, external_id=worker.external_id
    )
    if not worker.entered:
        worker.entered = True
        report.workers += 1
    if part.status == Participation.Status.QUALIFYING:
        part = _qualify(part, worker, report)
    if part.status in (Participation.Status.FAILED, Participation.Status.BLOCKED):
        worker.gone = True
        (report.failed if part.status == Participation.Status.FAILED else report.blocked).append(
            worker.external_id
        )
        return False
    try:
        task = services.task_next(participation=part)
    except WorkerBlocked:
        worker.gone = True
        report.blocked.append(worker.external_id)
        return False
    if task is None:
        return False
    given = _answer(study, task.assignment, worker, report)
    try:
        services.task_answer(participation=part, token=task.assignment.token, **given)
    except WorkerBlocked:  # the answer is stored; a missed gold check blocked them
        worker.gone = True
        report.blocked.append(worker.external_id)
    except ServiceError:  # the lease expired meanwhile: nothing stored, try again next turn
        return False
    worker.answered += 1
    report.answers += 1
    return True


def _qualify(part: Participation, worker: _Worker, report: CrowdReport) -> Participation:
    while (question := services.qualification_next(part)) is not None:
        q = question["question"]
        raw = _pick(q.answer, question["left_is_a"], worker, allow_tie=True)
        part = services.qualification_answer(part, question_id=q.pk, answer=raw)
        report.qualification_answers += 1
    return part


def _pick(truth: str, left_is_a: bool, worker: _Worker, *, allow_tie: bool) -> str:
    """The raw answer to a pair whose true preference (system order) is ``truth``."""
    if truth == Preference.TIE:
        if allow_tie:
            return RawAnswer.TIE
        return worker.rng.choice([RawAnswer.LEFT, RawAnswer.RIGHT])
    a_better = truth == Preference.A
    if worker.rng.random() > worker.accuracy:
        a_better = not a_better
    return RawAnswer.LEFT if a_better == left_is_a else RawAnswer.RIGHT


def _answer(study: Study, assignment: Assignment, worker: _Worker, report: CrowdReport) -> dict:
    item = assignment.item
    truth = item.input.metadata.get("truth") if isinstance(item.input.metadata, dict) else None
    truth = truth if isinstance(truth, dict) else {}
    time_ms = int(worker.rng.uniform(8_000, 40_000))
    if item.output_b_id is None:
        return {"scores": _rate(study, item, truth, worker, report), "time_spent_ms": time_ms}
    a, b = item.output_a.system.name, item.output_b.system.name
    if _number(truth.get(a)) is not None and _number(truth.get(b)) is not None:
        qa, qb = _number(truth[a]), _number(truth[b])
        known = Preference.TIE if qa == qb else Preference.A if qa > qb else Preference.B
    elif item.expected_answer:
        known = item.expected_answer
    else:
        report.random_answers += 1
        choices = [RawAnswer.LEFT, RawAnswer.RIGHT] + [RawAnswer.TIE] * study.allow_tie
        return {"answer": worker.rng.choice(choices), "time_spent_ms": time_ms}
    raw = _pick(known, assignment.left_is_a, worker, allow_tie=study.allow_tie)
    return {"answer": raw, "time_spent_ms": time_ms}


def _rate(study: Study, item, truth: dict, worker: _Worker, report: CrowdReport) -> dict:
    system = item.output_a.system.name
    values = [v for v in map(_number, truth.values()) if v is not None]
    quality = _number(truth.get(system))
    if quality is None:
        report.random_answers += 1
    scores: dict[str, Any] = {}
    for criterion in study.criteria.all():
        if criterion.labels:
            scores[criterion.name] = worker.rng.choice([str(x) for x in criterion.labels])
            continue
        lo, hi = criterion.scale_min, criterion.scale_max
        if quality is None:
            scores[criterion.name] = worker.rng.randint(lo, hi)
            continue
        low, high = min(values), max(values)
        share = (quality - low) / (high - low) if high > low else 0.5
        value = round(lo + share * (hi - lo) + worker.rng.gauss(0, LIKERT_NOISE))
        scores[criterion.name] = min(max(value, lo), hi)
    return scores


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
