"""Judge ratings: import a file of them, record one."""

from __future__ import annotations

from django.db import IntegrityError, transaction

from .. import importers, ratings
from ..errors import (
    ImportRejected,
)
from ..models import (
    Input,
    JudgeRating,
    Study,
    System,
)
from .studies import BULK


def judge_ratings_import(
    study: Study, data: importers.Source, *, filename: str = "", judge: str = ""
) -> int:
    """Validate a judge or metric rating file whole, then store it; returns the count.

    ``data``: the file's bytes or an open binary file; one above ``HUMEVAL_IMPORT_MAX_BYTES``
    raises :class:`~annotator.errors.ImportTooLarge` before it is read (CLI, admin and API
    alike). Every input and system must exist in the study, and no rating may already be
    stored under the same judge, input, systems and criterion; otherwise nothing is stored.
    """
    specs = ratings.parse_ratings(importers.read_limited(data), filename, judge)
    inputs = dict(Input.objects.filter(study=study).values_list("external_id", "pk"))
    systems = dict(System.objects.filter(study=study).values_list("name", "pk"))
    errors = []
    for spec in specs:
        if spec.input_id not in inputs:
            errors.append(f"{spec.where}: unknown input '{spec.input_id}'")
        for name in filter(None, (spec.system, spec.other_system)):
            if name not in systems:
                errors.append(f"{spec.where}: unknown system '{name}'")
    existing = set(
        JudgeRating.objects.filter(study=study, judge__in={s.judge for s in specs}).values_list(
            "judge", "input__external_id", "system__name", "other_system__name", "criterion"
        )
    )
    errors += [
        f"{spec.where}: already stored for judge '{spec.judge}'"
        for spec in specs
        if (spec.judge, spec.input_id, spec.system, spec.other_system or None, spec.criterion)
        in existing
    ]
    if errors:
        raise ImportRejected(errors)
    with transaction.atomic():
        JudgeRating.objects.bulk_create(
            (
                JudgeRating(
                    study=study,
                    judge=spec.judge,
                    input_id=inputs[spec.input_id],
                    system_id=systems[spec.system],
                    other_system_id=systems[spec.other_system] if spec.other_system else None,
                    criterion=spec.criterion,
                    score=spec.score,
                    label=spec.label,
                )
                for spec in specs
            ),
            batch_size=BULK,
        )
    return len(specs)


def judge_rating_record(
    study: Study,
    *,
    judge: str,
    input_id: int,
    system_id: int,
    other_system_id: int | None = None,
    criterion: str = "",
    sample: int = 0,
    prompt_hash: str = "",
    raw_answer: str = "",
    shown_first_id: int | None = None,
    score: float | None = None,
    label: str = "",
    parse_ok: bool = True,
    proposal: dict | None = None,
) -> bool:
    """Store one rating made by ``run_judge`` (:mod:`annotator.judging`); ``False`` when the
    same (judge, input, systems, criterion, sample) is already stored, e.g. by a concurrent
    run. An unparseable answer (``parse_ok`` false) is stored with neither score nor label."""
    if parse_ok == (score is None and not label):
        raise ValueError("a parsed answer needs a score or a label, an unparseable one neither")
    key = {
        "study": study,
        "judge": judge,
        "input_id": input_id,
        "system_id": system_id,
        "other_system_id": other_system_id,
        "criterion": criterion,
        "sample": sample,
    }
    try:
        with transaction.atomic():
            JudgeRating.objects.create(
                **key,
                prompt_hash=prompt_hash,
                raw_answer=raw_answer,
                shown_first_id=shown_first_id,
                score=score,
                label=label,
                parse_ok=parse_ok,
                proposal=proposal,
            )
    except IntegrityError:
        if JudgeRating.objects.filter(**key).exists():
            return False
        raise
    return True
