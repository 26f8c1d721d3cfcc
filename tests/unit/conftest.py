"""Unit tests run in parallel (pytest-xdist, ``./run test``): nothing here may be shared
between worker processes. Each has its own in-memory SQLite database (Django's default
for SQLite tests), its own cache (local memory) and, set here, its own job directory."""

import pytest


def pytest_configure(config):
    """WhiteNoise looks static files up when asked instead of listing them all when the
    middleware loads: Django's test client loads the middleware anew for every client (a
    server loads it once), and the listing took 19 ms each time, 12 s of CPU per run. The
    browser tests' live servers keep the listing, as production does."""
    from django.conf import settings

    settings.WHITENOISE_AUTOREFRESH = True


#: The files of the longest tests (simulations of whole studies, Hypothesis state machines).
LONG = ("tests/unit/protocol/", "tests/unit/test_properties.py", "tests/unit/test_security.py")


def pytest_collection_modifyitems(items):
    """The longest tests first: collected last, one of them kept a process busy for seconds
    after the other had run out of work (pytest-xdist steals work, not a test halfway)."""
    items.sort(key=lambda item: not any(part in item.path.as_posix() for part in LONG))


@pytest.fixture(scope="session", autouse=True)
def _own_job_directory(tmp_path_factory):
    """Job files (uploads waiting for import, finished exports) in a directory of this
    process: two workers' job 1 are different jobs."""
    from django.conf import settings

    before = settings.HUMEVAL_JOB_DIR
    settings.HUMEVAL_JOB_DIR = tmp_path_factory.mktemp("jobs")
    yield
    settings.HUMEVAL_JOB_DIR = before


@pytest.fixture(scope="session")
def django_db_use_migrations() -> bool:
    """Each process builds its database from the models, not by running the 67 migrations
    (6 s of CPU per process). The migrations themselves are tested where they run: the
    ``migrate`` fixture below, ``makemigrations --check`` in ``./run test``, and its last
    phase, whose PostgreSQL database is migrated."""
    return False


@pytest.fixture
def migrate(settings):
    """``migrate(targets)``: this test's database migrated to ``targets`` (as
    ``MigrationExecutor.migrate``), returning the models as they were there; the newest state
    again after the test. The real migrations are switched back on for the test, every one
    recorded as applied to the schema built from the models."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    settings.MIGRATION_MODULES = {}
    executor = MigrationExecutor(connection)
    applied = executor.recorder.applied_migrations()
    for key in executor.loader.graph.nodes:
        if key not in applied:
            executor.recorder.record_applied(*key)

    def to(targets: list[tuple[str, str]]):
        executor = MigrationExecutor(connection)
        executor.migrate(targets)
        return executor.loader.project_state(targets).apps

    yield to
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
