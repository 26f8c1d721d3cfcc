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
        env = {**os.environ, "DATABASE_URL": database_url_for(self.database), **self.env}
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
