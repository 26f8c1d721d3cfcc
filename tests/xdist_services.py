"""Integration and browser tests in parallel (pytest-xdist, ``./run test``): each xdist
worker process gets its own services, set here before Django reads its settings (loaded
with ``-p tests.xdist_services``, so it runs before pytest-django configures Django).

- PostgreSQL: pytest-django already names each worker's test database (``test_humeval_gw0``
  …), and the Celery workers a test starts use that database.
- Redis: the Celery broker is database ``4 + n`` for worker ``gwn`` (0 is the broker of a
  run without xdist, 3 holds the throttle's counters): one worker's Celery processes never
  take another's tasks.
- The job directory (uploads and exports, named by job id) is the worker's own: two
  workers' job 1 are different jobs.
- Live servers, gunicorn and nginx already bind free ports.

Tests that cannot share are kept apart by marks: ``xdist_group`` runs a group's tests in one
worker, one test after another (the Redis throttle tests share database 3; the schemathesis
fuzz builds its data once and checks what it saw at the end; ``tests/unit/test_xdist_groups.py``
checks groups hold); every other test is scheduled on its own; ``alone`` (stopping
PostgreSQL or Redis, timing gunicorn) runs in a phase of its own after the parallel one.
"""

from __future__ import annotations

import os
import tempfile
from urllib.parse import urlsplit, urlunsplit

#: The Redis database of worker gw0's broker; gwN's is FIRST_BROKER_DB + N.
FIRST_BROKER_DB = 4


def worker_index() -> int | None:
    """The xdist worker's number (``gw3`` → 3), None outside xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker[2:]) if worker.startswith("gw") else None


def broker_url_for(url: str, index: int) -> str:
    """``url`` on the worker's own Redis database."""
    return urlunsplit(urlsplit(url)._replace(path=f"/{FIRST_BROKER_DB + index}"))


def _own_services() -> None:
    index = worker_index()
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if index is None or not broker.startswith("redis://"):
        return
    os.environ["CELERY_BROKER_URL"] = broker_url_for(broker, index)
    if "HUMEVAL_JOB_DIR" not in os.environ:
        os.environ["HUMEVAL_JOB_DIR"] = tempfile.mkdtemp(prefix=f"humeval-jobs-gw{index}-")


_own_services()
