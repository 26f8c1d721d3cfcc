"""The written-out statements of the worker cycle on PostgreSQL (the same checks as on
SQLite in ``tests/unit/test_sqlrows.py``)."""

import pytest
from django.db import connection

from tests.unit.test_sqlrows import CHECKS


@pytest.mark.django_db
@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_written_out_statements_match_the_orm_on_postgresql(check):
    assert connection.vendor == "postgresql"
    check()
