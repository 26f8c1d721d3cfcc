"""Study writes: import, create, items, checks, configure and resize."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import (
    Count,
    F,
    IntegerField,
    Q,
    QuerySet,
    Sum,
    Value,
)
from django.db.models.functions import Greatest
from django.utils import timezone

from .. import importers
from ..choices import AnnotationSource, AssignmentState
from ..collection import collection_for
from ..errors import (
    ImportRejected,
    InvalidAnswer,
)
from ..models import (
    CONFIG_FIELDS,
    Annotation,
    Annotator,
    Assignment,
    Input,
    Item,
    ItemOutput,
    Output,
    QualificationQuestion,
    QualificationTest,
    Study,
    System,
)
from ..signals import study_created
from .leasing import _RNG

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
    systems = {
        s.name: s
        for s in System.objects.bulk_create(System(study=study, name=n) for n in spec.systems)
    }
    kind = study.bound_kind()
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
            inp.pk: importers.expected_of(kind, r) for inp, r in zip(inputs, batch, strict=True)
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
    kind = study.bound_kind()
    rank = {name: i for i, name in enumerate(system_order)}
    groups: list[tuple[int, list[int]]] = []
    for inp in inputs:
        outs = sorted(outputs.get(inp.pk, {}).values(), key=lambda o: rank[o.system.name])
        groups_of = kind.item_groups(len(outs), _RNG)
        if inp.pk in gold:
            outs = list(outputs[inp.pk].values())  # the order the gold answer refers to
            groups_of = kind.gold_groups(len(outs))
        for group in groups_of:
            groups.append((inp.pk, [outs[i].pk for i in group]))
    return items_create(study, groups, expected=expected, gold=gold)


def items_create(
    study: Study,
    groups: Sequence[tuple[int, Sequence[int]]],
    *,
    round_number: int | None = None,
    expected: Mapping[int, dict] | None = None,
    gold: set[int] | frozenset[int] = frozenset(),
) -> list[Item]:
    """One item per ``(input id, output ids in system order)``, with its ``ItemOutput``
    rows."""
    expected = expected or {}
    items = Item.objects.bulk_create(
        (
            Item(
                study_id=study.pk,
                input_id=input_id,
                round_number=round_number,
                redundancy=study.redundancy,
                expected=expected.get(input_id) or {},
                is_gold=input_id in gold,
            )
            for input_id, _ in groups
        ),
        batch_size=BULK,
    )
    ItemOutput.objects.bulk_create(
        (
            ItemOutput(item_id=item.pk, output_id=output_id, position=n)
            for item, (_, output_ids) in zip(items, groups, strict=True)
            for n, output_id in enumerate(output_ids)
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
    kind = study.bound_kind()
    Annotation.objects.bulk_create(
        (
            Annotation(
                study=study,
                item_id=first_item[a.input_id],
                annotator=annotators[a.annotator_key],
                source=AnnotationSource.IMPORT,
                value=a.value,
                scores=a.scores,
                answer=kind.answer_from_summary(a.value, a.scores),
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
            options=dict(study.options or {}),  # asked as the study asks
            instructions=study.instructions,
            pass_threshold=max(1, round(0.9 * len(questions))),
            created_by=owner if owner is not None and owner.pk else None,
        )
        QualificationQuestion.objects.bulk_create(
            QualificationQuestion(
                test=test,
                prompt=i.input.text,
                conversation=i.input.conversation or [],
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
    and budget ledger, handled by the protocol's collection: ``Collection.reconfigure``),
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


def static_reconfigure(saved: Study, edited: Study, *, apply: bool) -> list[str]:
    """A study with every item at once: a new redundancy reaches its active items."""
    if edited.redundancy == saved.redundancy:
        return []
    items = Item.objects.filter(study=saved, is_active=True, is_gold=False)
    resize = items_resize(items, edited.redundancy, apply=apply)
    notes = [
        f"Redundancy {saved.redundancy} → {edited.redundancy}: {resize.items} open "
        f"items now take {edited.redundancy} annotations each "
        f"({resize.delta:+d} annotations to collect)."
    ]
    if resize.clamped:
        notes.append(
            f"{resize.clamped} items keep more than {edited.redundancy}: more workers "
            "have already answered or hold them."
        )
    return notes


def _reconfigure(saved: Study, edited: Study, *, apply: bool) -> list[str]:
    """The body of :func:`study_configure`: the edit carried to items and ledgers, by the
    edited study's collection (:meth:`annotator.collection.Collection.reconfigure`)."""
    notes = collection_for(edited).reconfigure(saved, edited, apply=apply)
    if edited.items_per_worker != saved.items_per_worker:
        notes.append(_items_per_worker_note(saved, edited.items_per_worker))
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
