"""A worker page that meets a dropped database connection runs again once on a fresh one
(``annotator/resilience.py``); the PostgreSQL restart itself is in
``tests/integration/test_faults.py``."""

import pytest
from django.db import InterfaceError, OperationalError
from django.test import Client

from annotator import services
from annotator.models import Annotation, Assignment

pytestmark = pytest.mark.django_db(transaction=True)


def entered(study) -> tuple[Client, str]:
    worker = Client()
    worker.get(f"/w/{study.public_id}/?worker=w1")
    worker.get(f"/w/{study.public_id}/task/")
    return worker, str(Assignment.objects.get(annotator__external_id="w1").token)


def test_a_submit_whose_commit_went_through_before_the_connection_dropped_is_stored_once(
    make_study, monkeypatch
):
    study = make_study()
    worker, token = entered(study)
    real, calls = services.task_answer, []

    def commit_then_drop(**kwargs):
        calls.append(1)
        result = real(**kwargs)
        if len(calls) == 1:
            raise InterfaceError("connection already closed")  # the answer was committed
        return result

    monkeypatch.setattr(services, "task_answer", commit_then_drop)
    response = worker.post(f"/w/{study.public_id}/task/", {"token": token, "answer": "left"})
    assert response.status_code == 200 and len(calls) == 2
    assert Annotation.objects.filter(assignment__token=token).count() == 1


def test_a_statement_error_on_a_live_connection_is_not_run_again(make_study, monkeypatch):
    study = make_study()
    worker, token = entered(study)
    calls = []

    def deadlock(**kwargs):
        calls.append(1)
        raise OperationalError("deadlock detected")  # the connection itself is fine

    monkeypatch.setattr(services, "task_answer", deadlock)
    worker.raise_request_exception = False
    response = worker.post(f"/w/{study.public_id}/task/", {"token": token, "answer": "left"})
    assert response.status_code == 500 and len(calls) == 1


def test_a_database_that_stays_away_gets_a_page_asking_to_try_again(
    make_study, monkeypatch, settings
):
    from django.db import connection

    settings.HUMEVAL_DB_RETRY_SECONDS = 0.3
    study = make_study()
    worker, token = entered(study)

    def refuse():
        raise OperationalError("connection refused")

    def gone(**kwargs):  # the connection drops, and the database refuses new ones
        monkeypatch.setattr(connection, "ensure_connection", refuse)
        raise InterfaceError("connection already closed")

    monkeypatch.setattr(services, "task_answer", gone)
    response = worker.post(f"/w/{study.public_id}/task/", {"token": token, "answer": "left"})
    monkeypatch.undo()
    assert response.status_code == 503 and response["Retry-After"] == "5"
    assert b"Nothing was lost" in response.content
    assert not Annotation.objects.exists()
