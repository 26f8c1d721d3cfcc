"""Faults: Redis stopped while workers submit, PostgreSQL restarted under the web app."""

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from django.db import connection

from annotator.models import Annotation
from protocol.models import Round
from tests.protocol_sim import adaptive_bundle, run_workers
from tests.services import ROOT, CeleryWorker, database_url_for, wait_for


def as_postgres(*cmd: str) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else list(cmd)


def redis_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["redis-cli", "-p", os.environ["HUMEVAL_REDIS_PORT"], *args],
        capture_output=True,
        text=True,
        check=False,
    )


def start_redis() -> None:
    directory = os.environ["HUMEVAL_SERVICES_DIR"]
    subprocess.run(
        [
            "redis-server",
            "--port",
            os.environ["HUMEVAL_REDIS_PORT"],
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "yes",
            "--pidfile",
            f"{directory}/redis.pid",
            "--logfile",
            f"{directory}/redis.log",
        ],
        check=True,
    )
    wait_for(lambda: redis_cli("ping").stdout.strip() == "PONG", timeout=20)


@pytest.mark.django_db(transaction=True)
def test_redis_down_submissions_are_stored_and_decided_when_it_returns(tmp_path, make_study):
    from annotator import services

    study = services.study_import(adaptive_bundle(), filename="a.jsonl")
    redis_cli("shutdown", "nosave")
    wait_for(lambda: redis_cli("ping").returncode != 0, timeout=10)
    try:
        started = time.monotonic()
        submitted = run_workers(study, n_workers=1, per_worker=30)  # completes round 1
        elapsed = time.monotonic() - started
    finally:
        start_redis()
    assert submitted == 30 == Annotation.objects.filter(study=study).count()
    assert elapsed < 60  # a dead broker does not hang the workers' submits
    assert Round.objects.get(study=study, number=1).state == "closed"
    worker = CeleryWorker(connection.settings_dict["NAME"], tmp_path / "w.log", beat=True)
    worker.start()
    try:
        wait_for(lambda: Round.objects.get(study=study, number=1).state == "decided", timeout=90)
    finally:
        worker.stop()
    assert Round.objects.filter(study=study, number=2).count() == 1


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - loopback
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except urllib.error.URLError:
        return 0  # not listening (yet)


@pytest.mark.django_db(transaction=True)
def test_web_recovers_after_postgres_restart(make_study, tmp_path):
    """gunicorn, as in production, keeps serving after PostgreSQL restarts: stale
    connections are noticed and replaced without any manual step."""
    study = make_study()
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url_for(connection.settings_dict["NAME"]),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
    }
    log = (tmp_path / "gunicorn.log").open("wb")
    web = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "config.wsgi:application", "--bind",
         f"127.0.0.1:{port}", "--workers", "2"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/api/schema/"
    # the MTurk preview reads the study and an item from the database, with no session
    page = f"http://127.0.0.1:{port}/w/{study.public_id}/mturk/?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE"
    try:
        wait_for(lambda: get(url) == 200, timeout=30)  # listening
        statuses = [get(page) for _ in range(4)]  # warm every worker's connection
        data = os.environ["HUMEVAL_PG_DATA"]
        subprocess.run(
            as_postgres(f"{os.environ['HUMEVAL_PG_BIN']}/pg_ctl", "-D", data, "-l",
                        f"{os.environ['HUMEVAL_SERVICES_DIR']}/pg.log", "-m", "fast", "-w",
                        "restart"),
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60,
        )  # fmt: skip
        after = [get(page) for _ in range(6)]
    finally:
        web.terminate()
        web.wait(20)
        connection.close()  # the test's own connection died with the restart
    assert statuses == [200] * 4
    assert after == [200] * 6
