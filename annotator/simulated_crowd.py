"""Simulated crowdworkers: they enter a study and answer through the same services the worker
pages call (``participation_enter``, the qualification test, ``task_next``/``task_answer``),
so every rule of the platform (leases, redundancy, gold checks, blocking, rounds, budget)
applies to them as to people.

The truth of an item is, first found: ``Input.metadata["truth"]`` (system → quality, higher
is better; for Likert mapped linearly onto each scale); the item's known answer (a ``gold``
or Judge-Bench ``majority_human``); else none, and the worker answers at random. Each worker
names the truly better output with an accuracy drawn once from ``ACCURACY``; what a worker
answers is drawn by the study's kind (``Kind.simulate_answer``: a Likert rating gets
Gaussian noise of ``kinds.likert.SIMULATED_NOISE`` points). Everything is drawn from one
seed.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from . import services
from .errors import ServiceError, WorkerBlocked
from .models import Assignment, Participation, Study

PLATFORM = "simulated"
ACCURACY = (0.75, 0.95)
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
        test = q.test
        data, _ = test.bound_kind().simulate_answer(
            question["display_order"],
            [None] * len(q.outputs),
            None,
            q.expected,
            worker.rng,
            worker.accuracy,
        )
        part = services.qualification_answer(part, question_id=q.pk, data=data)
        report.qualification_answers += 1
    return part


def _answer(study: Study, assignment: Assignment, worker: _Worker, report: CrowdReport) -> dict:
    """The worker's answer, drawn by the study's kind from the input's true qualities."""
    item = assignment.item
    truth = item.input.metadata.get("truth") if isinstance(item.input.metadata, dict) else None
    truth = truth if isinstance(truth, dict) else {}
    time_ms = int(worker.rng.uniform(8_000, 40_000))
    qualities = [_number(truth.get(o.system.name)) for o in item.output_list()]
    known = [v for v in map(_number, truth.values()) if v is not None]
    data, at_random = study.bound_kind().simulate_answer(
        assignment.display_order,
        qualities,
        (min(known), max(known)) if known else None,
        item.expected or {},
        worker.rng,
        worker.accuracy,
    )
    report.random_answers += int(at_random)
    return {"data": data, "time_spent_ms": time_ms}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
