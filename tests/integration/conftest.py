import pytest

from tests.services import CeleryWorker, require_postgres_and_redis


@pytest.fixture(scope="session", autouse=True)
def _services(django_db_setup, django_db_blocker):
    require_postgres_and_redis()


@pytest.fixture
def celery_worker(django_db_setup, tmp_path):
    from django.db import connection

    worker = CeleryWorker(connection.settings_dict["NAME"], tmp_path / "celery.log")
    worker.start()
    yield worker
    worker.stop()
