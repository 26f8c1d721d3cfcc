"""The written-out statements of the worker cycle read and write exactly what the ORM does.

``check_*`` are also run on PostgreSQL by ``tests/integration/test_sqlrows_postgres.py``.
"""

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from annotator import selectors, services
from annotator.models import (
    Annotation,
    Annotator,
    Assignment,
    Input,
    Item,
    Output,
    Participation,
    Study,
)
from annotator.sqlrows import Columns, db_value, insert
from tests.conftest import bundle


def _fields(obj) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields}


def _kind(value) -> type:
    return str if isinstance(value, str) else type(value)  # a TextChoices member is a str


def _same(loaded, orm) -> None:
    assert type(loaded) is type(orm)
    a, b = _fields(loaded), _fields(orm)
    assert a == b
    assert {k: _kind(v) for k, v in a.items()} == {k: _kind(v) for k, v in b.items()}
    assert not loaded._state.adding and loaded._state.db == orm._state.db


def _study() -> Study:
    records = [
        {
            "id": "in0",
            "input": "Ünïcode *input* <b>bold</b>",
            "reference": "ref",
            "metadata": {"conversation": [{"role": "user", "content": "hi"}], "n": 1.5},
            "outputs": {"a": "first", "b": "second"},
        }
    ]
    study = services.study_import(
        bundle(records, {"name": "rows", "kind": "pairwise", "redundancy": 2}),
        filename="rows.jsonl",
        overrides={"open_links": True, "gold_rate_start": 0.0, "gold_rate_end": 0.0},
    )
    return study


def check_every_model_of_the_cycle_loads_as_the_orm_does() -> None:
    study = _study()
    part = services.participation_enter(study=study, platform="link", external_id="w1")
    task = services.task_next(participation=part)
    services.task_answer(participation=part, token=task.assignment.token, data={"answer": "left"})
    objects = [
        Study.objects.get(pk=study.pk),
        Participation.objects.get(pk=part.pk),
        Annotator.objects.get(pk=part.annotator_id),
        Assignment.objects.get(pk=task.assignment.pk),
        Item.objects.get(pk=task.assignment.item_id),
        Input.objects.get(pk=task.assignment.item.input_id),
        Output.objects.get(pk=task.assignment.item.output_list()[0].pk),
        Annotation.objects.get(assignment=task.assignment),
    ]
    for orm in objects:
        cols = Columns(type(orm), "t")
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {cols.sql} FROM {cols.table} WHERE t.id = %s", [orm.pk])
            row = cursor.fetchone()
        _same(cols.load(("before", *row), 1), orm)


def check_the_cycle_services_return_what_the_orm_reads() -> None:
    study = _study()
    part = selectors.worker_participation(
        services.participation_enter(study=study, platform="link", external_id="w2").pk,
        study.public_id,
    )
    _same(part, Participation.objects.get(pk=part.pk))
    _same(part.study, Study.objects.get(pk=study.pk))
    _same(part.annotator, Annotator.objects.get(pk=part.annotator_id))
    task = services.task_next(participation=part)
    again = services.task_next(participation=part)  # the same lease, read back with its item
    for lease in (task.assignment, again.assignment):
        _same(lease, Assignment.objects.get(pk=task.assignment.pk))
        orm_item = (
            Item.objects.select_related("input")
            .prefetch_related("item_outputs__output")
            .get(pk=lease.item_id)
        )
        _same(lease.item, orm_item)
        _same(lease.item.input, orm_item.input)
        shown, orm_outputs = lease.item.output_list(), orm_item.output_list()
        assert len(shown) == len(orm_outputs) == 2
        for out, orm_out in zip(shown, orm_outputs, strict=True):
            _same(out, orm_out)
    assert task.assignment.item.input.metadata["n"] == 1.5


def check_insert_stores_what_save_stores() -> None:
    study = _study()
    part = services.participation_enter(study=study, platform="link", external_id="w3")
    item = Item.objects.filter(study=study).first()
    now = timezone.now()
    with transaction.atomic():
        lease = insert(
            Assignment(
                study=study,
                item=item,
                annotator=part.annotator,
                display_order=[1, 0],
                issued_at=now,
                expires_at=now + timedelta(seconds=60),
            )
        )
        label = insert(
            Annotation(
                study=study,
                item=item,
                annotator=part.annotator,
                assignment=lease,
                raw_answer="tie",
                value="tie",
                scores={"x": [1, "ü"]},
                time_spent_ms=5,
                config_version=1,
                submitted_at=now,
            )
        )
    assert lease.pk and label.pk and not lease._state.adding
    _same(lease, Assignment.objects.get(pk=lease.pk))
    _same(label, Annotation.objects.get(pk=label.pk))
    token = db_value(Assignment, "token", lease.token)
    assert Assignment.objects.filter(token=lease.token).count() == 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM annotator_assignment WHERE token = %s", [token])
        assert cursor.fetchone()[0] == lease.pk


def check_an_answer_is_stored_as_the_orm_reads_it() -> None:
    """The annotation, its closed lease and its item's count (one statement on PostgreSQL):
    what the service returns is what the database holds; a gold item keeps no count."""
    study = _study()  # one item, redundancy 2
    for name, gold in (("w5", False), ("w6", True)):
        part = services.participation_enter(study=study, platform="link", external_id=name)
        lease = services.task_next(participation=part).assignment
        if gold:
            Item.objects.filter(pk=lease.item_id).update(is_gold=True, expected={"value": "A"})
        label, created = services.annotation_submit(
            annotator=part.annotator, token=lease.token, data={"answer": "left"}
        )
        assert created and label.assignment.state == "submitted"
        _same(label, Annotation.objects.get(pk=label.pk))
        _same(label.assignment, Assignment.objects.get(pk=lease.pk))
        _same(label.item, Item.objects.get(pk=lease.item_id))
        assert label.item.n_done == 1  # the first worker's answer only
        again, created = services.annotation_submit(
            annotator=part.annotator, token=lease.token, data={"answer": "right"}
        )
        assert not created and again.pk == label.pk
    assert Participation.objects.get(pk=part.pk).gold_seen == 1


def check_a_participation_of_another_study_is_not_found() -> None:
    study, other = _study(), _study()
    part = services.participation_enter(study=study, platform="link", external_id="w4")
    assert selectors.worker_participation(part.pk, other.public_id) is None
    assert selectors.worker_participation(part.pk + 1000, study.public_id) is None


CHECKS = [
    check_every_model_of_the_cycle_loads_as_the_orm_does,
    check_the_cycle_services_return_what_the_orm_reads,
    check_insert_stores_what_save_stores,
    check_an_answer_is_stored_as_the_orm_reads_it,
    check_a_participation_of_another_study_is_not_found,
]


@pytest.mark.django_db
@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_written_out_statements_match_the_orm(check):
    check()
