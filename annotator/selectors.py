"""Non-trivial reads: labels with provenance, study progress, a worker's standing."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any

import pandas as pd
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.db.models import Case, Count, F, JSONField, Prefetch, Q, QuerySet, Sum, When
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

import kinds
from formats import conversation, vocab

from . import span_prefill
from .choices import AssignmentState
from .collection import Outlook, collection_for
from .errors import NoJudgeBenchForm
from .models import (
    Annotation,
    Annotator,
    Assignment,
    Item,
    ItemOutput,
    Participation,
    QualificationQuestion,
    QualificationTest,
    Study,
)
from .sqlrows import Columns, db_value

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


def is_participant(study: Study, *, platform: str, external_id: str) -> bool:
    """Whether the worker behind this platform id already entered ``study``."""
    return Participation.objects.filter(
        study=study, annotator__platform=platform, annotator__external_id=external_id.strip()
    ).exists()


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
        .select_related("study", "item__input", "annotator", "assignment")
        .prefetch_related(
            Prefetch(
                "item__item_outputs",
                queryset=ItemOutput.objects.select_related("output__system").order_by("position"),
            )
        )
        .order_by("id")
    )


def label_row(annotation: Annotation) -> dict[str, Any]:
    """One label with its provenance, normalised to system order; the kind's own columns
    (``Kind.export_row``) follow the common ones. The pair columns (``system_a``,
    ``system_b``, ``left_system``, ``preferred_system``) name the item's outputs when it
    shows one (``system_a``) or two; an item of more outputs leaves them empty and the
    kind's columns name its systems (ranking: ``systems``, ``display_order``)."""
    item = annotation.item
    systems = [o.system.name for o in item.output_list()]
    pair = systems if len(systems) <= 2 else []
    system_a = pair[0] if pair else None
    system_b = pair[1] if len(pair) > 1 else None
    shown = annotation.assignment.display_order if annotation.assignment_id else None
    left_system = pair[shown[0]] if shown and len(pair) > 1 else None
    preferred = {"A": system_a, "B": system_b}.get(annotation.value)
    study = annotation.study
    kind = _bound_kind(study)
    own = kind.export_row(annotation.answer or {}, systems, shown or [])
    scores = (annotation.scores or None) if kind.kind.export_scores else None
    return {
        "annotation_id": annotation.pk,
        "study_id": annotation.study_id,
        "study_config_version": annotation.config_version,
        "guideline_revision": annotation.guideline_revision,
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
        "scores": scores,
        "annotator": annotation.annotator.pseudonym,
        "source": annotation.source,
        "time_spent_ms": annotation.time_spent_ms,
        "submitted_at": annotation.submitted_at.isoformat(),
        "flagged": annotation.is_flagged,
        **own,
    }


def _bound_kind(study: Study) -> kinds.Bound:
    """``study.bound_kind()``, made once per study instance (exports call it per row)."""
    cached = study.__dict__.get("_bound_kind")
    if cached is None:
        cached = study.__dict__["_bound_kind"] = study.bound_kind()
    return cached


def export_rows(
    annotations: Iterable[Annotation], *, texts: bool = False
) -> Iterator[dict[str, Any]]:
    """:func:`label_row` of each annotation; with ``texts``, also what it judged
    (:func:`label_texts`), as the Hugging Face export publishes it."""
    for annotation in annotations:
        row = label_row(annotation)
        yield row | label_texts(annotation) if texts else row


def label_texts(annotation: Annotation) -> dict[str, Any]:
    """The texts a label judged: ``input`` (a conversation input flattened, and its messages
    as ``input_messages``) and ``outputs``, the item's outputs in system order as ``{system,
    text, messages}`` (``messages``: a conversation output's, else ``None``)."""
    item = annotation.item
    conversation = item.input.conversation
    return {
        "input": item.input.text,
        "input_messages": conversation or None,
        "outputs": [
            {"system": o.system.name, "text": o.text, "messages": o.messages or None}
            for o in item.output_list()
        ],
    }


def study_progress(study: Study) -> dict[str, int]:
    """Counts a researcher watches: items, slots filled, labels collected and imported.

    ``target_annotations`` and ``submitted`` count the work items only (items ×
    redundancy, as the cost estimate does); gold checks are counted apart
    (``gold_submitted``), as they are served by the gold rate, not by redundancy."""
    items = Item.objects.filter(study=study, is_active=True).aggregate(
        items=Count("id", filter=Q(is_gold=False)),
        gold=Count("id", filter=Q(is_gold=True)),
        target=Sum("redundancy", filter=Q(is_gold=False)),
        done=Sum("n_done", filter=Q(is_gold=False)),
        taken=Sum("n_taken", filter=Q(is_gold=False)),
        gold_done=Sum("n_done", filter=Q(is_gold=True)),
    )
    labels = Annotation.objects.filter(study=study).aggregate(
        collected=Count("id", filter=Q(source="platform")),
        imported=Count("id", filter=Q(source="import")),
        workers=Count("annotator", distinct=True, filter=Q(source="platform")),
    )
    return {
        "items": items["items"] or 0,
        "gold_items": items["gold"] or 0,
        "target_annotations": items["target"] or 0,
        "submitted": items["done"] or 0,
        "gold_submitted": items["gold_done"] or 0,
        "leased": (items["taken"] or 0) - (items["done"] or 0),
        "collected": labels["collected"],
        "imported": labels["imported"],
        "workers": labels["workers"],
        "systems": study.systems.count(),
        "inputs": study.inputs.count(),
    }


def work_outlook(study: Study) -> Outlook:
    """What a worker with nothing to do now can expect: no more work, more later, or work
    being made right now (see ``collection``)."""
    return collection_for(study).outlook(study)


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


#: The worker's count of submitted items in the study (parameters: study, worker, state).
SUBMITTED_COUNT = (
    f"SELECT COUNT(*) FROM {connection.ops.quote_name(Assignment._meta.db_table)}"  # noqa: S608
    " WHERE study_id = %s AND annotator_id = %s AND state = %s"
)


def submitted_count(study_id: int, worker_id: int) -> int:
    """How many items the worker has submitted in the study (written out: it runs on every
    request of the worker cycle, and building it through the ORM costs more than running it)."""
    with connection.cursor() as cursor:
        cursor.execute(SUBMITTED_COUNT, [study_id, worker_id, AssignmentState.SUBMITTED.value])
        return cursor.fetchone()[0]


def items_done(participation: Participation) -> int:
    """How many items the worker has submitted in the study."""
    return submitted_count(participation.study_id, participation.annotator_id)


def quota_reached(participation: Participation) -> bool:
    """Whether the worker has done the study's ``items_per_worker`` items (without that
    number, never: they may go on while there is work)."""
    cap = participation.study.items_per_worker
    return cap is not None and items_done(participation) >= cap


def participation_outcome(participation: Participation, *, now=None) -> dict[str, Any]:
    """Where a worker stands when they open the end page, and which code is due.

    ``state``: ``failed`` (the qualification test, or blocked: the fail code),
    ``completed`` (the study's ``items_per_worker`` items done, or, in a study without
    that number, at least one; or every item that was left for them: the completion
    code), ``no_work`` (nothing was left for them before they did any: the no-work
    code), ``unfinished`` (work is left for them, no code yet) or ``stopped`` (they
    stopped early, no code). With ``done``, ``required`` (``items_per_worker``),
    ``left`` (items still to do, when a number is set), ``code`` and ``code_due``, and a
    sentence to show them."""
    study, status = participation.study, participation.status
    done = items_done(participation)
    required = study.items_per_worker
    left = None if required is None else max(required - done, 0)
    codes = {
        "completed": study.completion_code,
        "failed": study.fail_code,
        "no_work": study.no_work_code,
    }

    def outcome(state: str, text: str) -> dict[str, Any]:
        return {
            "state": state,
            "done": done,
            "required": required,
            "left": left,
            "code": codes.get(state, ""),
            "code_due": state in codes,
            "text": text,
        }

    if status == Participation.Status.FAILED:
        return outcome(
            "failed",
            _(
                "You did not pass the qualification test, so you cannot take part in "
                "this study. Thank you for your time."
            ),
        )
    if status == Participation.Status.BLOCKED or participation.annotator.is_blocked:
        return outcome(
            "failed",
            _(
                "Too many of your answers to check questions were wrong, so your access "
                "to this study has been withdrawn."
            ),
        )
    if status == Participation.Status.STOPPED:
        return outcome(
            "stopped",
            ngettext(
                "You stopped this study after %(n)d item, without a code.",
                "You stopped this study after %(n)d items, without a code.",
                done,
            )
            % {"n": done},
        )
    if status == Participation.Status.QUALIFYING and _work_left(
        participation, now or timezone.now()
    ):
        return outcome("unfinished", _("Take the qualification test first."))
    if done and (required is None or done >= required):
        return outcome(
            "completed",
            ngettext(
                "You have finished: %(n)d item. Thank you!",
                "You have finished: %(n)d items. Thank you!",
                done,
            )
            % {"n": done},
        )
    if _work_left(participation, now or timezone.now()):
        if required is None:
            return outcome("unfinished", _("You have not done any items yet."))
        return outcome(
            "unfinished",
            _("You have done %(done)d of %(required)d items.")
            % {"done": done, "required": required},
        )
    if done:
        return outcome(
            "completed",
            ngettext(
                "You have finished: %(n)d item, all that was left for you. Thank you!",
                "You have finished: %(n)d items, all that was left for you. Thank you!",
                done,
            )
            % {"n": done},
        )
    return outcome(
        "no_work", _("There is no work left for you in this study. Thank you for coming.")
    )


def work_left(participation: Participation) -> bool:
    """Whether there is, or will be, work for the worker in the study (a worker arriving
    at a finished study is told so before any instructions)."""
    return _work_left(participation, timezone.now())


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
    return free or work_outlook(study) is not Outlook.NONE


def example_item(study: Study) -> Item | None:
    """An item to show in a preview (MTurk's preview mode); it accepts nothing."""
    return (
        Item.objects.filter(study=study, is_gold=False, is_active=True)
        .select_related("input")
        .prefetch_related("item_outputs__output")
        .first()
    )


def has_known_answers(study: Study) -> bool:
    """Whether an unused work item of the study has a known answer (gold material)."""
    work = Item.objects.filter(study=study, is_gold=False, is_active=True)
    return work.exclude(expected={}).exists()


def task_page(study: Study, item: Item, display_order: list[int]) -> dict[str, Any]:
    """What the task page shows of an item, by the study's kind: the kind's template
    (``kind_template``), the output texts in ``display_order`` and the kind's context."""
    kind = study.bound_kind()
    outputs = item.output_list()
    return {
        "kind_template": kind.kind.template,
        # one form for all (a text beside conversations is shown as one turn): blinding
        "outputs": conversation.same_form([outputs[i].shown for i in display_order]),
        **kind.context(),
        **span_prefill.page_context(study, item, kind.opts),
    }


def qualification_page(
    test: QualificationTest, question: QualificationQuestion, display_order: list[int]
) -> dict[str, Any]:
    """What the qualify page shows of a question: like :func:`task_page`, the test's kind's
    own template with the question's outputs in ``display_order`` and the kind's context."""
    kind = test.kind_impl
    return {
        "kind": kind.name,
        "kind_template": kind.template,
        "outputs": [question.outputs[i] for i in display_order],
        **test.bound_kind().context(),
    }


def participation_stats(participation: Participation) -> dict[str, float | int | None]:
    """What a researcher checks per worker: items done, median time on task, gold accuracy,
    strikes, and the share of left choices among left/right answers (position bias)."""
    return participations_stats([participation])[participation.pk]


def participations_stats(
    participations: Iterable[Participation],
) -> dict[int, dict[str, float | int | None]]:
    """:func:`participation_stats` of many participations (by id) in one query, whatever
    their number: the admin's list of workers asks this once per page."""
    participations = list(participations)
    labels: dict[tuple[int, int], list[tuple[int | None, str]]] = {
        (p.study_id, p.annotator_id): [] for p in participations
    }
    rows = Annotation.objects.filter(
        study_id__in={p.study_id for p in participations},
        annotator_id__in={p.annotator_id for p in participations},
        source="platform",
    ).values_list("study_id", "annotator_id", "time_spent_ms", "raw_answer")
    for study_id, annotator_id, time_ms, raw in rows.iterator():
        if (study_id, annotator_id) in labels:
            labels[study_id, annotator_id].append((time_ms, raw))
    return {p.pk: _stats_of(p, labels[p.study_id, p.annotator_id]) for p in participations}


def _stats_of(
    participation: Participation, labels: list[tuple[int | None, str]]
) -> dict[str, float | int | None]:
    times = sorted(t for t, _ in labels if t is not None)
    sides = [raw for _, raw in labels if raw in ("left", "right")]
    median = None
    if times:
        mid = len(times) // 2
        median = times[mid] if len(times) % 2 else (times[mid - 1] + times[mid]) / 2
    return {
        "done": len(labels),
        "median_time_ms": median,
        "gold_accuracy": (
            participation.gold_correct / participation.gold_seen
            if participation.gold_seen
            else None
        ),
        "strikes": participation.strikes,
        "left_rate": sides.count("left") / len(sides) if sides else None,
    }


def study_judgebench(study: Study, annotations: QuerySet[Annotation] | None = None) -> dict:
    """The study's labels as a Judge-Bench document in memory (:func:`study_judgebench_chunks`
    writes the same document piece by piece, as the command and the API do)."""
    from formats.judgebench_export import judgebench_document

    return judgebench_document(*_judgebench_parts(study, annotations))


def study_judgebench_chunks(
    study: Study,
    annotations: QuerySet[Annotation] | None = None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[str]:
    """The study's labels as the text of a Judge-Bench document (:mod:`formats.judgebench_export`):
    every item an instance, the labels of ``annotations`` (default: all of the study's)
    without flagged ones, as the report leaves them out. Judge-Bench has two shapes, a pair
    of outputs with a preference (pairwise) and one output with scores (Likert); a kind
    without a Judge-Bench form (``Kind.judgebench_form``) is refused with
    :class:`~annotator.errors.NoJudgeBenchForm` here, before anything is read or written.
    The items are read 2,000 at a time and written one by one; ``progress(n)`` is told how
    many instances are written."""
    from formats.judgebench_export import judgebench_chunks

    return judgebench_chunks(*_judgebench_parts(study, annotations), progress=progress)


def _judgebench_parts(study: Study, annotations: QuerySet[Annotation] | None) -> tuple:
    shape = JUDGEBENCH_SHAPES.get(study.kind_impl.judgebench_form)
    if shape is None:
        with_form = [kinds.get(name) for name in kinds.judgebench_kinds()]
        raise NoJudgeBenchForm(study.kind_impl, with_form)
    if annotations is None:
        annotations = Annotation.objects.filter(study=study)
    labels = (
        annotations.filter(is_flagged=False)
        .order_by("id")
        .values_list("item_id", "annotator__pseudonym", "value", "scores")
    )
    items = (
        Item.objects.filter(study=study)
        .order_by("id")
        .select_related("input")
        .prefetch_related(
            Prefetch(
                "item_outputs",
                queryset=ItemOutput.objects.select_related("output__system").order_by("position"),
            )
        )
    )
    properties, instance, value = shape(study, labels)

    def instances():
        for item in items.iterator(2000):
            outs = item.output_list()
            yield instance(item.pk, item.input, [(o.system.name, o.text) for o in outs])

    def values():
        for item, who, label, scores in labels.iterator(2000):
            yield item, who, value(label, scores)

    return study.name, properties, instances(), values()


def _judgebench_pairwise(study: Study, labels: QuerySet) -> tuple:
    from formats.judgebench_export import PREFERENCE

    (declared,) = study.bound_kind().judgebench_properties(study.question)
    # a label no longer allowed (the study was reconfigured) is still declared
    given = set(labels.exclude(value="").values_list("value", flat=True).distinct())
    allowed = declared.labels + tuple(sorted(given - set(declared.labels)))
    properties = [replace(declared, labels=allowed)]

    def instance(pk: int, inp, outs: list[tuple[str, str]]) -> dict:
        (sys_a, out_a), (sys_b, out_b) = outs
        return {
            "id": pk,
            "input": inp.text,
            "output_a": out_a,
            "output_b": out_b,
            "input_id": inp.external_id,
            "system_a": sys_a,
            "system_b": sys_b,
        }

    return properties, instance, lambda value, scores: {PREFERENCE: value}


def _judgebench_likert(study: Study, labels: QuerySet) -> tuple:
    properties = study.bound_kind().judgebench_properties(study.question)

    def instance(pk: int, inp, outs: list[tuple[str, str]]) -> dict:
        (system, text) = outs[0]
        return {
            "id": pk,
            "input": inp.text,
            "response": text,
            "input_id": inp.external_id,
            "system": system,
        }

    return properties, instance, lambda value, scores: scores or {}


#: How items and labels of each Judge-Bench form (``Kind.judgebench_form``) are written.
JUDGEBENCH_SHAPES = {"pair": _judgebench_pairwise, "rating": _judgebench_likert}


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
    settings |= study.bound_kind().card_settings()
    settings.setdefault("criteria", [])
    return settings


# --- labels as protocol/ and analysis/ read them (through the study's kind) ------------------
#: Columns of :func:`label_rows` (the contract's seven, then provenance).
PAIR_COLUMNS = (
    "input", "annotator", "item", "criterion", "system", "other_system", "preference",
    "annotation", "flagged", "is_gold", "complete",
)  # fmt: skip
#: Columns of :func:`score_rows`.
SCORE_COLUMNS = (
    "input", "annotator", "item", "criterion", "system", "score",
    "annotation", "flagged", "is_gold", "complete",
)  # fmt: skip


def item_systems(study: Study) -> dict[int, list[int]]:
    """Item id → the system ids of its outputs, in system order (position)."""
    systems: dict[int, list[int]] = {}
    links = ItemOutput.objects.filter(item__study=study).order_by("item_id", "position")
    for item_id, system_id in links.values_list("item_id", "output__system_id").iterator(5000):
        systems.setdefault(item_id, []).append(system_id)
    return systems


def item_texts(study: Study) -> Iterator[tuple[int, int, str]]:
    """``(item id, position, output text)`` of every output every item shows (streamed)."""
    links = ItemOutput.objects.filter(item__study=study).order_by("item_id", "position")
    yield from links.values_list("item_id", "position", "output__text").iterator(2000)


def _answers(study: Study, include_flagged: bool, include_gold: bool):
    """(annotation, item, input, annotator, answer, flagged, gold, complete) per label;
    the answer as the kind reads it (an imported label's from its value and scores)."""
    kind = study.bound_kind()
    rows = Annotation.objects.filter(study=study)
    if not include_flagged:
        rows = rows.filter(is_flagged=False)
    if not include_gold:
        rows = rows.filter(item__is_gold=False)
    # the scores only of the labels stored without an answer: a decision reads every label
    # of the study, and each JSON column read costs a parse per label
    rows = rows.annotate(
        summary=Case(When(answer={}, then="scores"), default=None, output_field=JSONField())
    )
    rows = rows.order_by("id").values_list(
        "pk",
        "item_id",
        "item__input_id",
        "annotator_id",
        "answer",
        "value",
        "summary",
        "is_flagged",
        "item__is_gold",
        "item__n_done",
        "item__redundancy",
    )
    for pk, item, inp, who, answer, value, scores, flagged, gold, done, wanted in rows.iterator(
        5000
    ):
        if not answer:
            answer = kind.answer_from_summary(value, scores or {})
        yield pk, item, inp, who, answer, bool(flagged), bool(gold), done >= wanted


def label_rows(
    study: Study, *, include_flagged: bool = False, include_gold: bool = False
) -> pd.DataFrame:
    """Every label's pair preferences (``Kind.pair_preferences``): one row per (annotation,
    criterion, pair of the item's outputs) with ``input``, ``annotator``, ``item``, the
    ``system`` and ``other_system`` ids (``system`` earlier in the item's system order) and
    the ``preference`` for ``system`` (1, 0.5 or 0); then ``annotation``, ``flagged``,
    ``is_gold`` and ``complete`` (the item has all its labels). Flagged labels and gold
    items are left out unless asked for. A ranking of k outputs gives k(k−1)/2 rows."""
    kind = study.bound_kind()
    systems = item_systems(study)
    out = []
    for pk, item, inp, who, answer, flagged, gold, complete in _answers(
        study, include_flagged, include_gold
    ):
        shown = systems.get(item, [])
        for criterion, i, j, pref in kind.pair_preferences(answer):
            out.append(
                (inp, who, item, criterion, shown[i], shown[j], pref, pk, flagged, gold, complete)
            )
    return pd.DataFrame(out, columns=list(PAIR_COLUMNS))


def score_rows(
    study: Study, *, include_flagged: bool = False, include_gold: bool = False
) -> pd.DataFrame:
    """Every label's numeric scores (``Kind.scores``): one row per (annotation, criterion,
    output) with ``input``, ``annotator``, ``item``, ``criterion``, the output's ``system``
    id and the ``score``; then provenance as in :func:`label_rows`."""
    kind = study.bound_kind()
    systems = item_systems(study)
    out = []
    for pk, item, inp, who, answer, flagged, gold, complete in _answers(
        study, include_flagged, include_gold
    ):
        shown = systems.get(item, [])
        for criterion, by_position in kind.scores(answer).items():
            for position, score in by_position.items():
                out.append(
                    (inp, who, item, criterion, shown[position], score, pk, flagged, gold, complete)
                )
    return pd.DataFrame(out, columns=list(SCORE_COLUMNS))


def report_rows(study: Study) -> Iterator[tuple]:
    """Every label as the study report reads it (``Kind.report_labels``): per (annotation,
    property) ``(annotation, item, annotator pseudonym, property, label, raw answer, source,
    flagged, is_gold)``, flagged labels and gold items included, in submission order."""
    kind = study.bound_kind()
    rows = (
        Annotation.objects.filter(study=study)
        .order_by("id")
        .values_list(
            "pk",
            "item_id",
            "annotator__pseudonym",
            "answer",
            "value",
            "scores",
            "raw_answer",
            "source",
            "is_flagged",
            "item__is_gold",
        )
    )
    for pk, item, who, answer, value, scores, raw, source, flagged, gold in rows.iterator(5000):
        if not answer:
            answer = kind.answer_from_summary(value, scores or {})
        if kind.kind.report_by_pair:
            for prop, i, j, pref in kind.pair_preferences(answer):
                label = PAIR_LABELS[pref]
                yield pk, f"{item}:{i}-{j}", who, prop, label, raw, source, flagged, gold
            continue
        for prop, label, *own_raw in kind.report_labels(answer):
            yield pk, item, who, prop, label, own_raw[0] if own_raw else raw, source, flagged, gold


def annotation_revisions(study: Study) -> dict[int, int]:
    """Annotation id → the guideline revision it was made under (the report's split)."""
    rows = Annotation.objects.filter(study=study).values_list("pk", "guideline_revision")
    return dict(rows.iterator(5000))


#: A pair preference of the first output over the second as a report label.
PAIR_LABELS = vocab.LABEL_OF_PREFERENCE


def answer_rows(
    study: Study, *, include_flagged: bool = False, include_gold: bool = False
) -> Iterator[tuple]:
    """Per annotation ``(annotation, item, annotator pseudonym, input external id, system of
    the item's first output, answer)`` with the answer as the kind stores it (an imported
    label through ``Kind.answer_from_summary``), for the kind's report sections; labels of
    blocked workers and gold items left out unless asked for; in submission order."""
    kind = study.bound_kind()
    names = dict(study.systems.values_list("pk", "name"))
    systems = item_systems(study)
    rows = Annotation.objects.filter(study=study).order_by("id")
    if not include_flagged:
        rows = rows.filter(is_flagged=False)
    if not include_gold:
        rows = rows.filter(item__is_gold=False)
    for pk, item, who, input_id, answer, value, scores in rows.values_list(
        "pk",
        "item_id",
        "annotator__pseudonym",
        "item__input__external_id",
        "answer",
        "value",
        "scores",
    ).iterator(5000):
        if not answer:
            answer = kind.answer_from_summary(value, scores or {})
        shown = systems.get(item, [])
        yield pk, item, who, input_id, names[shown[0]] if shown else None, answer


def report_properties(study: Study, observed: dict[str, set]) -> list[tuple]:
    """The study's judged properties (``Kind.report_properties``)."""
    return study.bound_kind().report_properties(study.question or "", observed)


def report_items(study: Study) -> Iterator[tuple]:
    """Per item ``(item, input external id, system of position 0, of position 1 or None,
    input priority, is_gold)``."""
    names = dict(study.systems.values_list("pk", "name"))
    systems = item_systems(study)
    rows = (
        Item.objects.filter(study=study)
        .order_by("id")
        .values_list("pk", "input__external_id", "input__priority", "is_gold")
    )
    by_pair = study.kind_impl.report_by_pair
    for pk, input_id, priority, gold in rows.iterator(5000):
        shown = [names[s] for s in systems.get(pk, [])]
        if by_pair:  # each pair of the item's outputs a pairwise item (Kind.report_by_pair)
            for i, j in itertools.combinations(range(len(shown)), 2):
                yield f"{pk}:{i}-{j}", input_id, shown[i], shown[j], priority, gold
            continue
        shown += [None, None]
        yield pk, input_id, shown[0], shown[1], priority, gold
