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
