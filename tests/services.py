"""Fixtures for tests that need real services. ``./run test`` provisions them and sets
``HUMEVAL_REQUIRE_SERVICES=1``, so a missing service fails the run instead of skipping."""

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import kombu.exceptions
import pytest
import redis

ROOT = Path(__file__).resolve().parent.parent
REQUIRED = os.environ.get("HUMEVAL_REQUIRE_SERVICES") == "1"


def missing(reason: str) -> None:
    if REQUIRED:
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def require_postgres_and_redis() -> None:
    from django.conf import settings
    from django.db import connection

    if connection.vendor != "postgresql":
        missing("needs PostgreSQL: set DATABASE_URL=postgres://… (./run test does)")
    broker = settings.CELERY_BROKER_URL
    if not broker.startswith("redis://"):
        missing("needs Redis: set CELERY_BROKER_URL=redis://… (./run test does)")
    import redis

    try:
        redis.Redis.from_url(broker, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        missing(f"Redis at {broker} does not answer: {exc}")


def database_url_for(name: str) -> str:
    """``DATABASE_URL`` pointing at another database on the same server (the test one)."""
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit(parts._replace(path=f"/{name}"))


class CeleryWorker:
    """A real ``celery worker`` process on the test database, consuming ``queues`` (default:
    every queue of ``HUMEVAL_CELERY_QUEUES``, as all the deployment's workers together)."""

    def __init__(
        self,
        database: str,
        log: Path,
        beat: bool = False,
        env: dict | None = None,
        queues: tuple[str, ...] | None = None,
        concurrency: int = 1,
    ) -> None:
        from django.conf import settings

        self.database, self.log, self.proc, self.beat = database, log, None, beat
        self.env = env or {}
        self.queues = tuple(queues or settings.HUMEVAL_CELERY_QUEUES)
        self.concurrency = concurrency
        self.name = f"test-{os.getpid()}-{time.monotonic_ns()}@{socket.gethostname()}"

    def start(self) -> None:
        env = {
            **os.environ,
            "DATABASE_URL": database_url_for(self.database),
            # Django's system checks (0.4 s a start) run once, in ./run test's check step
            "CELERY_SKIP_CHECKS": "1",
            **self.env,
        }
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "--loglevel=INFO",
                f"--concurrency={self.concurrency}",
                "--pool=prefork",
                "--without-gossip",
                "--without-mingle",
                "-Q",
                ",".join(self.queues),
                "-n",
                self.name,
                *(["-B", "-s", str(self.log.with_suffix(".beat"))] if self.beat else []),
            ],
            cwd=ROOT,
            env=env,
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
        )
        from config.celery import app

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"celery worker exited: {self.log.read_text()[-2000:]}")
            try:
                if app.control.ping(destination=[self.name], timeout=0.5):
                    return
            except (OSError, redis.RedisError, kombu.exceptions.KombuError):
                pass  # a pooled connection to a Redis that was restarted: the next try reconnects
        raise RuntimeError(f"celery worker did not answer: {self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        """SIGKILL, as a crash or an OOM kill would."""
        if self.proc and self.proc.poll() is None:
            subprocess.run(["pkill", "-9", "-P", str(self.proc.pid)], check=False)
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")


class RoundLock:
    """A round's row lock held by another thread (its own connection) until released, so a
    decision task that reaches ``round_decide`` blocks there."""

    def __init__(self, study, number: int) -> None:
        self._held, self._release = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._hold, args=(study, number))

    def _hold(self, study, number: int) -> None:
        from django.db import connections, transaction

        from protocol.models import Round

        with transaction.atomic():
            Round.objects.select_for_update().get(study=study, number=number)
            self._held.set()
            self._release.wait(120)
        connections.close_all()

    def start(self) -> None:
        self._thread.start()
        self._held.wait(10)

    def release(self) -> None:
        self._release.set()
        self._thread.join(30)


# --- the database emptied between transactional tests, faster ---------------------------------
#: Tables Django's flush empties only to fill again at once (its post_migrate signal
#: re-creates every content type and permission): kept, if no test changed them.
KEPT_TABLES = ("django_content_type", "auth_permission")


class FastFlush:
    """What Django's ``flush`` leaves after a transactional test (``TransactionTestCase``),
    reached faster on PostgreSQL: the flush TRUNCATEs every table, then its post_migrate
    signal re-creates every content type and permission (0.25–0.65 s a test); this locks the
    same tables as the TRUNCATE would (so it waits, as the TRUNCATE does, for any other
    connection's transaction that still holds one: a worker's task, a live server's request)
    and DELETEs the rows of all but the content types and permissions, which it keeps. Those
    two are the rows the signal would write again: they are compared with the session's
    first state (count and sum of ids), and where a test changed them, Django's own flush
    runs. Foreign keys are checked at the commit (Django declares them DEFERRABLE), so the
    order of the DELETEs does not matter. Sequences go on, as after Django's flush."""

    def __init__(self) -> None:
        self._sql: dict[str, tuple[str, str]] = {}
        self._kept: dict[str, tuple] = {}

    def _prepare(self, connection) -> tuple[str, str]:
        if connection.alias not in self._sql:
            names = connection.introspection.django_table_names(
                only_existing=True, include_views=False
            )
            quote = connection.ops.quote_name
            emptied = [quote(t) for t in sorted(names) if t not in KEPT_TABLES]
            delete = ";".join(
                [
                    "SET CONSTRAINTS ALL DEFERRED",
                    f"LOCK TABLE {', '.join(emptied)} IN ACCESS EXCLUSIVE MODE",
                    *(f"DELETE FROM {t}" for t in emptied),
                ]
            )
            check = "SELECT " + ", ".join(
                f"(SELECT count(*) FROM {quote(t)}), (SELECT coalesce(sum(id), 0) FROM {quote(t)})"
                for t in KEPT_TABLES
            )
            self._sql[connection.alias] = (delete, check)
        return self._sql[connection.alias]

    def snapshot(self, using: str = "default") -> None:
        """Note the content types and permissions as they are: the state to keep."""
        from django.db import connections

        connection = connections[using]
        if connection.vendor != "postgresql":
            return
        with connection.cursor() as cursor:
            cursor.execute(self._prepare(connection)[1])
            self._kept[using] = cursor.fetchone()

    def __call__(self, using: str = "default") -> bool:
        """Empty database ``using`` as Django's flush would; False (nothing done) where only
        Django's flush can (another database engine, content types or permissions changed)."""
        from django.db import connections, transaction

        connection = connections[using]
        if connection.vendor != "postgresql" or using not in self._kept:
            return False
        delete, check = self._prepare(connection)
        with transaction.atomic(using=using), connection.cursor() as cursor:
            cursor.execute(check)
            if cursor.fetchone() != self._kept[using]:
                return False
            cursor.execute(delete)
        return True


@pytest.fixture(scope="session", autouse=True)
def fast_flush_between_tests(django_db_setup, django_db_blocker):
    """For the session, a ``TransactionTestCase`` (pytest-django's ``transactional_db``,
    ``live_server``) ends with ``FastFlush`` in place of Django's flush, where it does what
    that one would: one database, no ``available_apps``, no serialized rollback. (Imported
    by the conftests of tests/integration and tests/browser; installed once a session.)"""
    from django.test import TransactionTestCase

    original = TransactionTestCase._fixture_teardown
    if getattr(original, "fast_flush", False):  # the other directory's conftest did it
        yield
        return
    flush = FastFlush()
    with django_db_blocker.unblock():
        flush.snapshot()

    def _fixture_teardown(self):
        names = list(self._databases_names(include_mirrors=False))
        plain = self.available_apps is None and not self.serialized_rollback
        if not (plain and names == ["default"] and flush("default")):
            original(self)
            flush.snapshot()  # Django's flush wrote them again (new ids): the state to keep

    _fixture_teardown.fast_flush = True
    TransactionTestCase._fixture_teardown = _fixture_teardown
    try:
        yield
    finally:
        TransactionTestCase._fixture_teardown = original
