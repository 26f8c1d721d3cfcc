"""The written-out statements of the worker cycle on PostgreSQL (the same checks as on
SQLite in ``tests/unit/test_sqlrows.py`` and ``tests/unit/test_cycle_statements.py``)."""

import pytest
from django.db import connection

from tests.unit import test_cycle_statements as cycle
from tests.unit.test_sqlrows import CHECKS


@pytest.mark.django_db
@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_written_out_statements_match_the_orm_on_postgresql(check):
    assert connection.vendor == "postgresql"
    check()


@pytest.mark.parametrize("kind", list(cycle.KINDS))
def test_one_answer_cycle_runs_the_same_few_statements_on_postgresql(kind, transactional_db):
    assert connection.vendor == "postgresql"
    cycle.test_one_answer_cycle_runs_the_same_few_statements_for_every_kind(kind, transactional_db)


@pytest.mark.django_db
def test_whether_a_round_is_complete_is_read_from_its_newest_items_not_the_study():
    """A study of 20 rounds of 300 items, round 20 collecting: the check that runs each time
    an item is finished reads the round's index backwards, never every item of the study."""
    from django.test.utils import CaptureQueriesContext

    from annotator import services
    from annotator.models import Input, Item
    from protocol.models import Round
    from protocol.services import round_close_if_complete
    from tests.protocol_sim import adaptive_bundle

    study = services.study_import(adaptive_bundle(n_inputs=40), filename="a.jsonl")
    inputs = list(Input.objects.filter(study=study).values_list("pk", flat=True))
    Item.objects.filter(study=study).delete()
    Item.objects.bulk_create(
        Item(study=study, input_id=inputs[n % len(inputs)], round_number=1 + n // 300,
             redundancy=3, n_taken=3 if n < 5900 else 0, n_done=3 if n < 5900 else 0)
        for n in range(6000)
    )  # fmt: skip
    Round.objects.filter(study=study).update(number=20)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE annotator_item")
    with CaptureQueriesContext(connection) as queries:
        assert not round_close_if_complete(study.pk, 20)
    (statement,) = [q["sql"] for q in queries.captured_queries]
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {statement}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Index Scan Backward using item_round_idx" in plan, plan
    assert "Seq Scan on annotator_item" not in plan, plan
