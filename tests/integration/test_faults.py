"""Faults: Redis stopped while workers submit, PostgreSQL restarted under the web app."""

import contextlib
import http.cookiejar
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
from django.db import connection

from annotator.models import Annotation
from protocol.models import Round
from tests.conftest import pairwise_bundle
from tests.protocol_sim import adaptive_bundle, run_workers
from tests.services import ROOT, CeleryWorker, RoundLock, database_url_for, wait_for

#: Stops and restarts the one PostgreSQL and Redis of the run: in a phase of its own.
pytestmark = pytest.mark.alone


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
    except (urllib.error.URLError, TimeoutError):
        return 0  # not listening (yet), or still starting


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


# --- Redis stopped under load: the throttle fails open, decisions are recovered ----------


class Worker:
    """A crowdworker's browser on a real server: cookies, the CSRF token, the task form."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )

    def request(self, path: str, data: dict | None = None) -> tuple[int, str]:
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        try:
            with self.opener.open(self.base + path, body, timeout=30) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")


def alive(thread: threading.Thread) -> bool:
    return thread.is_alive()


def field(page: str, name: str) -> str | None:
    found = re.search(rf'name="{name}" value="([^"]+)"', page)
    return found.group(1) if found else None


@contextlib.contextmanager
def gunicorn_server(tmp_path, workers: int = 2, args: tuple[str, ...] = (), **env):
    port = free_port()
    full_env = {
        **os.environ,
        "DATABASE_URL": database_url_for(connection.settings_dict["NAME"]),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        **env,
    }
    log = tmp_path / "gunicorn.log"
    web = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "config.wsgi:application", "--bind",
         f"127.0.0.1:{port}", "--workers", str(workers), *args],
        cwd=ROOT, env=full_env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: get(f"{base}/admin/login/") == 200, timeout=60)
        yield base, log
    finally:
        web.terminate()
        web.wait(20)


def redis_url(db: int) -> str:
    return f"redis://127.0.0.1:{os.environ['HUMEVAL_REDIS_PORT']}/{db}"


def broker_losses(worker: CeleryWorker) -> int:
    """How many times the worker has logged losing (or failing to reach) its broker."""
    return len(re.findall(r"Connection to broker lost|Cannot connect to", worker.log.read_text()))


def sweeps_done(worker: CeleryWorker) -> int:
    """How many periodic round recoveries the worker has finished."""
    return len(
        re.findall(r"Task protocol\.recover_rounds\[[^]]*\] succeeded", worker.log.read_text())
    )


def stop_redis() -> None:
    redis_cli("shutdown", "nosave")
    wait_for(lambda: redis_cli("ping").returncode != 0, timeout=10)


@pytest.mark.django_db(transaction=True)
def test_redis_stopped_while_workers_submit_answers_every_request(make_study, tmp_path):
    """Six workers submit through gunicorn (throttle counters in Redis) while Redis is stopped:
    no 5xx, every answer the server accepted is stored once, none is lost."""
    study = make_study(pairwise_bundle(n_inputs=40), redundancy=6)
    outage = threading.Event()
    results: list[tuple[str, int, bool]] = []  # (token, status, during the outage)
    lock = threading.Lock()
    stop = threading.Event()

    errors: list[BaseException] = []

    def work(n: int, base: str) -> None:
        try:
            me = Worker(base)
            me.request(f"/w/{study.public_id}/?worker=crowd{n}")
            status, page = me.request(f"/w/{study.public_id}/task/")
            while not stop.is_set() and status == 200 and field(page, "token"):
                token, during = field(page, "token"), outage.is_set()
                form = {"csrfmiddlewaretoken": field(page, "csrfmiddlewaretoken"),
                        "token": token, "answer": "left"}  # fmt: skip
                status, page = me.request(f"/w/{study.public_id}/task/", form)
                with lock:
                    results.append((token, status, during))
        except BaseException as exc:  # a refused or dropped connection fails the test
            errors.append(exc)

    with gunicorn_server(tmp_path, HUMEVAL_CACHE_URL=redis_url(1)) as (base, log):
        threads = [threading.Thread(target=work, args=(n, base)) for n in range(6)]
        for thread in threads:
            thread.start()
        try:
            wait_for(lambda: len(results) >= 20 or not any(map(alive, threads)), timeout=40)
            stop_redis()
            outage.set()
            # the outage lasts until the server has said so and taken ten answers in it
            wait_for(
                lambda: (
                    (
                        sum(out for _, _, out in list(results)) >= 10
                        and "Redis unreachable" in log.read_text()
                    )
                    or not any(map(alive, threads))
                ),
                timeout=60,
            )
            outage.clear()
        finally:
            start_redis()
        before = len(results)
        # (a worker whose answer got an error stops: the assertions below say which)
        wait_for(lambda: len(results) >= before + 10 or not any(map(alive, threads)), 30)
        stop.set()
        for thread in threads:
            thread.join(30)
        server_log = log.read_text()
    assert not errors, errors
    statuses = [status for _, status, _ in results]
    assert all(status < 500 for status in statuses), statuses
    assert set(statuses) == {200}  # the throttle's limits were not reached either
    during = [token for token, _, out in results if out]
    assert len(during) >= 10  # answers were accepted while Redis was down
    assert "Redis unreachable" in server_log  # and the throttle knew it
    stored = set(map(str, Annotation.objects.filter(study=study).values_list(
        "assignment__token", flat=True)))  # fmt: skip
    accepted = {token for token, status, _ in results if status == 200}
    assert stored == accepted
    assert Annotation.objects.filter(study=study).count() == len(accepted) == len(results)


@pytest.mark.django_db(transaction=True)
def test_redis_stopped_with_a_decision_in_flight_decides_it_once_without_a_restart(tmp_path):
    """The worker (with beat) is deciding round 1 when Redis stops; later round 2 is completed
    while Redis is down, so its decision cannot even be queued. Each time, once Redis is
    back, the round is decided exactly once, by the same worker process."""
    from annotator import services

    study = services.study_import(adaptive_bundle(), filename="a.jsonl")
    run_workers(study, n_workers=1, per_worker=30)  # completes round 1: its decision is queued
    assert Round.objects.get(study=study, number=1).state == "closed"
    lock = RoundLock(study, 1)
    lock.start()
    worker = CeleryWorker(
        connection.settings_dict["NAME"], tmp_path / "worker.log", beat=True,
        env={"HUMEVAL_SWEEP_SECONDS": "2"},
    )  # fmt: skip
    try:
        try:
            worker.start()
            wait_for(blocked_on_round_lock, timeout=30)  # the decision is in flight
            stop_redis()
        finally:
            lock.release()
        wait_for(lambda: broker_losses(worker) >= 1, timeout=60)  # it knows Redis is gone
        assert worker.proc.poll() is None  # the worker outlives the outage
        start_redis()
        wait_for(lambda: Round.objects.get(study=study, number=1).state == "decided", 60)
        # round 2 is completed while Redis is down: its decision cannot even be queued
        losses = broker_losses(worker)
        stop_redis()
        try:
            run_workers(study, n_workers=1, seed=1, per_worker=40)
            assert Round.objects.get(study=study, number=2).state == "closed"
            wait_for(lambda: broker_losses(worker) > losses, timeout=60)  # down for it too
        finally:
            start_redis()
        wait_for(lambda: Round.objects.get(study=study, number=2).state == "decided", 60)
        # redelivered and swept duplicates have had their chance: two more sweeps ran on the
        # worker's one process after the decision
        sweeps = sweeps_done(worker)
        wait_for(lambda: sweeps_done(worker) >= sweeps + 2, timeout=60)
        assert worker.proc.poll() is None  # never restarted by hand, never exited
    finally:
        worker.stop()
    log = worker.log.read_text()
    assert "Unrecoverable error" not in log
    for rnd in Round.objects.filter(study=study).exclude(state="open"):
        assert rnd.state == "decided"
        pairs = list(rnd.decisions.values_list("pair", flat=True))
        assert len(pairs) == len(set(pairs))  # decided once: one decision per pair
    assert Round.objects.get(study=study, number=1).decisions.count() == 6  # 4 systems
    numbers = list(Round.objects.filter(study=study).values_list("number", flat=True))
    assert len(numbers) == len(set(numbers)) >= 2  # each next round opened once


def blocked_on_round_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query ILIKE '%%protocol_round%%FOR UPDATE%%'"
        )
        return cursor.fetchone()[0] > 0


# --- PostgreSQL restarted under submits: no error page, every accepted label once ---------


def restart_postgres() -> None:
    data = os.environ["HUMEVAL_PG_DATA"]
    subprocess.run(
        as_postgres(f"{os.environ['HUMEVAL_PG_BIN']}/pg_ctl", "-D", data, "-l",
                    f"{os.environ['HUMEVAL_SERVICES_DIR']}/pg.log", "-m", "fast", "-w",
                    "restart"),
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60,
    )  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_postgres_restarted_while_workers_submit_answers_every_request(make_study, tmp_path):
    """Six workers submit through gunicorn while PostgreSQL restarts twice (``-m fast``:
    every open connection is cut, new ones refused for a moment): no 5xx, every answer the
    server accepted is stored once (a submit that met the dropped connection was run again
    on a fresh one: ``annotator/resilience.py``)."""
    study = make_study(pairwise_bundle(n_inputs=60), redundancy=6)
    results: list[tuple[str, int]] = []
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []

    def work(n: int, base: str) -> None:
        try:
            me = Worker(base)
            me.request(f"/w/{study.public_id}/?worker=crowd{n}")
            status, page = me.request(f"/w/{study.public_id}/task/")
            while not stop.is_set() and status == 200 and field(page, "token"):
                token = field(page, "token")
                form = {"csrfmiddlewaretoken": field(page, "csrfmiddlewaretoken"),
                        "token": token, "answer": "left"}  # fmt: skip
                status, page = me.request(f"/w/{study.public_id}/task/", form)
                with lock:
                    results.append((token, status))
        except BaseException as exc:  # a refused or dropped connection fails the test
            errors.append(exc)

    with gunicorn_server(tmp_path, workers=3, HUMEVAL_THROTTLE_SUBMIT="10000/min") as (
        base,
        log,
    ):
        threads = [threading.Thread(target=work, args=(n, base)) for n in range(6)]
        for thread in threads:
            thread.start()
        try:

            def twenty_more(before: int = len(results)) -> None:
                wait_for(lambda: len(results) >= before + 20 or not any(map(alive, threads)), 60)

            twenty_more(len(results))
            restart_postgres()
            twenty_more(len(results))
            restart_postgres()
            twenty_more(len(results))
        finally:
            stop.set()
            for thread in threads:
                thread.join(30)
            connection.close()  # the test's own connection died with the restart
        server_log = log.read_text()
    assert not errors, errors
    statuses = [status for _, status in results]
    assert all(status < 500 for status in statuses), (statuses, server_log[-3000:])
    assert set(statuses) == {200}
    assert "database connection lost" in server_log  # the restarts did meet requests
    stored = list(map(str, Annotation.objects.filter(study=study).values_list(
        "assignment__token", flat=True)))  # fmt: skip
    assert sorted(stored) == sorted({token for token, _ in results})
