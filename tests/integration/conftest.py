import pytest

from tests.services import (
    CeleryWorker,
    fast_flush_between_tests,  # noqa: F401 (a session fixture)
    require_postgres_and_redis,
)


@pytest.fixture(scope="session", autouse=True)
def _services(django_db_setup, django_db_blocker):
    require_postgres_and_redis()


_SHARED: dict[str, CeleryWorker] = {}


@pytest.fixture(scope="session")
def _shared_celery_worker(django_db_setup, tmp_path_factory):
    from django.db import connection

    log = tmp_path_factory.mktemp("celery") / "celery.log"
    worker = _SHARED["worker"] = CeleryWorker(connection.settings_dict["NAME"], log)
    yield worker
    worker.stop()


@pytest.fixture
def celery_worker(_shared_celery_worker):
    """The session's one Celery worker on every queue, for tests that only need one running:
    consecutive tests share it (a start costs seconds). A test that stops, kills or
    configures its worker makes its own ``CeleryWorker``."""
    if _shared_celery_worker.proc is None or _shared_celery_worker.proc.poll() is not None:
        _shared_celery_worker.start()
    return _shared_celery_worker


@pytest.fixture(autouse=True)
def _no_shared_worker_unless_asked(request):
    """A test that does not ask for ``celery_worker`` runs with the shared one stopped (it
    may need no worker at all, e.g. a decision waiting in Redis)."""
    worker = _SHARED.get("worker")
    if "celery_worker" not in request.fixturenames and worker and worker.proc:
        worker.stop()


@pytest.fixture
def job_worker(tmp_path, settings):
    """A Celery worker of the test's own that shares its job directory (``tmp_path/jobs``,
    also ``settings.HUMEVAL_JOB_DIR``), stopped when the test ends; its log stays readable."""
    from django.db import connection

    jobs = tmp_path / "jobs"
    settings.HUMEVAL_JOB_DIR = jobs
    worker = CeleryWorker(
        connection.settings_dict["NAME"],
        tmp_path / "celery.log",
        env={"HUMEVAL_JOB_DIR": str(jobs)},
    )
    worker.start()
    yield worker
    worker.stop()
