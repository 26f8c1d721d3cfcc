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


@pytest.fixture(scope="session", autouse=True)
def _own_job_directory(tmp_path_factory):
    """Job files (uploads waiting for import, finished exports) in a directory of this
    process: two workers' job 1 are different jobs."""
    from django.conf import settings

    before = settings.HUMEVAL_JOB_DIR
    settings.HUMEVAL_JOB_DIR = tmp_path_factory.mktemp("jobs")
    yield
    settings.HUMEVAL_JOB_DIR = before
