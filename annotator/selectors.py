"""Non-trivial reads: labels with provenance, study progress, a worker's standing."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.db.models import Count, F, Q, QuerySet, Sum
from django.utils import timezone

from .choices import AssignmentState
from .models import Annotation, Annotator, Assignment, Item, Participation, Study
from .signals import work_expected
from .signals import work_imminent as work_imminent_signal
from .sqlrows import Columns, db_value

#: Columns of an exported label, in order. ``score_<criterion>`` columns follow in CSV.
LABEL_FIELDS = (
    "annotation_id",
    "study_id",
    "study_config_version",
    "item_id",
    "input_id",
    "round",
    "is_gold",
    "system_a",
    "system_b",
    "left_system",
    "raw_answer",
    "label",
    "preferred_system",
    "scores",
    "annotator",
    "source",
    "time_spent_ms",
    "submitted_at",
    "flagged",
)


_PART, _STUDY, _WORKER = Columns(Participation, "p"), Columns(Study, "s"), Columns(Annotator, "w")


def worker_participation(pk: int, study_public_id) -> Participation | None:
    """Participation ``pk`` if it belongs to the study ``study_public_id``, with the study and
    the worker loaded; ``None`` otherwise. One written-out statement: every worker page
    starts with it (``sqlrows`` explains why)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {_PART.sql}, {_STUDY.sql}, {_WORKER.sql} FROM {_PART.table}"  # noqa: S608
            f" JOIN {_STUDY.table} ON s.id = p.study_id"
            f" JOIN {_WORKER.table} ON w.id = p.annotator_id"
            " WHERE p.id = %s AND s.public_id = %s",
            [pk, db_value(Study, "public_id", study_public_id)],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    participation = _PART.load(row)
    participation.study = _STUDY.load(row, len(_PART))
    participation.annotator = _WORKER.load(row, len(_PART) + len(_STUDY))
    return participation


def studies_visible_to(user: AbstractBaseUser) -> QuerySet[Study]:
    """The studies ``user`` may read and act on: every study for an active superuser, else
    exactly those that name the user in ``Study.researchers`` (being staff grants nothing
    here). Every API route, the report and dashboard pages and every admin page filter by it."""
    if not user.is_authenticated or not user.is_active:
        return Study.objects.none()
    if user.is_superuser:
        return Study.objects.all()
    return Study.objects.filter(researchers=user)


def annotations_for_export(study: Study) -> QuerySet[Annotation]:
    return (
        Annotation.objects.filter(study=study)
        .select_related(
            "item__input",
            "item__output_a__system",
            "item__output_b__system",
            "annotator",
            "assignment",
        )
        .order_by("id")
    )


def label_row(annotation: Annotation) -> dict[str, Any]:
    """One label with its provenance, normalised to system order."""
    item = annotation.item
    system_a = item.output_a.system.name
    system_b = item.output_b.system.name if item.output_b_id else None
    left_is_a = annotation.assignment.left_is_a if annotation.assignment_id else None
    if left_is_a is None or system_b is None:
        left_system = None
    else:
        left_system = system_a if left_is_a else system_b
    preferred = {"A": system_a, "B": system_b}.get(annotation.value)
    return {
        "annotation_id": annotation.pk,
        "study_id": annotation.study_id,
        "study_config_version": annotation.config_version,
        "item_id": item.pk,
        "input_id": item.input.external_id,
        "round": item.round_number,
        "is_gold": item.is_gold,
        "system_a": system_a,
        "system_b": system_b,
        "left_system": left_system,
        "raw_answer": annotation.raw_answer or None,
        "label": annotation.value or None,
        "preferred_system": preferred,
        "scores": annotation.scores or None,
        "annotator": annotation.annotator.pseudonym,
        "source": annotation.source,
        "time_spent_ms": annotation.time_spent_ms,
        "submitted_at": annotation.submitted_at.isoformat(),
        "flagged": annotation.is_flagged,
    }


def label_rows(annotations: Iterable[Annotation]) -> Iterator[dict[str, Any]]:
    for annotation in annotations:
        yield label_row(annotation)


def study_progress(study: Study) -> dict[str, int]:
    """Counts a researcher watches: items, slots filled, labels collected and imported."""
    items = Item.objects.filter(study=study, is_active=True).aggregate(
        items=Count("id"), target=Sum("redundancy"), done=Sum("n_done"), taken=Sum("n_taken")
    )
    labels = Annotation.objects.filter(study=study).aggregate(
        collected=Count("id", filter=Q(source="platform")),
        imported=Count("id", filter=Q(source="import")),
        workers=Count("annotator", distinct=True, filter=Q(source="platform")),
    )
    return {
        "items": items["items"] or 0,
        "target_annotations": items["target"] or 0,
        "submitted": items["done"] or 0,
        "leased": (items["taken"] or 0) - (items["done"] or 0),
        "collected": labels["collected"],
        "imported": labels["imported"],
        "workers": labels["workers"],
        "systems": study.systems.count(),
        "inputs": study.inputs.count(),
    }


def more_work_expected(study: Study) -> bool:
    """Whether a worker with nothing to do now should wait for more (see ``work_expected``)."""
    return any(result is True for _, result in work_expected.send(sender=Study, study=study))


def work_imminent(study: Study) -> bool:
    """Whether new work is being made right now (see ``work_imminent``): a worker who has
    none may get it within a moment."""
    return any(result is True for _, result in work_imminent_signal.send(sender=Study, study=study))


def worker_progress(study: Study, done: int) -> dict[str, int | None]:
    """The progress indicator of a worker who has done ``done`` items: ``Task k of N`` where
    N is the study's items-per-worker cap, plain ``Task k`` without a cap. What is still open
    to one worker shrinks as others take items, so a total counted from it would change from
    page to page and from worker to worker; only the cap is a promise."""
    cap = study.items_per_worker
    return {
        "done": done,
        "position": done + 1,
        "total": None if cap is None else max(cap, done + 1),
    }


def participation_outcome(participation: Participation, *, now=None) -> dict[str, Any]:
    """Where a worker stands when they open the end page, and which code is due.

    ``kind``: ``failed`` (the qualification test, or blocked: the fail code),
    ``completed`` (the study's ``items_per_worker`` items done, or, in a study without
    that number, at least one; or every item that was left for them: the completion
    code), ``no_work`` (nothing was left for them before they did any: the no-work
    code), ``unfinished`` (work is left for them, no code yet) or ``stopped`` (they
    stopped early, no code). With ``done``, ``required`` (``items_per_worker``),
    ``left`` (items still to do, when a number is set), ``code`` and ``code_due``, and a
    sentence to show them."""
    study, status = participation.study, participation.status
    done = Assignment.objects.filter(
        study_id=participation.study_id,
        annotator_id=participation.annotator_id,
        state=AssignmentState.SUBMITTED,
    ).count()
    required = study.items_per_worker
    left = None if required is None else max(required - done, 0)
    codes = {
        "completed": study.completion_code,
        "failed": study.fail_code,
        "no_work": study.no_work_code,
    }

    def outcome(kind: str, text: str) -> dict[str, Any]:
        return {
            "kind": kind,
            "done": done,
            "required": required,
            "left": left,
            "code": codes.get(kind, ""),
            "code_due": kind in codes,
            "text": text,
        }

    if status == Participation.Status.FAILED:
        return outcome(
            "failed",
            "You did not pass the qualification test, so you cannot take part in "
            "this study. Thank you for your time.",
        )
    if status == Participation.Status.BLOCKED or participation.annotator.is_blocked:
        return outcome(
            "failed",
            "Too many of your answers to check questions were wrong, so your access "
            "to this study has been withdrawn.",
        )
    if status == Participation.Status.STOPPED:
        return outcome("stopped", f"You stopped this study after {done} items, without a code.")
    if status == Participation.Status.QUALIFYING:
        return outcome("unfinished", "Take the qualification test first.")
    if done and (required is None or done >= required):
        return outcome("completed", f"You have finished: {done} items. Thank you!")
    if _work_left(participation, now or timezone.now()):
        if required is None:
            return outcome("unfinished", "You have not done any items yet.")
        return outcome("unfinished", f"You have done {done} of {required} items.")
    if done:
        return outcome(
            "completed",
            f"You have finished: {done} items, all that was left for you. Thank you!",
        )
    return outcome("no_work", "There is no work left for you in this study. Thank you for coming.")


def _work_left(participation: Participation, now) -> bool:
    """Whether the worker has a task, could be given one, or should wait for the next
    round of an adaptive study."""
    study = participation.study
    if Assignment.objects.filter(
        study_id=study.pk,
        annotator_id=participation.annotator_id,
        state=AssignmentState.ISSUED,
        expires_at__gt=now,
    ).exists():
        return True
    if not study.is_active:
        return False
    free = (
        Item.objects.filter(study=study, is_active=True, is_gold=False, n_taken__lt=F("redundancy"))
        .exclude(assignments__annotator_id=participation.annotator_id)
        .exists()
    )
    return free or more_work_expected(study)


def example_item(study: Study) -> Item | None:
    """An item to show in a preview (MTurk's preview mode); it accepts nothing."""
    return (
        Item.objects.filter(study=study, is_gold=False, is_active=True)
        .select_related("input", "output_a", "output_b")
        .first()
    )


def participation_stats(participation: Participation) -> dict[str, float | int | None]:
    """What a researcher checks per worker: items done, median time on task, gold accuracy,
    strikes, and the share of left choices among left/right answers (position bias)."""
    labels = Annotation.objects.filter(
        study_id=participation.study_id,
        annotator_id=participation.annotator_id,
        source="platform",
    )
    times = sorted(t for t in labels.values_list("time_spent_ms", flat=True) if t is not None)
    sides = labels.filter(raw_answer__in=["left", "right"]).aggregate(
        n=Count("id"), left=Count("id", filter=Q(raw_answer="left"))
    )
    median = None
    if times:
        mid = len(times) // 2
        median = times[mid] if len(times) % 2 else (times[mid - 1] + times[mid]) / 2
    return {
        "done": labels.count(),
        "median_time_ms": median,
        "gold_accuracy": (
            participation.gold_correct / participation.gold_seen
            if participation.gold_seen
            else None
        ),
        "strikes": participation.strikes,
        "left_rate": sides["left"] / sides["n"] if sides["n"] else None,
    }


def study_judgebench(study: Study, annotations: QuerySet[Annotation] | None = None) -> dict:
    """The study's labels as a Judge-Bench document (:mod:`formats.judgebench_export`): every
    item an instance, the labels of ``annotations`` (default: all of the study's) without
    flagged ones, as the report leaves them out."""
    from formats.judgebench_export import PREFERENCE, JudgeBenchProperty, judgebench_document

    pairwise = study.kind == "pairwise"
    if pairwise:
        raw = {"left": "A", "right": "B"}
        allowed = [raw.get(str(a), str(a)) for a in study.pairwise_answers()]
        properties = [JudgeBenchProperty(PREFERENCE, tuple(allowed), description=study.question)]
    else:
        properties = [
            JudgeBenchProperty(c.name, tuple(map(str, c.labels)), description=c.label)
            if c.labels
            else JudgeBenchProperty(c.name, (), c.scale_min, c.scale_max, c.label)
            for c in study.criteria.all()
        ]
    items = (
        Item.objects.filter(study=study)
        .order_by("id")
        .values_list(
            "pk",
            "input__external_id",
            "input__text",
            "output_a__system__name",
            "output_a__text",
            "output_b__system__name",
            "output_b__text",
        )
    )

    def instances():
        for pk, input_id, text, sys_a, out_a, sys_b, out_b in items.iterator(2000):
            if pairwise:
                yield {
                    "id": pk,
                    "input": text,
                    "output_a": out_a,
                    "output_b": out_b,
                    "input_id": input_id,
                    "system_a": sys_a,
                    "system_b": sys_b,
                }
            else:
                yield {
                    "id": pk,
                    "input": text,
                    "response": out_a,
                    "input_id": input_id,
                    "system": sys_a,
                }

    if annotations is None:
        annotations = Annotation.objects.filter(study=study)
    labels = (
        annotations.filter(is_flagged=False)
        .order_by("id")
        .values_list("item_id", "annotator__pseudonym", "value", "scores")
    )
    if pairwise:  # a label no longer allowed (the study was reconfigured) is still declared
        given = set(labels.exclude(value="").values_list("value", flat=True).distinct())
        if extra := given - set(properties[0].labels):
            properties[0] = JudgeBenchProperty(
                PREFERENCE, properties[0].labels + tuple(sorted(extra)), description=study.question
            )

    def values():
        for item, who, value, scores in labels.iterator(2000):
            yield item, who, ({PREFERENCE: value} if pairwise else scores or {})

    return judgebench_document(study.name, properties, instances(), values())


def study_settings(study: Study) -> dict[str, Any]:
    """The settings a dataset card of the study's labels states."""
    settings: dict[str, Any] = {
        "name": study.name,
        "study_id": study.pk,
        "kind": study.kind,
        "systems": list(study.systems.order_by("id").values_list("name", flat=True)),
        "redundancy": study.redundancy,
        "collection": study.collection,
        "config_version": study.config_version,
        "question": study.question,
    }
    if study.kind == "pairwise":
        settings["answers"] = [str(a) for a in study.pairwise_answers()]
    settings["criteria"] = [
        {"name": c.name, "label": c.label}
        | ({"labels": c.labels} if c.labels else {"scale": [c.scale_min, c.scale_max]})
        for c in study.criteria.all()
    ]
    return settings
