import pytest

from tests.services import CeleryWorker, require_postgres_and_redis


@pytest.fixture(scope="session", autouse=True)
def _services(django_db_setup, django_db_blocker):
    require_postgres_and_redis()


@pytest.fixture(scope="session")
def _shared_celery_worker(django_db_setup, tmp_path_factory):
    from django.db import connection

    log = tmp_path_factory.mktemp("celery") / "celery.log"
    worker = CeleryWorker(connection.settings_dict["NAME"], log)
    worker.start()
    yield worker
    worker.stop()


@pytest.fixture
def celery_worker(_shared_celery_worker):
    """The session's one Celery worker on every queue, for tests that only need one running
    (a start costs seconds); started again if a test left it dead. A test that stops, kills
    or configures its worker makes its own ``CeleryWorker``."""
    if _shared_celery_worker.proc.poll() is not None:
        _shared_celery_worker.start()
    return _shared_celery_worker
