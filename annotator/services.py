"""Every write of the annotator app: imports, assignments, submissions, configuration."""

from __future__ import annotations

import logging
import random
import secrets
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import (
    Count,
    Exists,
    F,
    IntegerField,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Greatest
from django.utils import timezone

import kinds

from . import importers, prefill_skip, ratings, selectors, span_prefill
from .choices import AnnotationSource, AssignmentState
from .errors import (
    AssignmentExpired,
    AssignmentNotFound,
    ImportRejected,
    InvalidAnswer,
    OpenInAnotherBrowser,
    WorkerBlocked,
)
from .models import (
    CONFIG_FIELDS,
    Annotation,
    Annotator,
    Assignment,
    Criterion,
    Input,
    Item,
    ItemOutput,
    JudgeRating,
    Output,
    Participation,
    QualificationAttempt,
    QualificationQuestion,
    QualificationTest,
    Study,
    System,
    browser_key,
)
from .signals import annotation_submitted, study_created, study_reconfiguring
from .sqlrows import Columns, db_value, insert

log = logging.getLogger(__name__)
BULK = 2000


# --- studies ----------------------------------------------------------------------------
def study_import(
    data: importers.Source,
    *,
    filename: str = "",
    overrides: dict[str, Any] | None = None,
    owner: AbstractBaseUser | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Study:
    """Validate a study file whole, then create the study in one transaction.

    ``data`` is the file's bytes or an open binary file (an upload, a file on disk; it is
    read twice, never whole into memory for JSONL and CSV, and must stay open until this
    returns). Every import (CLI, admin, API) comes through here, so here the size limit
    is kept: a file above ``HUMEVAL_IMPORT_MAX_BYTES`` raises
    :class:`~annotator.errors.ImportTooLarge` before it is read. Raises
    :class:`~annotator.errors.ImportRejected` naming every fault of the options and of
    every record at once (up to ``importers.MAX_ERRORS``) before anything is written.
    ``owner`` (who imports it) becomes its researcher; ``progress(stored, inputs)`` is told
    after each batch of inputs stored (:func:`study_create`).
    """
    spec = importers.scan_study_file(
        data, filename, overrides, check_options=_study_option_problems
    )
    spec.options.setdefault("source", filename[:300])
    try:
        return study_create(spec, owner=owner, progress=progress)
    except ValidationError as exc:  # an option outside the model's range; nothing written
        raise ImportRejected(_option_messages(exc)) from None


def _option_messages(exc: ValidationError) -> list[str]:
    return [
        f"study: '{field}': {message}"
        for field, messages in exc.message_dict.items()
        for message in messages
    ]


def _study_option_problems(options: dict[str, Any]) -> list[str]:
    """What the model refuses in a file's study options (a value out of range, text too
    long), checked with the records so one answer names every fault."""
    unset = [f.name for f in Study._meta.fields if f.name not in options]  # defaults hold
    try:
        Study(**options).full_clean(exclude=unset, validate_unique=False)
    except ValidationError as exc:
        return _option_messages(exc)
    return []


def _batches(records, size: int):
    batch = []
    for record in records:
        batch.append(record)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def study_researcher_add(study: Study, user: AbstractBaseUser | None) -> None:
    """Name ``user`` a researcher of ``study`` (whoever creates or imports a study becomes
    its researcher, so it stays visible to them); nothing for no user."""
    if user is not None and user.pk:
        study.researchers.add(user)


@transaction.atomic
def study_create(
    spec: importers.StudySpec,
    *,
    owner: AbstractBaseUser | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Study:
    """Create a validated study: its inputs, outputs and items are written ``BULK`` inputs
    at a time, and no model instance is kept beyond its batch (``spec.inputs`` may read
    the file again as it goes)."""
    columns = {f.name for f in Study._meta.concrete_fields}
    kind_options = {k: v for k, v in spec.options.get("options", {}).items() if k not in columns}
    study = Study(**{**spec.options, "options": kind_options})
    study.full_clean()
    study.save()
    study_researcher_add(study, owner)
    Criterion.objects.bulk_create(
        Criterion(
            study=study,
            name=c.name,
            label=c.label,
            scale_min=c.scale_min,
            scale_max=c.scale_max,
            anchors=c.anchors,
            labels=c.labels,
            order=i,
        )
        for i, c in enumerate(spec.criteria)
    )
    systems = {
        s.name: s
        for s in System.objects.bulk_create(System(study=study, name=n) for n in spec.systems)
    }
    kind, kind_opts = study.kind_impl, study.kind_options()
    labelled = {a.input_id for a in spec.annotations}
    first_item: dict[str, int] = {}  # input id → its first item, for the imported labels
    stored, n_inputs = 0, len(spec.inputs)
    for batch in _batches(spec.inputs, BULK):
        inputs = Input.objects.bulk_create(
            Input(
                study=study,
                external_id=r.external_id,
                text=r.text,
                reference=r.reference,
                priority=r.priority,
                metadata=r.metadata,
            )
            for r in batch
        )
        outputs = Output.objects.bulk_create(
            Output(input=inp, system=systems[name], text=text, messages=record.messages.get(name))
            for inp, record in zip(inputs, batch, strict=True)
            for name, text in record.outputs.items()
        )
        by_input: dict[int, dict[str, Output]] = {}
        for out in outputs:
            by_input.setdefault(out.input_id, {})[out.system.name] = out
        expected = {
            inp.pk: importers.expected_of(kind, kind_opts, r)
            for inp, r in zip(inputs, batch, strict=True)
        }
        gold = {inp.pk for inp, r in zip(inputs, batch, strict=True) if r.is_gold}
        if study.collection != "all":  # adaptive: rounds release the items; gold from the start
            inputs = [inp for inp in inputs if inp.pk in gold]
        items = items_create_static(study, inputs, by_input, spec.systems, expected, gold)
        if labelled:
            external = {inp.pk: inp.external_id for inp in inputs}
            for item in items:
                first_item.setdefault(external[item.input_id], item.pk)
        stored += len(batch)
        if progress is not None:
            progress(stored, n_inputs)
        del batch, inputs, outputs, by_input, items
    if spec.annotations:
        _import_annotations(study, spec, first_item)
    study_created.send(sender=Study, study=study)
    return study


def items_create_static(
    study: Study,
    inputs: list[Input],
    outputs: dict[int, dict[str, Output]],
    system_order: list[str],
    expected: dict[int, dict] | None = None,
    gold: set[int] | frozenset[int] = frozenset(),
) -> list[Item]:
    """The items of each input, as the study's kind groups its outputs (pairwise: one per
    system pair; Likert: one per output); inputs in ``gold`` become gold checks (their
    outputs in the order of the file, which the known answer refers to)."""
    expected = expected or {}
    kind, opts = study.kind_impl, study.kind_options()
    rank = {name: i for i, name in enumerate(system_order)}
    groups: list[tuple[Input, list[Output]]] = []
    for inp in inputs:
        outs = sorted(outputs.get(inp.pk, {}).values(), key=lambda o: rank[o.system.name])
        groups_of = kind.item_groups(opts, len(outs), _RNG)
        if inp.pk in gold:
            outs = list(outputs[inp.pk].values())  # the order the gold answer refers to
            groups_of = kind.gold_groups(opts, len(outs))
        for group in groups_of:
            groups.append((inp, [outs[i] for i in group]))
    return items_create(study, groups, expected=expected, gold=gold)


def items_create(
    study: Study,
    groups: Sequence[tuple[Input, Sequence[Output]]],
    *,
    round_number: int | None = None,
    expected: Mapping[int, dict] | None = None,
    gold: set[int] | frozenset[int] = frozenset(),
) -> list[Item]:
    """One item per (input, outputs in system order), with its ``ItemOutput`` rows."""
    expected = expected or {}
    items = Item.objects.bulk_create(
        (
            Item(
                study=study,
                input=inp,
                round_number=round_number,
                redundancy=study.redundancy,
                expected=expected.get(inp.pk) or {},
                is_gold=inp.pk in gold,
            )
            for inp, _ in groups
        ),
        batch_size=BULK,
    )
    ItemOutput.objects.bulk_create(
        (
            ItemOutput(item=item, output=out, position=n)
            for item, (_, outs) in zip(items, groups, strict=True)
            for n, out in enumerate(outs)
        ),
        batch_size=BULK,
    )
    return items


def _import_annotations(study: Study, spec, first_item: dict[str, int]) -> None:
    """The labels of the imported file, each on the first item of its input."""
    keys = sorted({a.annotator_key for a in spec.annotations})
    annotators = {
        key: Annotator.objects.create(platform="import", external_id=f"{study.public_id}:{key}")
        for key in keys
    }
    now = timezone.now()
    kind, opts = study.kind_impl, study.kind_options()
    Annotation.objects.bulk_create(
        (
            Annotation(
                study=study,
                item_id=first_item[a.input_id],
                annotator=annotators[a.annotator_key],
                source=AnnotationSource.IMPORT,
                value=a.value,
                scores=a.scores,
                answer=kind.answer_from_summary(opts, a.value, a.scores),
                config_version=study.config_version,
                guideline_revision=study.guideline_revision,
                submitted_at=now,
            )
            for a in spec.annotations
        ),
        batch_size=BULK,
    )


def study_prepare_checks(
    study: Study,
    *,
    n_gold: int = 0,
    n_qualification: int = 0,
    seed: int | None = None,
    owner: AbstractBaseUser | None = None,
) -> QualificationTest | None:
    """Turn items whose answer is known (e.g. expert labels) into gold checks and a
    qualification test of the study's kind, asked with the study's kind options (written by
    ``owner``, who may then edit it). Items used for the test leave the work pool, so no
    worker sees a test question again as work; gold items are shown to workers at random."""
    rng = random.Random(seed)
    with transaction.atomic():
        known = [
            item
            for item in Item.objects.select_for_update()
            .filter(study=study, is_gold=False, is_active=True, n_taken=0)
            .exclude(expected={})
            .select_related("input")
            .prefetch_related("item_outputs__output")
        ]
        if not known:
            raise InvalidAnswer(
                "No unused work item has a known answer. Known answers come from a "
                "Judge-Bench file's 'majority_human'; a bundle's 'gold' inputs are gold "
                "checks from the start (docs/import-formats.md)."
            )
        if n_gold + n_qualification > len(known):
            raise InvalidAnswer(
                f"Only {len(known)} unused items have a known answer; "
                f"{n_gold + n_qualification} were asked for."
            )
        rng.shuffle(known)
        gold, questions = known[:n_gold], known[n_gold : n_gold + n_qualification]
        Item.objects.filter(pk__in=[i.pk for i in gold]).update(is_gold=True)
        if not questions:
            return None
        test = QualificationTest.objects.create(
            name=f"Qualification for {study.name}"[:200],
            kind=study.kind,
            options={  # the kind's options, with only the answer switches it takes
                k: v
                for k, v in study.kind_options().items()
                if k != "collection"
                and (k not in kinds.ANSWER_SWITCHES or k in study.kind_impl.answer_switches)
            },
            instructions=study.instructions,
            pass_threshold=max(1, round(0.9 * len(questions))),
            created_by=owner if owner is not None and owner.pk else None,
        )
        QualificationQuestion.objects.bulk_create(
            QualificationQuestion(
                test=test,
                prompt=i.input.text,
                conversation=(i.input.metadata or {}).get("conversation") or [],
                outputs=[o.text for o in i.output_list()],
                expected=i.expected,
                order=n,
            )
            for n, i in enumerate(questions)
        )
        Item.objects.filter(pk__in=[i.pk for i in questions]).update(is_active=False)
        study.qualification = test
        study.save(update_fields=["qualification"])
    return test


#: Study fields whose new value must reach what exists already (``study_configure``).
RECONFIGURED_FIELDS = ("redundancy", "items_per_worker", "budget")


def study_configure(
    study: Study, changed_fields: list[str] | tuple[str, ...], *, check_only: bool = False
) -> list[str]:
    """Save an edited study and carry the edit to what exists; returns what took effect.

    A change to what workers are asked bumps the config version. A new redundancy reaches
    the open items (a static study's active non-gold items; an adaptive study's open round
    and budget ledger, handled by the protocol through ``signals.study_reconfiguring``),
    never below an item's ``n_taken``: an item more workers already took keeps that many,
    and the notes say how many did. A new ``items_per_worker`` applies from each worker's
    next item. An edit that cannot take effect (an adaptive study's budget would be
    exceeded) raises :class:`~annotator.errors.ConfigRefused` and nothing is saved.
    ``check_only``: return the notes or raise, and write nothing.
    """
    with transaction.atomic():
        if study.pk is None:
            if not check_only:
                study.save()
            return []
        saved = (Study.objects if check_only else Study.objects.select_for_update()).get(
            pk=study.pk
        )
        notes = _reconfigure(saved, study, apply=not check_only)
        if check_only:
            return notes
        if set(changed_fields) & set(CONFIG_FIELDS):
            study.config_version = F("config_version") + 1
        study.save()
    study.refresh_from_db(fields=["config_version"])
    return notes


def study_configure_check(study: Study, changes: dict[str, Any]) -> list[str]:
    """What saving ``changes`` (field name → new value) to ``study`` would do, as
    :func:`study_configure` says it; raises :class:`~annotator.errors.ConfigRefused` when
    it would be refused. Writes nothing (a form's validation asks this)."""
    edited = Study.objects.get(pk=study.pk)
    fields = {f.name for f in Study._meta.concrete_fields}
    for name, value in changes.items():
        if name in fields:
            setattr(edited, name, value)
    return study_configure(edited, list(changes), check_only=True)


@dataclass(frozen=True)
class Resize:
    """What a new redundancy does to a set of items."""

    items: int  #: items it reaches
    clamped: int  #: of them, items more workers already took: they keep that many
    delta: int  #: annotations added to their quotas (negative: given up)


def items_resize(items: QuerySet[Item], redundancy: int, *, apply: bool) -> Resize:
    """Give ``items`` the redundancy ``redundancy``, never below an item's ``n_taken`` (so
    ``n_taken <= redundancy`` holds and no lease or label is lost); with ``apply`` false
    only count. Applying locks the items first, so the returned ``delta`` is exact."""
    if apply:
        list(items.select_for_update().order_by("pk").values_list("pk", flat=True))
    target = Greatest(Value(redundancy), F("n_taken"), output_field=IntegerField())
    found = items.aggregate(
        n=Count("pk"),
        clamped=Count("pk", filter=Q(n_taken__gt=redundancy)),
        delta=Sum(target - F("redundancy"), output_field=IntegerField()),
    )
    if apply:
        items.update(redundancy=target)
    return Resize(found["n"], found["clamped"], found["delta"] or 0)


def _reconfigure(saved: Study, edited: Study, *, apply: bool) -> list[str]:
    """The body of :func:`study_configure`: the edit carried to items and ledgers."""
    notes = []
    if edited.redundancy != saved.redundancy and edited.collection == "all":
        items = Item.objects.filter(study=saved, is_active=True, is_gold=False)
        resize = items_resize(items, edited.redundancy, apply=apply)
        notes.append(
            f"Redundancy {saved.redundancy} → {edited.redundancy}: {resize.items} open "
            f"items now take {edited.redundancy} annotations each "
            f"({resize.delta:+d} annotations to collect)."
        )
        if resize.clamped:
            notes.append(
                f"{resize.clamped} items keep more than {edited.redundancy}: more workers "
                "have already answered or hold them."
            )
    if edited.items_per_worker != saved.items_per_worker:
        notes.append(_items_per_worker_note(saved, edited.items_per_worker))
    for _, answer in study_reconfiguring.send(
        sender=Study, study=saved, edited=edited, apply=apply
    ):
        notes += answer or []
    return notes


def _items_per_worker_note(study: Study, cap: int | None) -> str:
    if cap is None:
        return "Workers may now annotate any number of items."
    reached = (
        Assignment.objects.filter(study=study, state=AssignmentState.SUBMITTED)
        .values("annotator")
        .annotate(n=Count("pk"))
        .filter(n__gte=cap)
        .count()
    )
    note = f"Each worker may now annotate up to {cap} items, from their next item on"
    if reached:
        note += f"; {reached} workers have done that many already and get no more"
    return note + "."


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


# --- workers and assignments --------------------------------------------------------------------
def annotator_enter(*, platform: str, external_id: str) -> Annotator:
    """The worker behind a platform id, created on first entry."""
    external_id = external_id.strip()
    if not external_id or len(external_id) > 200:
        raise InvalidAnswer("The link does not identify a worker.")
    annotator, _ = Annotator.objects.get_or_create(platform=platform, external_id=external_id)
    return annotator


def participation_enter(
    *, study: Study, platform: str, external_id: str, session: str = "", return_url: str = ""
) -> Participation:
    """Enter (or re-enter) a study from a recruiting platform; a returning worker resumes.

    In a study with a qualification test the worker starts with the test; attempts count
    per study and platform id (:func:`qualification_next`).
    """
    annotator = annotator_enter(platform=platform, external_id=external_id)
    with transaction.atomic():
        participation, created = Participation.objects.select_for_update().get_or_create(
            study=study,
            annotator=annotator,
            defaults={"platform_session": session[:200], "return_url": return_url[:300]},
        )
        if created and study.qualification_id:  # the test comes first (qualification_next)
            participation.status = Participation.Status.QUALIFYING
            participation.save(update_fields=["status"])
    return participation


def participations_sweep_unused(*, now: datetime | None = None) -> int:
    """Delete the participations that never led to work, entered more than
    ``HUMEVAL_ENTRY_SWEEP_MINUTES`` ago: no item ever leased, no test answered, no code
    given, neither blocked, failed nor stopped; then the workers left with nothing (not
    blocked, no label). A flood of entries costs rows for that long only; a worker whose
    entry was swept enters again from their link. Returns how many participations went."""
    now = now or timezone.now()
    cutoff = now - timedelta(minutes=settings.HUMEVAL_ENTRY_SWEEP_MINUTES)
    same_worker = {"study_id": OuterRef("study_id"), "annotator_id": OuterRef("annotator_id")}
    unused = Participation.objects.filter(
        started_at__lt=cutoff,
        status__in=[Participation.Status.ACTIVE, Participation.Status.QUALIFYING],
        code_given="",
    ).exclude(
        Exists(Assignment.objects.filter(**same_worker))
        | Exists(QualificationAttempt.objects.filter(**same_worker))
    )
    with transaction.atomic():
        per_model = unused.delete()[1]
        Annotator.objects.filter(
            created_at__lt=cutoff, is_blocked=False, participations__isnull=True
        ).exclude(
            Exists(Assignment.objects.filter(annotator_id=OuterRef("pk")))
            | Exists(Annotation.objects.filter(annotator_id=OuterRef("pk")))
            | Exists(QualificationAttempt.objects.filter(annotator_id=OuterRef("pk")))
        ).delete()
    return per_model.get(Participation._meta.label, 0)


def participation_claim(
    participation: Participation,
    *,
    secret: str = "",
    session: str = "",
    now: datetime | None = None,
) -> str:
    """Bind the participation to the browser presenting ``secret`` (from its cookie, or
    ``""``); returns the secret that browser must carry from now on.

    The browser holding the participation gets its own secret back. A participation no
    browser holds yet is bound to this one with a new secret. Another browser may take
    it over (a new secret; the old browser's cookie stops working) only once the holder
    has no live lease and nothing happened in the participation for ``lease_seconds``
    (its claim, a lease issued, an answer stored); before that it raises
    :class:`~annotator.errors.OpenInAnotherBrowser` and changes nothing. The status
    (a failed test, a block, a stop) stays with the platform id whichever browser holds it.

    A platform id can be learnt, its session cannot: an entry carrying a platform
    ``session`` (Prolific's ``SESSION_ID``, MTurk's ``assignmentId``) other than the one
    the participation holds takes it over at once while no label has been stored in it,
    so whoever used a worker's id first cannot keep the real worker out; the live lease
    goes with it (docs/crowd.md, "Who holds a participation").
    """
    now = now or timezone.now()
    session = session[:200]
    with transaction.atomic():
        part = (
            Participation.objects.select_for_update()
            .select_related("study")
            .get(pk=participation.pk)
        )
        if secret and part.held_by(secret):
            return secret
        if part.browser_key and _new_session_before_work(part, session):
            part.platform_session = session
            part.save(update_fields=["platform_session"])
        elif part.browser_key:
            available = _takeover_time(part, now)
            if available > now:
                raise OpenInAnotherBrowser(
                    "This study is open in another browser.", available_at=available
                )
        fresh = secrets.token_urlsafe(24)
        part.browser_key, part.browser_since = browser_key(fresh), now
        part.save(update_fields=["browser_key", "browser_since"])
    participation.browser_key, participation.browser_since = part.browser_key, now
    return fresh


def _new_session_before_work(part: Participation, session: str) -> bool:
    """Whether an entry with platform ``session`` may take ``part`` over at once: a
    session other than the participation's, and no label stored in it yet."""
    return (
        bool(session)
        and session != part.platform_session
        and not Annotation.objects.filter(
            study_id=part.study_id, annotator_id=part.annotator_id
        ).exists()
    )


def _takeover_time(part: Participation, now: datetime) -> datetime:
    """When another browser may take ``part`` over: ``lease_seconds`` after the last thing
    that happened in it, and never while a lease is live."""
    leases = Assignment.objects.filter(study_id=part.study_id, annotator_id=part.annotator_id)
    seen = leases.aggregate(
        issued=Max("issued_at"),
        closed=Max("closed_at"),
        live=Max("expires_at", filter=Q(state=AssignmentState.ISSUED)),
    )
    idle = timedelta(seconds=part.study.lease_seconds)
    moments = [m + idle for m in (part.browser_since, seen["issued"], seen["closed"]) if m]
    if seen["live"] is not None:
        moments.append(seen["live"])
    return max(moments, default=now)


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
        kind, opts = test.kind_impl, test.kind_options()
        try:
            answer = kind.parse_answer(
                opts, slot["display_order"], data, outputs=list(question.outputs)
            )
        except kinds.AnswerError as exc:
            raise InvalidAnswer(exc.message) from None
        correct = kind.gold_correct(opts, question.expected, answer)
        attempt.answers = [*attempt.answers, {**slot, "answer": answer, "correct": correct}]
        attempt.n_correct += int(correct)
        if len(attempt.answers) == len(attempt.order):
            _attempt_score(attempt, participation)
        else:
            attempt.save()
    return participation


def assignment_release_expired(*, study: Study | None = None, now: datetime | None = None) -> int:
    """Give expired leases back to the pool; returns how many were released."""
    now = now or timezone.now()
    with transaction.atomic():
        leases = Assignment.objects.select_for_update(skip_locked=True).filter(
            state=AssignmentState.ISSUED, expires_at__lte=now
        )
        if study is not None:
            leases = leases.filter(study=study)
        expired = list(leases.select_related("item").order_by("item_id"))
        for lease in expired:  # item-id order: concurrent releases lock alike
            _release(lease, now, AssignmentState.EXPIRED)
    return len(expired)


def assignment_reclaim_idle(*, participation: Participation, now: datetime | None = None) -> int:
    """Give back one **idle** lease of the study that the participation's worker could take
    in its place: the last items of a round go to a worker who has none once the page that
    held them has shown no sign of life for ``HUMEVAL_LEASE_IDLE_SECONDS`` (a heartbeat
    renews a lease while its task page is open, :func:`assignment_renew`). The lease is
    closed as expired, so its holder's later answer is refused as any answer after expiry
    (nothing is stored twice) and the slot is taken once. Returns how many were given back
    (0 or 1). Gold leases hold no slot and are never reclaimed."""
    now = now or timezone.now()
    study, worker_id = participation.study, participation.annotator_id
    cap = study.items_per_worker
    if not study.is_active or (cap is not None and _count_submitted(study.pk, worker_id) >= cap):
        return 0  # they could not take it: nothing is reclaimed for them
    idle_since = now - timedelta(seconds=settings.HUMEVAL_LEASE_IDLE_SECONDS)
    seen = Assignment.objects.filter(item=OuterRef("item_id"), annotator=worker_id)
    with transaction.atomic():
        lease = (
            Assignment.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(
                study_id=study.pk,
                state=AssignmentState.ISSUED,
                expires_at__gt=now,
                item__is_gold=False,
            )
            .filter(Q(seen_at__lte=idle_since) | Q(seen_at__isnull=True, issued_at__lte=idle_since))
            .exclude(Exists(seen))
            .select_related("item")
            .order_by("item_id")
            .first()
        )
        if lease is not None:
            _release(lease, now, AssignmentState.EXPIRED)
    return int(lease is not None)


def assignment_renew(
    *, participation: Participation, token: str | uuid.UUID, now: datetime | None = None
) -> Assignment:
    """The heartbeat of an open task page: mark the worker's own live lease as seen now, so
    it is not reclaimed as idle. Never extends ``expires_at`` (the study's ``lease_seconds``
    stays the longest a lease lasts). Someone else's or an unknown token raises
    :class:`AssignmentNotFound`; a lease already answered, returned or expired raises
    :class:`AssignmentExpired`; either changes nothing."""
    now = now or timezone.now()
    token = _token(token)
    mine = Assignment.objects.filter(
        token=token, study_id=participation.study_id, annotator_id=participation.annotator_id
    )
    with transaction.atomic():
        if mine.filter(state=AssignmentState.ISSUED, expires_at__gt=now).update(seen_at=now):
            return mine.get()
        if not mine.exists():
            raise AssignmentNotFound("This task does not exist or is not yours.")
    raise AssignmentExpired("This task is no longer yours: it was answered or its time ran out.")


#: Per study (``public_id``), in this process: a moment before which none of the study's
#: leases can expire or turn idle, so a worker who finds no item has no slot to free
#: (:func:`_free_slots`). The earliest expiry and idle time of the live leases when it was
#: read; a lease issued later expires and turns idle later still, a heartbeat only delays
#: it, so the moment is never late. (A lease time lowered meanwhile is caught up by the
#: periodic sweep.)
_NOTHING_FREES_BEFORE: dict[uuid.UUID, datetime] = {}


def _free_slots(participation: Participation, now: datetime) -> int:
    """For a worker who found no item: give expired leases back, and else one idle lease
    they could take; how many slots came free. Runs only once a lease can have expired or
    turned idle (one ``MIN`` over the study's live leases, remembered until that moment),
    not on every look of every waiting worker."""
    study = participation.study
    before = _NOTHING_FREES_BEFORE.get(study.public_id)
    if before is None or now >= before:
        before = _NOTHING_FREES_BEFORE[study.public_id] = _first_free_moment(study, now)
    if now < before:
        return 0
    _NOTHING_FREES_BEFORE.pop(study.public_id, None)  # whatever happens, look again
    return assignment_release_expired(study=study, now=now) or assignment_reclaim_idle(
        participation=participation, now=now
    )


def _first_free_moment(study: Study, now: datetime) -> datetime:
    """The earliest moment a live lease of ``study`` can expire or turn idle: of the leases
    there are, or of one issued ``now``."""
    idle = timedelta(seconds=settings.HUMEVAL_LEASE_IDLE_SECONDS)
    table = connection.ops.quote_name(Assignment._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT MIN(expires_at), MIN(COALESCE(seen_at, issued_at)) FROM {table}"  # noqa: S608
            " WHERE study_id = %s AND state = %s",
            [study.pk, AssignmentState.ISSUED.value],
        )
        expires, seen = (_moment(v) for v in cursor.fetchone())
    moments = [now + min(idle, timedelta(seconds=study.lease_seconds))]
    if expires is not None:
        moments.append(expires)
    if seen is not None:
        moments.append(seen + idle)
    return min(moments)


def _moment(value) -> datetime | None:
    """A datetime column read by an aggregate (SQLite returns its UTC text)."""
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


@dataclass(frozen=True)
class Task:
    """A worker's current assignment and how many items they have done in the study."""

    assignment: Assignment
    done: int
    #: The answer just posted was to a task already answered (a stale page: Back, a
    #: second tab); nothing was stored and this is the worker's current task.
    answered_before: bool = False


def assignment_next(
    *, participation: Participation, now: datetime | None = None, rng: random.Random | None = None
) -> Assignment | None:
    """The worker's current task, or a newly leased one, or ``None`` when nothing is left."""
    task = task_next(participation=participation, now=now, rng=rng)
    return task.assignment if task else None


def task_next(
    *, participation: Participation, now: datetime | None = None, rng: random.Random | None = None
) -> Task | None:
    """The worker's current task, or a newly leased one, or ``None`` when nothing is left;
    with the item's input and outputs loaded and the worker's count of done items.

    Atomic: the participation row is locked so one worker's parallel requests queue, and
    the item is taken with ``SELECT … FOR UPDATE SKIP LOCKED`` so parallel workers never
    take the last slot of an item twice (on SQLite the transaction itself is exclusive).
    An item is never leased twice to one worker (also a database constraint), nor above
    its redundancy (a check constraint on ``n_taken``). Gold checks are interleaved at
    random with the study's falling rate, never two in a row. Expired leases are given
    back by the periodic sweep and, when no item is free, here before a second look.
    """
    now = now or timezone.now()
    rng = rng or _RNG

    def lease() -> Task | None:
        with transaction.atomic():
            part = _lock_participation(participation.pk)
            _check_may_work(part)
            return _lease_locked(part, now, rng, holds_none=False)

    task = lease()
    if task is None and _free_slots(participation, now):
        task = lease()
    return task


def task_answer(
    *,
    participation: Participation,
    token: str | uuid.UUID,
    answer: str | None = None,
    scores: dict[str, Any] | None = None,
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
        _, created = _submit_locked(part, token, _data(answer, scores, data), time_spent_ms, now)
        blocked = _may_not_work(part)
        # a stored answer was the worker's one open lease, so they hold none now
        task = None if blocked else _lease_locked(part, now, rng, holds_none=created)
    if blocked:  # raised after the commit: the answer that got them blocked is kept
        raise WorkerBlocked(blocked)
    if task is None and _free_slots(participation, now):
        task = task_next(participation=participation, now=now, rng=rng)
    if task is not None and not created:
        task = replace(task, answered_before=True)
    return task


def _lock(participations) -> Participation | None:
    """Lock one participation row, or ``None``; with its study and worker read along."""
    return (
        participations.select_related("study", "annotator").select_for_update(of=("self",)).first()
    )


# The statements of the worker cycle are written out (see ``sqlrows``): they run on every
# request, and building them through the QuerySet API costs more than running them.
_PART, _STUDY, _WORKER = Columns(Participation, "p"), Columns(Study, "s"), Columns(Annotator, "w")
_ASSIGNMENT, _ITEM = Columns(Assignment, "asg"), Columns(Item, "i")
_INPUT, _OUTPUT = Columns(Input, "inp"), Columns(Output, "o")
_LINK = connection.ops.quote_name(ItemOutput._meta.db_table)
_ITEM_ID, _OUTPUT_ID = _ITEM.attnames.index("id"), _OUTPUT.attnames.index("id")


def _for_update(*tables: str) -> str:
    """`` FOR UPDATE OF …`` where the database has row locks (on SQLite the transaction,
    begun IMMEDIATE, is exclusive already)."""
    if not connection.features.has_select_for_update:
        return ""
    return " " + connection.ops.for_update_sql(
        of=tables if connection.features.has_select_for_update_of else ()
    )


def _lock_participation(pk: int, loaded: Participation | None = None) -> Participation:
    """Lock the participation row and read it afresh; with its study and worker read along,
    or taken from ``loaded``, the same participation read earlier in this request."""
    if loaded is not None:
        sql = f"SELECT {_PART.sql} FROM {_PART.table} WHERE p.id = %s"  # noqa: S608
    else:
        sql = (
            f"SELECT {_PART.sql}, {_STUDY.sql}, {_WORKER.sql} FROM {_PART.table}"  # noqa: S608
            f" JOIN {_STUDY.table} ON s.id = p.study_id"
            f" JOIN {_WORKER.table} ON w.id = p.annotator_id WHERE p.id = %s"
        )
    with connection.cursor() as cursor:
        cursor.execute(sql + _for_update("p"), [pk])
        row = cursor.fetchone()
    if row is None:
        raise Participation.DoesNotExist(pk)
    part = _PART.load(row)
    if loaded is not None:
        part.study, part.annotator = loaded.study, loaded.annotator
    else:
        part.study = _STUDY.load(row, len(_PART))
        part.annotator = _WORKER.load(row, len(_PART) + len(_STUDY))
    return part


def _shown_items(where: str, params: list, *, order: str = "", assignment: bool = False) -> list:
    """Items with what a worker is shown (the input and the outputs, in system order) in
    one statement (a row per output); with ``assignment``, the worker's assignments of
    them (``where`` on ``asg``); ``order``: the items' order (``ORDER BY`` terms)."""
    select = [_ITEM.sql, _INPUT.sql, _OUTPUT.sql]
    joins = (
        f" JOIN {_INPUT.table} ON inp.id = i.input_id"
        f" LEFT JOIN {_LINK} l ON l.item_id = i.id LEFT JOIN {_OUTPUT.table} ON o.id = l.output_id"
    )
    order = f" ORDER BY {order + ', ' if order else ''}i.id, l.position"
    if assignment:
        select.insert(0, _ASSIGNMENT.sql)
        sql = f"SELECT {', '.join(select)} FROM {_ASSIGNMENT.table} JOIN {_ITEM.table}"  # noqa: S608
        sql += f" ON i.id = asg.item_id{joins} WHERE {where}{order}"
    else:
        sql = f"SELECT {', '.join(select)} FROM {_ITEM.table}{joins} WHERE {where}{order}"  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    found: list = []
    item = None
    for row in rows:
        at = len(_ASSIGNMENT) if assignment else 0
        if item is None or item.pk != row[at + _ITEM_ID]:  # the first row of the next item
            item = _ITEM.load(row, at)
            item.input = _INPUT.load(row, at + len(_ITEM))
            item.shown_outputs = []
            if assignment:
                lease = _ASSIGNMENT.load(row)
                lease.item = item
                found.append(lease)
            else:
                found.append(item)
        at += len(_ITEM) + len(_INPUT)
        if row[at + _OUTPUT_ID] is not None:  # (an item without outputs: none)
            item.shown_outputs.append(_OUTPUT.load(row, at))
    return found


def _shown_item(pk: int) -> Item:
    return _shown_items("i.id = %s", [pk])[0]


def _lease_locked(
    part: Participation, now: datetime, rng: random.Random, *, holds_none: bool
) -> Task | None:
    """The lease step of :func:`task_next`, with ``part`` locked by the caller;
    ``holds_none``: the caller knows the worker holds no open lease."""
    study, worker = part.study, part.annotator
    done = _count_submitted(study.pk, worker.pk)
    if not holds_none:
        current = _shown_items(
            "asg.study_id = %s AND asg.annotator_id = %s AND asg.state = %s"
            " AND asg.expires_at > %s",
            [study.pk, worker.pk, AssignmentState.ISSUED.value, _when(now)],
            order="asg.id",
            assignment=True,
        )
        if current:
            return Task(current[0], done)
    if not study.is_active or (
        study.items_per_worker is not None and done >= study.items_per_worker
    ):
        return None
    item = None
    if not part.last_was_gold and rng.random() < study.gold_rate(done):
        seen = Assignment.objects.filter(item=OuterRef("pk"), annotator=worker)
        golds = list(
            Item.objects.filter(study=study, is_gold=True, is_active=True)
            .exclude(Exists(seen))
            .values_list("pk", flat=True)
        )
        if golds:
            item = _shown_item(rng.choice(golds))
    if item is None:
        taken = _take_item(study.pk, worker.pk)
        while taken is not None and prefill_skip.skipped(study, taken):  # judge-clean items
            taken = _take_item(study.pk, worker.pk)
        if taken is None:
            return None
        item = _shown_item(taken)
    if part.last_was_gold != item.is_gold:
        Participation.objects.filter(pk=part.pk).update(last_was_gold=item.is_gold)
        part.last_was_gold = item.is_gold
    assignment = insert(
        Assignment(
            study=study,
            item=item,
            annotator=worker,
            display_order=study.kind_impl.display_order(len(item.output_list()), _RNG),
            issued_at=now,
            expires_at=now + timedelta(seconds=study.lease_seconds),
            seen_at=now,
        )
    )
    return Task(assignment, done)


def _when(moment: datetime):
    return connection.ops.adapt_datetimefield_value(moment)


#: Every draw of the services (display orders, question orders, item groups). Injectable:
#: the tests replace it with a ``random.Random`` seeded per test (tests/conftest.py).
_RNG = random.SystemRandom()


def _may_not_work(participation: Participation) -> str:
    """Why the worker may not work in the study now, or ``""``."""
    if participation.annotator.is_blocked or participation.status == Participation.Status.BLOCKED:
        return "Your access to this study has been withdrawn."
    if participation.status == Participation.Status.FAILED:
        return "You did not pass the qualification test for this study."
    if participation.status == Participation.Status.QUALIFYING:
        return "Take the qualification test first."
    if participation.status == Participation.Status.STOPPED:
        return "You stopped this study."
    return ""


def _check_may_work(participation: Participation) -> None:
    if reason := _may_not_work(participation):
        raise WorkerBlocked(reason)


def annotation_submit(
    *,
    annotator: Annotator,
    token: str | uuid.UUID,
    answer: str | None = None,
    scores: dict[str, Any] | None = None,
    data: Mapping[str, Any] | None = None,
    time_spent_ms: int | None = None,
    now: datetime | None = None,
) -> tuple[Annotation, bool]:
    """Store the worker's answer to one assignment; ``(annotation, created)``.

    The answer is what the worker submitted, in display order: ``answer`` and ``scores``
    (pairwise, Likert) merged into ``data`` (any kind's fields); the study's kind parses it
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
        part = _lock(
            Participation.objects.filter(
                annotator=annotator,
                study_id=Subquery(Assignment.objects.filter(token=token).values("study_id")[:1]),
            )
        )
        if part is None:
            raise AssignmentNotFound("This task does not exist or is not yours.")
        return _submit_locked(part, token, _data(answer, scores, data), time_spent_ms, now)


def _data(
    answer: str | None, scores: Mapping[str, Any] | None, data: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The submitted fields as the kind reads them."""
    merged = dict(data or {})
    if answer is not None:
        merged["answer"] = answer
    if scores is not None:
        merged["scores"] = dict(scores)
    return merged


def _token(token: str | uuid.UUID) -> uuid.UUID:
    try:
        return uuid.UUID(str(token))
    except ValueError:
        raise AssignmentNotFound("This task does not exist or is not yours.") from None


def _submit_locked(
    part: Participation,
    token: uuid.UUID,
    data: Mapping[str, Any],
    time_spent_ms: int | None,
    now: datetime,
) -> tuple[Annotation, bool]:
    """The body of :func:`annotation_submit`, with ``part`` locked by the caller. The
    assignment and its item are read in one statement, with the item's outputs only when
    the kind's answer reads them (``Kind.answer_reads_outputs``)."""
    annotator, kind = part.annotator, part.study.kind_impl
    select, joins, order = f"{_ASSIGNMENT.sql}, {_ITEM.sql}", "", ""
    if kind.answer_reads_outputs:
        select += f", {_OUTPUT.sql}"
        joins = (
            f" LEFT JOIN {_LINK} l ON l.item_id = i.id"
            f" LEFT JOIN {_OUTPUT.table} ON o.id = l.output_id"
        )
        order = " ORDER BY l.position"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {select} FROM {_ASSIGNMENT.table}"  # noqa: S608
            f" JOIN {_ITEM.table} ON i.id = asg.item_id{joins}"
            f" WHERE asg.token = %s AND asg.annotator_id = %s AND asg.study_id = %s{order}"
            + _for_update("asg"),
            [db_value(Assignment, "token", token), annotator.pk, part.study_id],
        )
        rows = cursor.fetchall()
    assignment = None
    if rows:
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
        return assignment.annotation, False
    _check_may_work(part)
    if assignment.state != AssignmentState.ISSUED or assignment.expires_at <= now:
        raise AssignmentExpired(
            "The time for this task ran out and it was given to someone else; "
            "your answer was not stored. Continue with the next task."
        )
    study = part.study
    opts = span_prefill.answer_options(study, assignment.item, study.kind_options())
    outputs = [o.text for o in assignment.item.output_list()] if kind.answer_reads_outputs else ()
    try:
        answer = kind.parse_answer(opts, assignment.display_order, data, outputs=outputs)
    except kinds.AnswerError as exc:
        raise InvalidAnswer(exc.message) from None
    summary = kind.summary(opts, answer)
    elapsed_ms = int((now - assignment.issued_at).total_seconds() * 1000)
    if time_spent_ms is not None:
        time_spent_ms = max(0, min(int(time_spent_ms), elapsed_ms))
    annotation = insert(
        Annotation(
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
    )
    table = connection.ops.quote_name(Assignment._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET state = %s, closed_at = %s WHERE id = %s",  # noqa: S608
            [AssignmentState.SUBMITTED.value, _when(now), assignment.pk],
        )
    assignment.state, assignment.closed_at = AssignmentState.SUBMITTED, now
    if assignment.item.is_gold:
        _score_gold(part, assignment.item, annotation, now)
    else:
        _count_done(assignment.item)
    transaction.on_commit(lambda: _announce(annotation), robust=False)
    return annotation, True


def _count_submitted(study_id: int, worker_id: int) -> int:
    """How many items the worker has submitted in the study (written out: it runs on every
    request of the worker cycle, and building it through the ORM costs more than running it)."""
    table = connection.ops.quote_name(Assignment._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT COUNT(*) FROM {table} WHERE study_id = %s AND annotator_id = %s"  # noqa: S608
            " AND state = %s",
            [study_id, worker_id, AssignmentState.SUBMITTED.value],
        )
        return cursor.fetchone()[0]


def _take_item(study_id: int, worker_id: int) -> int | None:
    """Take a slot of the fullest open item the worker has not seen (fill-first, then by
    id); its id, or ``None``. One statement: the item is chosen with ``FOR UPDATE SKIP
    LOCKED`` (where the database has it) and its ``n_taken`` raised, so parallel workers
    never take the last slot twice; the check constraint backs this up. (Written out: the
    ORM cannot update through a locking subquery, and this is the hottest query.)"""
    item, assignment = (connection.ops.quote_name(m._meta.db_table) for m in (Item, Assignment))
    lock = ""
    if connection.features.has_select_for_update_skip_locked:
        lock = " " + connection.ops.for_update_sql(skip_locked=True)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {item} SET n_taken = n_taken + 1 WHERE id = ("  # noqa: S608
            f"SELECT i.id FROM {item} i WHERE i.study_id = %s AND i.is_active AND NOT i.is_gold"
            " AND i.n_taken < i.redundancy AND NOT EXISTS ("
            f"SELECT 1 FROM {assignment} a WHERE a.item_id = i.id AND a.annotator_id = %s)"
            f" ORDER BY i.n_taken DESC, i.id LIMIT 1{lock}) RETURNING id",
            [study_id, worker_id],
        )
        row = cursor.fetchone()
    return row[0] if row else None


def _count_done(item: Item) -> None:
    """One more annotation on ``item``; its ``n_done`` afterwards is exact (read back in the
    same statement), so whoever completes an item knows it without locking the row."""
    table = connection.ops.quote_name(Item._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET n_done = n_done + 1 WHERE id = %s RETURNING n_done",  # noqa: S608
            [item.pk],
        )
        (item.n_done,) = cursor.fetchone()


def _score_gold(part: Participation, item: Item, annotation: Annotation, now: datetime) -> None:
    """A gold answer: count it; a miss is a strike; too many strikes block the worker, give
    their open work back and flag all their labels in the study."""
    study = part.study
    correct = study.kind_impl.gold_correct(study.kind_options(), item.expected, annotation.answer)
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


def _release(lease: Assignment, now: datetime, state: str) -> None:
    Assignment.objects.filter(pk=lease.pk).update(state=state, closed_at=now)
    if not lease.item.is_gold:
        Item.objects.filter(pk=lease.item_id).update(n_taken=F("n_taken") - 1)


def participation_set_blocked(participation: Participation, blocked: bool) -> Participation:
    """Block a worker by hand (their labels flagged, open work given back) or unblock them
    (labels unflagged; strikes kept)."""
    now = timezone.now()
    with transaction.atomic():
        part = Participation.objects.select_for_update().get(pk=participation.pk)
        labels = Annotation.objects.filter(study_id=part.study_id, annotator_id=part.annotator_id)
        if blocked:
            part.status, part.finished_at = Participation.Status.BLOCKED, now
            labels.update(is_flagged=True)
            leases = Assignment.objects.filter(
                study_id=part.study_id,
                annotator_id=part.annotator_id,
                state=AssignmentState.ISSUED,
            )
            for lease in leases.select_for_update().select_related("item").order_by("item_id"):
                _release(lease, now, AssignmentState.RETURNED)
        elif part.status == Participation.Status.BLOCKED:
            part.status, part.finished_at = Participation.Status.ACTIVE, None
            labels.update(is_flagged=False)
        part.save(update_fields=["status", "finished_at"])
    return part


def participation_review(participation: Participation, approved: bool) -> Participation:
    participation.review = (
        Participation.Review.APPROVED if approved else Participation.Review.REJECTED
    )
    participation.save(update_fields=["review"])
    return participation


def participation_finish(participation: Participation, *, now: datetime | None = None) -> dict:
    """The end page: how the worker's visit stands (see
    :func:`~annotator.selectors.participation_outcome`). When a code is due, the worker is
    marked finished and the code they were given is recorded; a worker with work left is
    told so and nothing changes. Expired leases are released first, so a lease left
    behind by someone else does not count as work still to come."""
    now = now or timezone.now()
    assignment_release_expired(study=participation.study, now=now)
    outcome = selectors.participation_outcome(participation, now=now)
    if outcome["code_due"]:
        with transaction.atomic():
            part = Participation.objects.select_for_update().get(pk=participation.pk)
            leases = Assignment.objects.filter(  # a finished worker holds no item back
                study_id=part.study_id,
                annotator_id=part.annotator_id,
                state=AssignmentState.ISSUED,
            )
            for lease in leases.select_for_update().select_related("item").order_by("item_id"):
                _release(lease, now, AssignmentState.RETURNED)
            fields = ["code_given"]
            part.code_given = outcome["code"]
            if part.status == Participation.Status.ACTIVE:
                part.status, part.finished_at = Participation.Status.FINISHED, now
                fields += ["status", "finished_at"]
            part.save(update_fields=fields)
        participation.status, participation.code_given = part.status, part.code_given
    return outcome


def participation_stop(participation: Participation, *, now: datetime | None = None) -> None:
    """The worker stops before their work is done: their open lease goes back to the pool
    and they get no code (on Prolific they return the submission). Final: the stopped
    worker is given no more work in the study. A failed or blocked worker stays so."""
    now = now or timezone.now()
    with transaction.atomic():
        part = Participation.objects.select_for_update().get(pk=participation.pk)
        if part.status in (Participation.Status.FAILED, Participation.Status.BLOCKED):
            return
        leases = Assignment.objects.filter(
            study_id=part.study_id, annotator_id=part.annotator_id, state=AssignmentState.ISSUED
        )
        for lease in leases.select_for_update().select_related("item").order_by("item_id"):
            _release(lease, now, AssignmentState.RETURNED)
        part.status, part.finished_at = Participation.Status.STOPPED, now
        part.save(update_fields=["status", "finished_at"])
    participation.status = part.status


def _announce(annotation: Annotation) -> None:
    for receiver, result in annotation_submitted.send_robust(
        sender=Annotation, annotation=annotation
    ):
        if isinstance(result, Exception):
            log.error("annotation_submitted receiver %r failed: %r", receiver, result)
