"""Answers: store one (``annotation_submit``, ``task_answer``), score gold checks."""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

import kinds

from .. import span_prefill
from ..choices import AssignmentState
from ..errors import (
    AssignmentExpired,
    AssignmentNotFound,
    InvalidAnswer,
    WorkerBlocked,
)
from ..models import (
    Annotation,
    Annotator,
    Assignment,
    Item,
    Participation,
)
from ..selectors import SUBMITTED_COUNT
from ..signals import annotation_submitted
from ..sqlrows import db_value, insert, insert_sql, inserted
from .leasing import (
    _ASSIGNMENT,
    _ITEM,
    _LINK,
    _OUTPUT,
    _OUTPUT_ID,
    _PART,
    _RNG,
    Task,
    _for_update,
    _free_slots,
    _lease_locked,
    _lock_participation,
    _may_not_work,
    _release,
    _token,
    _when,
    check_may_work,
    task_next,
)

log = logging.getLogger(__name__)


def task_answer(
    *,
    participation: Participation,
    token: str | uuid.UUID,
    data: Mapping[str, Any] | None = None,
    time_spent_ms: int | None = None,
    now: datetime | None = None,
    rng: random.Random | None = None,
) -> Task | None:
    """Store the worker's answer (as :func:`annotation_submit`) and lease their next task
    (as :func:`task_next`) under one lock of the participation, so one request makes one
    annotation cycle. Returns the next task, or ``None`` when nothing is left; raises
    :class:`~annotator.errors.WorkerBlocked` when the worker may not work, also after
    storing an answer that got them blocked (a gold miss). An invalid, expired or foreign
    answer raises a :class:`~annotator.errors.ServiceError` and changes nothing.
    ``participation`` must be freshly read (its study and worker are not read again).
    """
    now = now or timezone.now()
    rng = rng or _RNG
    token = _token(token)
    with transaction.atomic():
        part = _lock_participation(participation.pk, loaded=participation)
        _, created, done = _submit_locked(part, token, dict(data or {}), time_spent_ms, now)
        blocked = _may_not_work(part)
        # a stored answer was the worker's one open lease, so they hold none now
        task = None if blocked else _lease_locked(part, now, rng, holds_none=created, done=done)
    if blocked:  # raised after the commit: the answer that got them blocked is kept
        raise WorkerBlocked(blocked)
    if task is None and _free_slots(participation, now):
        task = task_next(participation=participation, now=now, rng=rng)
    if task is not None and not created:
        task = replace(task, answered_before=True)
    return task


def annotation_submit(
    *,
    annotator: Annotator,
    token: str | uuid.UUID,
    data: Mapping[str, Any] | None = None,
    time_spent_ms: int | None = None,
    now: datetime | None = None,
) -> tuple[Annotation, bool]:
    """Store the worker's answer to one assignment; ``(annotation, created)``.

    The answer is what the worker submitted, in display order: ``data``, the kind's fields
    (e.g. ``{"answer": "left"}``, ``{"scores": {...}}``); the study's kind parses it
    (``Kind.parse_answer``) into the stored answer in system order.

    Idempotent: a repeated submit of the same assignment returns the stored annotation
    with ``created=False`` and stores nothing. An expired or foreign assignment or an
    invalid answer raises a :class:`~annotator.errors.ServiceError` and changes nothing.
    """
    now = now or timezone.now()
    token = _token(token)
    with transaction.atomic():
        # The participation first, then the assignment: the order in which leasing,
        # blocking and the gold strikes lock them, so they queue rather than deadlock.
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT p.id FROM {_PART.table}"  # noqa: S608
                f" JOIN {_ASSIGNMENT.table} ON asg.study_id = p.study_id"
                " WHERE p.annotator_id = %s AND asg.token = %s",
                [annotator.pk, db_value(Assignment, "token", token)],
            )
            row = cursor.fetchone()
        if row is None:
            raise AssignmentNotFound("This task does not exist or is not yours.")
        part = _lock_participation(row[0])
        annotation, created, _ = _submit_locked(part, token, dict(data or {}), time_spent_ms, now)
        return annotation, created


def _submit_locked(
    part: Participation,
    token: uuid.UUID,
    data: Mapping[str, Any],
    time_spent_ms: int | None,
    now: datetime,
) -> tuple[Annotation, bool, int]:
    """The body of :func:`annotation_submit`, with ``part`` locked by the caller; also how
    many items the worker has submitted in the study, this answer included. The assignment,
    its item and that count are read in one statement, with the item's outputs only when
    the kind's answer reads them (``Kind.answer_reads_outputs``). (The count is exact: only
    a request holding the participation's lock submits the worker's answers.)"""
    annotator, kind = part.annotator, part.study.kind_impl
    select, joins, order = f"{_ASSIGNMENT.sql}, {_ITEM.sql}", "", ""
    if kind.answer_reads_outputs:
        select += f", {_OUTPUT.sql}"
        joins = (
            f" LEFT JOIN {_LINK} l ON l.item_id = i.id"
            f" LEFT JOIN {_OUTPUT.table} ON o.id = l.output_id"
        )
        order = " ORDER BY l.position"
    select += f", ({SUBMITTED_COUNT})"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {select} FROM {_ASSIGNMENT.table}"  # noqa: S608
            f" JOIN {_ITEM.table} ON i.id = asg.item_id{joins}"
            f" WHERE asg.token = %s AND asg.annotator_id = %s AND asg.study_id = %s{order}"
            + _for_update("asg"),
            [
                part.study_id,
                annotator.pk,
                AssignmentState.SUBMITTED.value,
                db_value(Assignment, "token", token),
                annotator.pk,
                part.study_id,
            ],
        )
        rows = cursor.fetchall()
    assignment = None
    if rows:
        done = rows[0][-1]
        assignment = _ASSIGNMENT.load(rows[0])
        assignment.item = _ITEM.load(rows[0], len(_ASSIGNMENT))
        if kind.answer_reads_outputs:
            at = len(_ASSIGNMENT) + len(_ITEM)
            assignment.item.shown_outputs = [
                _OUTPUT.load(row, at) for row in rows if row[at + _OUTPUT_ID] is not None
            ]
    if assignment is None:
        raise AssignmentNotFound("This task does not exist or is not yours.")
    if assignment.state == AssignmentState.SUBMITTED:
        return assignment.annotation, False, done
    check_may_work(part)
    if assignment.state != AssignmentState.ISSUED or assignment.expires_at <= now:
        raise AssignmentExpired(
            "The time for this task ran out and it was given to someone else; "
            "your answer was not stored. Continue with the next task."
        )
    study = part.study
    bound = kind.bind(span_prefill.answer_options(study, assignment.item, study.kind_options()))
    outputs = [o.text for o in assignment.item.output_list()] if kind.answer_reads_outputs else ()
    try:
        answer = bound.parse_answer(assignment.display_order, data, outputs=outputs)
    except kinds.AnswerError as exc:
        raise InvalidAnswer(exc.message) from None
    summary = bound.summary(answer)
    elapsed_ms = int((now - assignment.issued_at).total_seconds() * 1000)
    if time_spent_ms is not None:
        time_spent_ms = max(0, min(int(time_spent_ms), elapsed_ms))
    annotation = Annotation(
        study=study,
        item=assignment.item,
        annotator=annotator,
        assignment=assignment,
        raw_answer=summary["raw_answer"],
        value=summary["value"],
        scores=summary["scores"],
        answer=answer,
        time_spent_ms=time_spent_ms,
        config_version=study.config_version,
        guideline_revision=study.guideline_revision,
        submitted_at=now,
    )
    _store(annotation, assignment, now)
    if assignment.item.is_gold:
        _score_gold(part, assignment.item, annotation, now)
    transaction.on_commit(lambda: _announce(annotation), robust=False)
    return annotation, True, done + 1


def _store(annotation: Annotation, lease: Assignment, now: datetime) -> None:
    """Insert the answer's annotation, close its lease as submitted and count the answer on
    its item (a gold item keeps no count): one statement on PostgreSQL (a data-modifying
    ``WITH``), three elsewhere. The item's ``n_done`` afterwards is exact (read back in the
    same statement), so whoever completes an item knows it without locking the row."""
    item, q = lease.item, connection.ops.quote_name
    tables = {m: q(m._meta.db_table) for m in (Assignment, Item)}
    close = f"UPDATE {tables[Assignment]} SET state = %s, closed_at = %s WHERE id = %s"  # noqa: S608
    close_params = [AssignmentState.SUBMITTED.value, _when(now), lease.pk]
    count = f"UPDATE {tables[Item]} SET n_done = n_done + 1 WHERE id = %s RETURNING n_done"  # noqa: S608
    n_done = None
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            sql, params = insert_sql(annotation)
            key = q(Annotation._meta.pk.column)
            sql = f"WITH a AS ({sql} RETURNING {key}), c AS ({close})"
            params += close_params
            if item.is_gold:
                sql += f" SELECT a.{key}, NULL FROM a"  # noqa: S608
            else:
                sql += f", n AS ({count}) SELECT a.{key}, n.n_done FROM a, n"  # noqa: S608
                params.append(item.pk)
            cursor.execute(sql, params)
            key_value, n_done = cursor.fetchone()
            inserted(annotation, key_value)
        else:
            insert(annotation)
            cursor.execute(close, close_params)
            if not item.is_gold:
                cursor.execute(count, [item.pk])
                (n_done,) = cursor.fetchone()
    lease.state, lease.closed_at = AssignmentState.SUBMITTED, now
    if n_done is not None:
        item.n_done = n_done


def _score_gold(part: Participation, item: Item, annotation: Annotation, now: datetime) -> None:
    """A gold answer: count it; a miss is a strike; too many strikes block the worker, give
    their open work back and flag all their labels in the study."""
    study = part.study
    correct = study.bound_kind().gold_correct(item.expected, annotation.answer)
    part.gold_seen += 1
    part.gold_correct += int(correct)
    part.strikes += int(not correct)
    fields = ["gold_seen", "gold_correct", "strikes"]
    if part.strikes >= part.study.max_strikes:
        part.status = Participation.Status.BLOCKED
        part.finished_at = now
        fields += ["status", "finished_at"]
        Annotation.objects.filter(study=part.study, annotator=part.annotator).update(
            is_flagged=True
        )
        annotation.is_flagged = True
        open_leases = Assignment.objects.filter(
            study=part.study, annotator=part.annotator, state=AssignmentState.ISSUED
        ).exclude(pk=annotation.assignment_id)
        for lease in open_leases.select_for_update().order_by("item_id"):
            _release(lease, now, AssignmentState.RETURNED)
    part.save(update_fields=fields)


def _announce(annotation: Annotation) -> None:
    for receiver, result in annotation_submitted.send_robust(
        sender=Annotation, annotation=annotation
    ):
        if isinstance(result, Exception):
            log.error("annotation_submitted receiver %r failed: %r", receiver, result)
