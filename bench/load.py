"""Load benchmark: simulated crowdworkers annotate an adaptive study over HTTP, per kind.

On loopback in a temporary directory (all stopped afterwards, also on a signal or an error):
a private PostgreSQL cluster and Redis, an adaptive pairwise study whose rounds close and
open during the run, ``gunicorn config.wsgi`` (6 sync workers) and one Celery worker. Then
``--workers`` asyncio workers run the cycle (enter, ``GET /task/``, ``POST`` the answer,
answered with the next task) for ``--seconds`` after ``--warmup`` (extended until the
study's first round is decided: that decision calibrates the study once), and the same number of
clients time the trivial ``GET /api/studies/`` for ``--api-seconds``, for the ratio: in
``--slices`` alternating slices, because the machine's speed drifts from minute to minute
and both sides of the ratio must see the same drift. Afterwards the database
is checked (every submit stored once, no item above its redundancy, the budget ledger holds,
every round decided once, no HTTP error; exit 1 otherwise). ``--sqlite``: the embedded
default (3 workers, eager Celery); ``--profile DIR``: cProfile and SQL per request kind.
``--kind`` picks the task kind (pairwise, likert, ranking, error_spans; ``all``: each in
turn on a fresh stack, then a table of the kinds). A worker on the waiting page looks again
when and where the page's refresh says, as a browser does.

    python bench/load.py [--kind pairwise] [--seconds 180] [--workers 200] [--sqlite]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from html import unescape
from itertools import combinations
from pathlib import Path
from urllib.parse import urlencode, urlsplit

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
HOST = "127.0.0.1"
#: Simulated true quality of the systems: one clearly better one (its pairs are decided
#: within a few rounds and retire) and a field of equals whose pairs stay open and keep
#: the study supplied with work.
TOP_QUALITY = {"s01": 2}
ACCURACY = 0.85
TARGET_CYCLES = 80.0
TARGET_RATIO = 0.9
TARGET_P99 = 1.0
#: The study line of each kind the bench runs (``kind`` and what the kind needs).
KINDS: dict[str, dict[str, object]] = {
    "pairwise": {},
    "likert": {"kind": "likert"},
    "ranking": {"kind": "ranking", "per_item": 3, "allow_tie": False},
    "error_spans": {"kind": "error_spans", "categories": ["Accuracy"]},
}
SCORE_FIELD = re.compile(r'name="(score-[\w-]+)" value="([^"]+)"')
REFRESH = re.compile(r'http-equiv="refresh" content="(\d+(?:\.\d+)?); url=([^"]+)"')
OUTPUT_TEXT = re.compile(r"\b(s\d+) says \d+")
TOKEN_FIELD = re.compile(r'name="token" value="([0-9a-f-]{36})"')
CSRF_FIELD = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
WAITING = 'id="waiting"'
MESSAGES = re.compile(r'<ul class="messages"[^>]*>(.*?)</ul>', re.S)


# --- pure helpers ---------------------------------------------------------------------------
def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def system_names(n: int) -> list[str]:
    return [f"s{i:02d}" for i in range(1, n + 1)]


def quality(system: str) -> int:
    return TOP_QUALITY.get(system, 1)


def study_bundle(n_systems: int, n_inputs: int, **options: object) -> bytes:
    """A JSONL bundle of an adaptive study (pairwise unless ``kind`` is given; the format of
    ``tests/protocol_sim.adaptive_bundle``); each output says which system wrote it, so
    the simulated workers can answer by the systems' true quality."""
    study = {
        "name": "load bench",
        "kind": "pairwise",
        "collection": "adaptive",
        "allow_tie": True,
        "open_links": True,
        "gold_rate_start": 0.0,
        "gold_rate_end": 0.0,
        **options,
    }
    systems = system_names(n_systems)
    lines = [json.dumps({"study": study})]
    lines += [
        json.dumps(
            {
                "id": f"in{i}",
                "input": f"input {i}",
                "outputs": {s: f"{s} says {i}" for s in systems},
            }
        )
        for i in range(n_inputs)
    ]
    return ("\n".join(lines) + "\n").encode()


def study_capacity(n_systems: int, n_inputs: int, redundancy: int, kind: str = "pairwise") -> int:
    """Annotations the study can take at most: every item on every input."""
    return items_per_input(kind, n_systems) * n_inputs * redundancy


def items_per_input(kind: str, n_systems: int) -> int:
    """Items of one input in the bench's study of ``kind``: a pairwise item per pair of
    systems, a Likert or error-span item per system, one ranking item (3 systems drawn)."""
    if kind == "pairwise":
        return len(list(combinations(range(n_systems), 2)))
    return 1 if kind == "ranking" else n_systems


def batch_annotations(kind: str, n_systems: int, redundancy: int) -> float:
    """Annotations a round gains per input it gives every pair (its ``batch_size``): the
    input's items for a pairwise or Likert study; a ranking item of 3 outputs serves 3 of
    the pairs, so a third of a pairwise study's."""
    if kind == "ranking":
        return len(list(combinations(range(n_systems), 2))) / 3 * redundancy
    return items_per_input(kind, n_systems) * redundancy


#: Annotations in the first round of the pairwise default (28 pairs × 30 inputs × 3).
ROUND_ANNOTATIONS = 2520
#: Annotations the study of every kind can take (the pairwise default's 1,000 inputs × 28
#: pairs × 3): a run at 200+ cycles/s never runs out of work.
CAPACITY = 84000


@dataclass(frozen=True)
class TaskPage:
    token: str
    csrf: str
    left: str
    right: str
    messages: str
    #: the systems of the outputs shown, in display order (one for Likert and error spans)
    systems: tuple[str, ...] = ()
    #: the page's score fields (Likert): name → the values offered
    scales: tuple[tuple[str, tuple[str, ...]], ...] = ()


def parse_task_page(html: str) -> TaskPage | None:
    """The assignment token, CSRF token and the systems shown (from the synthetic output
    texts, in display order; ``left``/``right`` the first two) of a task page, with its
    score fields; ``None`` if it is not one."""
    token, csrf = TOKEN_FIELD.search(html), CSRF_FIELD.search(html)
    systems = tuple(dict.fromkeys(OUTPUT_TEXT.findall(html)))  # an output may show twice
    if token is None or csrf is None or not systems:
        return None
    shown = MESSAGES.search(html)
    text = re.sub(r"<[^>]+>", " ", shown.group(1)).strip() if shown else ""
    scales: dict[str, list[str]] = {}
    for name, value in SCORE_FIELD.findall(html):
        scales.setdefault(name, []).append(value)
    return TaskPage(
        token.group(1),
        csrf.group(1),
        systems[0],
        systems[1] if len(systems) > 1 else "",
        text,
        systems,
        tuple((name, tuple(values)) for name, values in scales.items()),
    )


def answer_fields(kind: str, page: TaskPage, rng: random.Random) -> dict[str, str]:
    """A simulated worker's answer to ``page`` as the form fields of ``kind``, by the true
    quality of the systems shown (with noise)."""
    if kind == "pairwise":
        return {"answer": choose_answer(page.left, page.right, rng)}
    noisy = [quality(s) + rng.gauss(0, 0.7) for s in page.systems]
    if kind == "ranking":
        best_first = sorted(range(len(noisy)), key=lambda d: -noisy[d])
        return {"ranking": json.dumps([[d] for d in best_first])}
    good = min(max((noisy[0] - 0.5) / 2, 0.0), 1.0)  # 0 .. 1
    if kind == "error_spans":
        return {"spans": "[]", "score": str(round(100 * good))}
    fields = {}
    for name, values in page.scales:  # Likert: a point of every scale
        fields[name] = values[min(int(good * len(values)), len(values) - 1)]
    return fields


def refresh(html: str, default: float, url: str) -> tuple[float, str]:
    """After how many seconds the waiting page looks again and where (its refresh), else
    ``default`` and ``url``."""
    found = REFRESH.search(html)
    return (float(found.group(1)), unescape(found.group(2))) if found else (default, url)


def choose_answer(left: str, right: str, rng: random.Random, accuracy: float = ACCURACY) -> str:
    """A simulated worker's answer: the truly better side with probability ``accuracy``,
    anything when the two are equally good."""
    ql, qr = quality(left), quality(right)
    if ql == qr:
        return rng.choice(["left", "right", "tie"])
    better_left = ql > qr
    if rng.random() > accuracy:
        better_left = not better_left
    return "left" if better_left else "right"


def parse_set_cookie(header: str) -> tuple[str, str, bool]:
    """``(name, value, deleted)`` of one ``Set-Cookie`` header."""
    first, *attrs = header.split(";")
    name, _, value = first.strip().partition("=")
    deleted = any(
        a.strip().lower() in ("max-age=0",)
        or a.strip().lower().startswith("expires=thu, 01 jan 1970")
        for a in attrs
    )
    return name, value.strip('"'), deleted


# --- a minimal HTTP/1.1 client ----------------------------------------------------------------
@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes
    elapsed: float

    @property
    def location(self) -> str:
        return urlsplit(self.headers.get("location", "")).path

    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


class HttpClient:
    """One keep-alive connection and one cookie jar: a browser tab, minus the browser.

    Written on asyncio streams so that 200 of them cost the load generator little CPU.
    A request on a reused connection that the server closed meanwhile is sent again on a
    new one (the worker pages' POST is idempotent per assignment token)."""

    def __init__(self, host: str, port: int, timeout: float = 120.0) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self.cookies: dict[str, str] = {}
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.connects = 0

    async def _connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.connects += 1

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
    ) -> Response:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        if self.cookies:
            lines.append("Cookie: " + "; ".join(f"{k}={v}" for k, v in self.cookies.items()))
        for key, value in (headers or {}).items():
            lines.append(f"{key}: {value}")
        if body or method == "POST":
            lines.append(f"Content-Length: {len(body)}")
        raw = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
        start = time.perf_counter()
        for attempt in range(2):
            fresh = self.writer is None
            if fresh:
                await self._connect()
            try:
                assert self.writer is not None
                self.writer.write(raw)
                await self.writer.drain()
                status, head, data = await asyncio.wait_for(self._read(), self.timeout)
            except TimeoutError:  # an OSError too, but never sent again
                self.close()
                raise
            except (ConnectionError, asyncio.IncompleteReadError, OSError):
                self.close()
                if fresh or attempt:
                    raise
                continue
            except BaseException:
                self.close()
                raise
            for name, value, deleted in head.pop("set-cookie-list", []):
                if deleted:
                    self.cookies.pop(name, None)
                else:
                    self.cookies[name] = value
            if head.get("connection", "").lower() == "close":
                self.close()
            return Response(status, head, data, time.perf_counter() - start)
        raise ConnectionError("unreachable")

    async def _read(self) -> tuple[int, dict, bytes]:
        assert self.reader is not None
        block = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = block.decode("latin-1").split("\r\n")
        status = int(status_line.split(" ", 2)[1])
        head: dict = {"set-cookie-list": []}
        for line in header_lines:
            if not line:
                continue
            key, _, value = line.partition(":")
            key, value = key.strip().lower(), value.strip()
            if key == "set-cookie":
                head["set-cookie-list"].append(parse_set_cookie(value))
            else:
                head[key] = value
        if head.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await self.reader.readuntil(b"\r\n")
                    break
                chunks.append(await self.reader.readexactly(size))
                await self.reader.readexactly(2)
            data = b"".join(chunks)
        elif "content-length" in head:
            data = await self.reader.readexactly(int(head["content-length"]))
        else:
            data = await self.reader.read()
            head["connection"] = "close"
        return status, head, data


# --- processes --------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def pg_bin() -> Path:
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
        key=lambda p: [int(x) if x.isdigit() else x for x in p.parent.parent.name.split(".")],
    )
    if not found:
        raise SystemExit("PostgreSQL server binaries not found in /usr/lib/postgresql/*/bin")
    return found[-1].parent


def descendants(pid: int) -> set[int]:
    """``pid`` and every process below it, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        if p not in found:
            found.add(p)
            todo += children.get(p, [])
    return found


def cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU time of these processes, in seconds."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / tick


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot."""
    tick = os.sysconf("SC_CLK_TCK")
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = values[3] + values[4]
    return (sum(values) - idle) / tick, sum(values) / tick


class Stack:
    """The processes and the temporary directory of one run; ``stop()`` undoes it all."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.dir = Path(tempfile.mkdtemp(prefix="humeval-load."))
        self.dir.chmod(0o755)
        self.procs: dict[str, subprocess.Popen] = {}
        self.pg: Path | None = None
        self.pg_port = self.redis_port = 0
        self.redis_pid: int | None = None
        self.web_port = free_port()
        self.env = {
            k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "HUMEVAL_"))
        }
        self.env.pop("DATABASE_URL", None)
        self.env.pop("CELERY_BROKER_URL", None)
        self.env.update(
            {
                "DJANGO_SETTINGS_MODULE": "config.settings",
                "DJANGO_SECRET_KEY": secrets.token_urlsafe(40),
                "DJANGO_ALLOWED_HOSTS": HOST,
                "DJANGO_DEBUG": "0",
                "HUMEVAL_VAR_DIR": str(self.dir / "var"),
                "HUMEVAL_THROTTLE_ENTRY": "100000/min",
                "HUMEVAL_THROTTLE_ENTRY_STUDY": "100000/min",
                "HUMEVAL_THROTTLE_SUBMIT": "100000/min",
                # DRF keeps one timestamp per request in the window: a 1 s window keeps it short
                "HUMEVAL_THROTTLE_API_USER": "1000000/s",
                "HUMEVAL_LOG_LEVEL": "WARNING",
                "PYTHONUNBUFFERED": "1",
            }
        )

    # services
    def _as_postgres(self, cmd: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd

    def start_postgres(self) -> None:
        bin_dir = pg_bin()
        self.pg = self.dir / "postgres"
        self.pg.mkdir()
        if os.geteuid() == 0:
            shutil.chown(self.pg, "postgres")
        self.pg_port = free_port()
        data = self.pg / "data"
        subprocess.run(
            self._as_postgres(
                [str(bin_dir / "initdb"), "-D", str(data), "-U", "humeval", "--auth=trust"]
            ),
            check=True,
            stdout=subprocess.DEVNULL,
        )
        options = [
            f"-p {self.pg_port}",
            f"-k {self.pg}",
            f"-c listen_addresses={HOST}",
            "-c max_connections=200",
        ]
        if not self.args.pg_fsync:
            options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        if self.args.profile:
            options += ["-c shared_preload_libraries=pg_stat_statements"]
        subprocess.run(
            self._as_postgres(
                [
                    str(bin_dir / "pg_ctl"),
                    "-D",
                    str(data),
                    "-l",
                    str(self.pg / "pg.log"),
                    "-w",
                    "-o",
                    " ".join(options),
                    "start",
                ]
            ),
            check=True,
            stdout=subprocess.DEVNULL,
        )
        import psycopg

        with psycopg.connect(
            f"postgresql://humeval@{HOST}:{self.pg_port}/postgres", autocommit=True
        ) as conn:
            conn.execute("CREATE DATABASE humeval")
        url = f"postgres://humeval@{HOST}:{self.pg_port}/humeval"
        self.env["DATABASE_URL"] = url
        self.version = (data / "PG_VERSION").read_text().strip()

    def start_redis(self) -> None:
        self.redis_port = free_port()
        pidfile = self.dir / "redis.pid"
        subprocess.run(
            [
                "redis-server",
                "--port",
                str(self.redis_port),
                "--bind",
                HOST,
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "yes",
                "--pidfile",
                str(pidfile),
                "--logfile",
                str(self.dir / "redis.log"),
                "--dir",
                str(self.dir),
            ],
            check=True,
        )
        for _ in range(100):
            if pidfile.exists() and pidfile.read_text().strip():
                self.redis_pid = int(pidfile.read_text())
                break
            time.sleep(0.05)
        base = f"redis://{HOST}:{self.redis_port}"
        self.env["CELERY_BROKER_URL"] = f"{base}/0"
        # as in production: the web processes share their throttle counters in Redis
        self.env["HUMEVAL_CACHE_URL"] = f"{base}/1"
        import redis

        client = redis.Redis.from_url(f"{base}/0")
        for _ in range(100):
            with contextlib.suppress(redis.RedisError):
                if client.ping():
                    return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not answer")

    def manage(self, *argv: str) -> None:
        subprocess.run(
            [PYTHON, "manage.py", *argv],
            cwd=ROOT,
            env=self.env,
            check=True,
            stdout=subprocess.DEVNULL,
        )

    def _spawn(self, name: str, cmd: list[str]) -> subprocess.Popen:
        log = (self.dir / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs[name] = proc
        return proc

    def log_tail(self, name: str, chars: int = 3000) -> str:
        path = self.dir / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def start_celery(self) -> None:
        proc = self._spawn(
            "celery",
            [
                PYTHON,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "--pool=solo",
                "--loglevel=INFO",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-Q",
                "rounds,judge,default",
                "-n",
                f"load-{os.getpid()}@%h",
            ],
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError("celery worker exited:\n" + self.log_tail("celery"))
            if " ready." in self.log_tail("celery", 20000):
                return
            time.sleep(0.2)
        raise RuntimeError("celery worker not ready:\n" + self.log_tail("celery"))

    def start_gunicorn(self) -> None:
        a = self.args
        cmd = [
            PYTHON,
            "-m",
            "gunicorn",
            "config.wsgi",
            "--bind",
            f"{HOST}:{self.web_port}",
            "--workers",
            str(a.gunicorn_workers),
            "--worker-class",
            a.worker_class,
            "--backlog",
            "2048",
            "--timeout",
            "120",
            "--keep-alive",
            "30",
        ]
        if a.worker_class == "gthread":
            cmd += ["--threads", str(a.threads)]
        if a.profile:
            conf = self.dir / "gunicorn_profile.py"
            conf.write_text(PROFILE_CONF.replace("@OUT@", repr(str(Path(a.profile).resolve()))))
            cmd += ["--config", str(conf)]
        proc = self._spawn("gunicorn", cmd)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError("gunicorn exited:\n" + self.log_tail("gunicorn"))
            with contextlib.suppress(OSError), socket.create_connection((HOST, self.web_port), 1):
                return
            time.sleep(0.2)
        raise RuntimeError("gunicorn did not listen:\n" + self.log_tail("gunicorn"))

    def pids(self) -> dict[str, set[int]]:
        """The processes of each service now (for CPU accounting)."""
        found = {name: descendants(p.pid) for name, p in self.procs.items() if p.poll() is None}
        if self.pg is not None:
            pidfile = self.pg / "data" / "postmaster.pid"
            with contextlib.suppress(OSError, ValueError):
                found["postgres"] = descendants(int(pidfile.read_text().split()[0]))
        if self.redis_pid:
            found["redis"] = {self.redis_pid}
        return found

    def stop_process(self, name: str) -> None:
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        # a worker left behind by a killed master
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)

    def stop(self) -> None:
        for name in list(self.procs):
            with contextlib.suppress(Exception):
                self.stop_process(name)
        pidfile = self.dir / "redis.pid"
        if self.redis_pid is None and pidfile.exists():  # interrupted while it started
            with contextlib.suppress(OSError, ValueError):
                self.redis_pid = int(pidfile.read_text())
        if self.redis_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.redis_pid, signal.SIGTERM)
            self.redis_pid = None
        if self.pg is not None:
            subprocess.run(
                self._as_postgres(
                    [str(pg_bin() / "pg_ctl"), "-D", str(self.pg / "data"), "-m", "fast", "stop"]
                ),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
            )
            self.pg = None
        if self.args.keep:
            print(f"kept {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


# --- study set-up and integrity checks (Django ORM in this process) ---------------------------
def django_setup(env: dict[str, str]) -> None:
    for key in ("DATABASE_URL", "CELERY_BROKER_URL", "HUMEVAL_CACHE_URL"):
        os.environ.pop(key, None)
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


@dataclass
class Setup:
    study_id: int
    public_id: str
    api_token: str
    capacity: int
    pairs: int


def prepare_study(args: argparse.Namespace) -> Setup:
    """Import the study, keep its pairs open until decided or out of inputs, and create a
    researcher with an API token for the trivial endpoint."""
    from django.contrib.auth import get_user_model
    from django.db import connections
    from rest_framework.authtoken.models import Token

    from annotator import services
    from protocol.models import ProtocolConfig, SystemPair

    capacity = study_capacity(args.systems, args.inputs, args.redundancy, args.kind)
    study = services.study_import(
        study_bundle(
            args.systems,
            args.inputs,
            redundancy=args.redundancy,
            batch_size=args.batch_size,
            budget=capacity,
            **KINDS[args.kind],
        ),
        filename="load.jsonl",
    )
    # The equally good systems' pairs would otherwise retire early as futile or practically
    # equivalent, and the study would run out of work; decisions, allocation, rounds and
    # the budget ledger are unchanged.
    ProtocolConfig.objects.filter(study=study).update(futility=0.0, rope_delta=0.0)
    user = get_user_model().objects.filter(username="load-researcher").first()
    if user is None:
        user = get_user_model().objects.create_user(
            "load-researcher", password=secrets.token_hex(8)
        )
    study.researchers.add(user)
    token = Token.objects.get_or_create(user=user)[0].key
    pairs = SystemPair.objects.filter(study=study).count()
    connections.close_all()
    return Setup(study.pk, str(study.public_id), token, capacity, pairs)


def first_round_decided(study_id: int) -> bool:
    """Whether the study has decided a round (the first decision calibrates the study's
    decision level once, a few seconds of one core: part of the warm-up)."""
    from django.db import connections

    from protocol.models import Round

    try:
        return Round.objects.filter(study_id=study_id, state=Round.State.DECIDED).exists()
    finally:
        connections.close_all()


def wait_rounds_settled(study_id: int, timeout: float) -> bool:
    """Wait until no round is complete but undecided (the Celery worker has caught up)."""
    from django.db import connections

    from protocol.models import Round

    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not Round.objects.filter(study_id=study_id, state=Round.State.CLOSED).exists():
                return True
            time.sleep(0.5)
        return False
    finally:
        connections.close_all()


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


def verify(study_id: int, submitted: set[str], shared_tokens: int, errors: int) -> list[Check]:
    """Integrity of the run, from the database."""
    from django.db.models import Count, F, Q

    from annotator.models import Annotation, Assignment, Item, Study
    from protocol.models import Decision, ProtocolConfig, Round, SystemPair

    checks: list[Check] = []
    study = Study.objects.get(pk=study_id)
    ann = Annotation.objects.filter(study=study)

    stored = Counter()
    tokens = sorted(submitted)
    for i in range(0, len(tokens), 2000):
        stored.update(
            str(t)
            for t in ann.filter(assignment__token__in=tokens[i : i + 2000]).values_list(
                "assignment__token", flat=True
            )
        )
    lost = [t for t in tokens if stored[t] == 0]
    doubled = [t for t in tokens if stored[t] > 1]
    checks.append(
        Check(
            "no lost submission",
            not lost,
            f"{len(tokens)} submits answered with a next task, waiting or end page, "
            f"{len(tokens) - len(lost)} stored" + (f"; missing e.g. {lost[:3]}" if lost else ""),
        )
    )
    per_assignment = (
        ann.exclude(assignment=None).values("assignment").annotate(n=Count("id")).filter(n__gt=1)
    )
    n_dup = per_assignment.count() + len(doubled)
    checks.append(Check("one annotation per assignment", n_dup == 0, f"{n_dup} assignments twice"))
    dup_pairs = (
        ann.values("item", "annotator").annotate(n=Count("id")).filter(n__gt=1).count()
        + Assignment.objects.filter(study=study)
        .values("item", "annotator")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .count()
    )
    checks.append(
        Check(
            "no (item, worker) twice",
            dup_pairs == 0 and shared_tokens == 0,
            f"{dup_pairs} (item, annotator) repeated in annotations/assignments; "
            f"{shared_tokens} assignment tokens served to two workers",
        )
    )
    items = Item.objects.filter(study=study)
    over_counters = items.filter(Q(n_done__gt=F("redundancy")) | Q(n_taken__gt=F("redundancy")))
    over_ann = (
        items.annotate(n=Count("annotations"))
        .filter(n__gt=F("redundancy"))
        .values_list("pk", flat=True)
    )
    over_live = (
        items.annotate(
            n=Count("assignments", filter=Q(assignments__state__in=["issued", "submitted"]))
        )
        .filter(n__gt=F("redundancy"))
        .values_list("pk", flat=True)
    )
    drift = (
        items.annotate(n=Count("annotations", filter=Q(annotations__source="platform")))
        .exclude(n=F("n_done"))
        .count()
    )
    bad_items = over_counters.count() + len(over_ann) + len(over_live)
    checks.append(
        Check(
            "no item above its redundancy",
            bad_items == 0 and drift == 0,
            f"{items.count()} items; {over_counters.count()} with n_done/n_taken > redundancy, "
            f"{len(over_ann)} with more annotations, {len(over_live)} with more live leases; "
            f"{drift} whose n_done differs from their annotations",
        )
    )
    config = ProtocolConfig.objects.get(study=study)
    collected = ann.count()
    budget_ok = config.committed <= (study.budget or config.committed) and collected <= (
        config.committed
    )
    checks.append(
        Check(
            "budget never exceeded",
            budget_ok,
            f"collected {collected} <= committed {config.committed} <= budget {study.budget}",
        )
    )
    rounds = list(Round.objects.filter(study=study).order_by("number"))
    numbers = [r.number for r in rounds]
    twice = (
        Decision.objects.filter(round__study=study)
        .values("round", "pair")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .count()
    )
    states = [r.state for r in rounds]
    undecided_early = [r.number for r in rounds[:-1] if r.state != Round.State.DECIDED]
    last_ok = bool(rounds) and rounds[-1].state in (Round.State.OPEN, Round.State.DECIDED)
    decided_empty = [
        r.number
        for r in rounds
        if r.state == Round.State.DECIDED and not r.decisions.exists()  # type: ignore[attr-defined]
    ]
    checks.append(
        Check(
            "every round decided once",
            numbers == list(range(1, len(rounds) + 1))
            and twice == 0
            and not undecided_early
            and last_ok
            and not decided_empty,
            f"{len(rounds)} rounds ({Counter(states)}), {twice} (round, pair) decided twice, "
            f"not decided before the last: {undecided_early or 'none'}, "
            f"decided without decisions: {decided_empty or 'none'}",
        )
    )
    checks.append(
        Check(
            "no HTTP error",
            errors == 0,
            f"{errors} unexpected answers (5xx, wrong redirects), timeouts or broken connections",
        )
    )
    open_pairs = SystemPair.objects.filter(study=study, state=SystemPair.State.OPEN).count()
    checks.append(
        Check(
            "work left at the end (run valid)",
            open_pairs > 0 and last_ok and rounds[-1].state == Round.State.OPEN,
            f"{open_pairs} pairs still open, last round {rounds[-1].number if rounds else '-'} "
            f"{states[-1] if states else '-'}",
        )
    )
    return checks


def round_figures(study_id: int, since: float, until: float) -> dict[str, object]:
    """Rounds during the load phase: how many opened and were decided, and how long the
    decision took (closed → decided) and the wait for the next round (closed → opened)."""
    from datetime import UTC, datetime

    from protocol.models import Round

    t0 = datetime.fromtimestamp(since, UTC)
    t1 = datetime.fromtimestamp(until, UTC)
    rounds = list(Round.objects.filter(study_id=study_id).order_by("number"))
    opened = [r for r in rounds if t0 <= r.opened_at <= t1]
    decided = [r for r in rounds if r.decided_at and t0 <= r.decided_at <= t1]
    decide_s = [(r.decided_at - r.closed_at).total_seconds() for r in decided if r.closed_at]
    gaps = [
        (nxt.opened_at - r.closed_at).total_seconds()
        for r, nxt in zip(rounds, rounds[1:], strict=False)
        if r.closed_at and t0 <= r.closed_at <= t1
    ]
    return {
        "total": len(rounds),
        "opened": len(opened),
        "decided": len(decided),
        "items": [r.items for r in rounds],
        "decide_s": decide_s,
        "gap_s": gaps,
    }


# --- the load ---------------------------------------------------------------------------------
@dataclass
class LoadStats:
    """What the clients saw. Only what happens in a measured window (``windows``, one per
    slice; the last is ``[start, deadline)``) is measured; the warm-up before each window
    still counts for the integrity checks."""

    start: float = 0.0
    deadline: float = 0.0
    windows: list[tuple[float, float]] = field(default_factory=list)
    cycles: list[float] = field(default_factory=list)
    next_latency: list[float] = field(default_factory=list)
    nowork_latency: list[float] = field(default_factory=list)
    submit_latency: list[float] = field(default_factory=list)
    entry_latency: list[float] = field(default_factory=list)
    submitted: set[str] = field(default_factory=set)
    owner: dict[str, int] = field(default_factory=dict)
    shared_tokens: int = 0
    no_work: int = 0
    entries: int = 0
    errors: Counter = field(default_factory=Counter)
    messages: Counter = field(default_factory=Counter)
    connects: int = 0
    lag: list[float] = field(default_factory=list)
    api_latency: list[float] = field(default_factory=list)
    api_ok: int = 0
    usage: Usage | None = None

    def error(self, what: str) -> None:
        self.errors[what] += 1

    def measuring(self, t: float) -> bool:
        return any(start <= t < end for start, end in self.windows)

    def measured(self, t: float) -> float:
        """Seconds of measured time before ``t`` (the windows laid end to end)."""
        return sum(min(t, end) - start for start, end in self.windows if start <= t)

    def record(self, into: list[float], response: Response, sent: float) -> None:
        if self.measuring(sent):
            into.append(response.elapsed)


@dataclass
class Worker:
    """A simulated worker's browser, kept from one slice of the load to the next."""

    n: int
    rng: random.Random
    entered: bool = False
    page: TaskPage | None = None  # the task on screen, from the last answer's response
    look: str = ""  # where the next look for a task goes (the waiting page's refresh)
    cookies: dict[str, str] = field(default_factory=dict)  # the session, across slices


async def crowdworker(
    worker: Worker, port: int, study: str, stats: LoadStats, args: argparse.Namespace
) -> None:
    """One simulated worker: enter, then next item / answer until the deadline; on the end
    page (nothing to do while a round is decided) wait a little and enter again. The task
    on screen at the deadline is answered in the next slice."""
    client = HttpClient(HOST, port)
    client.cookies = worker.cookies
    n, rng = worker.n, worker.rng
    base = f"/w/{study}/"
    entered, page, look = worker.entered, worker.page, worker.look or f"{base}task/"

    async def pause(seconds: float) -> None:
        await asyncio.sleep(max(0.0, min(seconds, stats.deadline - time.perf_counter())))

    try:
        while time.perf_counter() < stats.deadline:
            try:
                if not entered:
                    sent = time.perf_counter()
                    r = await client.request("GET", f"{base}?worker=load-{n}")
                    stats.entries += 1
                    stats.record(stats.entry_latency, r, sent)
                    if r.status != 302:
                        stats.error(f"entry {r.status}")
                        await pause(1.0)
                        continue
                    if r.location.endswith("/instructions/"):
                        r = await client.request("GET", r.location)  # read them once
                        if r.status != 200:
                            stats.error(f"instructions {r.status}")
                    entered = True
                if page is None:
                    sent = time.perf_counter()
                    r = await client.request("GET", look)
                    html = r.text() if r.status == 200 else ""
                    if WAITING in html:
                        # between rounds: the page looks again when and where its refresh says
                        stats.no_work += stats.measuring(sent)
                        stats.record(stats.nowork_latency, r, sent)
                        seconds, look = refresh(html, args.reenter, look)
                        await pause(rng.uniform(0.9, 1.1) * seconds)
                        continue
                    look = f"{base}task/"
                    if r.status == 302 and r.location.endswith("/end/"):
                        stats.no_work += stats.measuring(sent)
                        stats.record(stats.nowork_latency, r, sent)
                        end = await client.request("GET", r.location)
                        if end.status != 200:
                            stats.error(f"end {end.status}")
                        entered = False
                        await pause(rng.uniform(0.5, 1.5) * args.reenter)
                        continue
                    page = parse_task_page(html) if html else None
                    if page is None:
                        stats.error(f"task GET {r.status} {r.location}")
                        await pause(1.0)
                        continue
                    stats.record(stats.next_latency, r, sent)
                if page.messages:
                    stats.messages[page.messages[:120]] += 1
                if stats.owner.setdefault(page.token, n) != n:
                    stats.shared_tokens += 1
                if args.think_ms:
                    await pause(rng.uniform(0.5, 1.5) * args.think_ms / 1000)
                body = urlencode(
                    {
                        "csrfmiddlewaretoken": page.csrf,
                        "token": page.token,
                        **answer_fields(args.kind, page, rng),
                        "time_ms": str(rng.randint(800, 9000)),
                    }
                ).encode()
                sent = time.perf_counter()
                r = await client.request(
                    "POST",
                    f"{base}task/",
                    body=body,
                    headers={"Content-Type": "application/x-www-form-urlencoded"},
                )
                done = page.token
                html = r.text() if r.status == 200 else ""
                page = parse_task_page(html) if html else None
                waiting = page is None and WAITING in html and not MESSAGES.search(html)
                if (
                    (page is not None and not page.messages)
                    or waiting
                    or (r.status == 302 and r.location.endswith("/end/"))
                ):
                    # stored, and answered with the next task (or the end page: none left)
                    stats.submitted.add(done)
                    stats.record(stats.submit_latency, r, sent)
                    stats.cycles.append(time.perf_counter())
                    if waiting:  # as a browser: the waiting page looks again after a while
                        seconds, look = refresh(html, args.reenter, look)
                        await pause(rng.uniform(0.9, 1.1) * seconds)
                elif page is not None:
                    stats.error(f"submit refused: {page.messages[:80]}")
                else:
                    stats.error(f"submit {r.status} {r.location}")
            except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
                stats.error(f"connection: {type(exc).__name__}")
                client.close()
                await pause(0.5)
    finally:
        stats.connects += client.connects
        client.close()
        worker.entered, worker.page, worker.look = entered, page, look


async def api_client(port: int, token: str, stats: LoadStats) -> None:
    """The trivial authenticated endpoint, as fast as it answers."""
    client = HttpClient(HOST, port)
    headers = {"Authorization": f"Token {token}", "Accept": "application/json"}
    try:
        while time.perf_counter() < stats.deadline:
            sent = time.perf_counter()
            try:
                r = await client.request("GET", "/api/studies/", headers=headers)
            except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
                stats.error(f"api connection: {type(exc).__name__}")
                client.close()
                continue
            if r.status == 200:
                stats.api_ok += stats.measuring(sent)
                stats.record(stats.api_latency, r, sent)
            else:
                stats.error(f"api {r.status}")
    finally:
        client.close()


async def probe(stack: Stack, stats: LoadStats, interval: float = 0.05) -> None:
    """Event-loop lag (a saturated load generator shows here first) and the CPU used
    during the measured window (sampled every second: processes come and go)."""
    await asyncio.sleep(max(0.0, stats.start - time.perf_counter()))
    tracker = CpuTracker(stack)
    next_sample = time.perf_counter() + 1.0
    while time.perf_counter() < stats.deadline:
        t = time.perf_counter()
        await asyncio.sleep(interval)
        stats.lag.append(time.perf_counter() - t - interval)
        if t >= next_sample:
            tracker.sample()
            next_sample = t + 1.0
    usage = tracker.finish()
    stats.usage = usage if stats.usage is None else stats.usage + usage


async def run_phase(
    stack: Stack,
    warmup: float,
    seconds: float,
    clients: Iterable,
    stats: LoadStats,
    *,
    measure: bool = True,
) -> None:
    """One window of ``seconds`` after ``warmup``, measured unless ``measure`` is false;
    the clients stop at its end."""
    stats.start = time.perf_counter() + warmup
    stats.deadline = stats.start + seconds
    if not measure:
        await asyncio.gather(*clients)
        return
    stats.windows.append((stats.start, stats.deadline))
    await asyncio.gather(probe(stack, stats), *clients)


class CpuTracker:
    """CPU seconds per service from the first to the last sample; a process that starts
    in between counts from zero (e.g. a PostgreSQL backend opened by a web worker)."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.first: dict[str, dict[int, float]] = {}
        self.last: dict[str, dict[int, float]] = {}
        usage = resource.getrusage(resource.RUSAGE_SELF)
        self.t0, self.client0, self.machine0 = (
            time.perf_counter(),
            usage.ru_utime + usage.ru_stime,
            machine_busy()[0],
        )
        self.sample(baseline=True)

    def sample(self, baseline: bool = False) -> None:
        for name, pids in self.stack.pids().items():
            first, last = self.first.setdefault(name, {}), self.last.setdefault(name, {})
            for pid in pids:
                sec = cpu_seconds([pid])
                first.setdefault(pid, sec if baseline else 0.0)
                last[pid] = sec

    def finish(self) -> Usage:
        self.sample()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return Usage(
            time.perf_counter() - self.t0,
            {
                name: sum(sec - self.first[name][pid] for pid, sec in last.items())
                for name, last in self.last.items()
            },
            usage.ru_utime + usage.ru_stime - self.client0,
            machine_busy()[0] - self.machine0,
        )


@dataclass
class Usage:
    """CPU seconds used per service, by this load generator and by the whole machine."""

    wall: float
    by_service: dict[str, float]
    client: float
    machine: float

    def __add__(self, other: Usage) -> Usage:
        services = self.by_service.keys() | other.by_service.keys()
        return Usage(
            self.wall + other.wall,
            {k: self.by_service.get(k, 0.0) + other.by_service.get(k, 0.0) for k in services},
            self.client + other.client,
            self.machine + other.machine,
        )

    def describe(self) -> str:
        def pct(seconds: float) -> str:
            return f"{100 * seconds / self.wall:.0f}%"

        parts = [f"{name} {pct(sec)}" for name, sec in sorted(self.by_service.items())]
        ours = sum(self.by_service.values()) + self.client
        other = max(self.machine - ours, 0.0)
        return (
            f"{', '.join(parts)}, load generator {pct(self.client)}, other work on the "
            f"machine {pct(other)}; machine busy {pct(self.machine)} of "
            f"{100 * (os.cpu_count() or 1)}%"
        )


# --- profiling of the gunicorn workers (a gunicorn config file, no application change) ----------
PROFILE_CONF = """
import cProfile, json, os, pstats, threading, time

OUT = @OUT@
_lock = threading.Lock()
_profiles = {}
_counts = {}


def _kind(environ):
    path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "")
    if path.endswith("/task/"):
        return "task-" + method.lower()
    if path.startswith("/api/"):
        return "api"
    return "other"


def post_worker_init(worker):
    from django.db import connection

    app = worker.wsgi

    def profiled(environ, start_response):
        kind = _kind(environ)
        key = (threading.get_ident(), kind)
        with _lock:
            prof = _profiles.setdefault(key, cProfile.Profile())
            count = _counts.setdefault(kind, [0, 0, 0.0, 0.0])
        queries = [0]

        def counter(execute, sql, params, many, context):
            queries[0] += 1
            return execute(sql, params, many, context)

        t0, c0 = time.perf_counter(), time.thread_time()
        prof.enable()
        try:
            with connection.execute_wrapper(counter):
                result = app(environ, start_response)
                try:
                    body = list(result)
                finally:
                    if hasattr(result, "close"):
                        result.close()
        finally:
            prof.disable()
            with _lock:
                count[0] += 1
                count[1] += queries[0]
                count[2] += time.perf_counter() - t0
                count[3] += time.thread_time() - c0
        return body

    worker.wsgi = profiled


def worker_exit(server, worker):
    os.makedirs(OUT, exist_ok=True)
    pid = os.getpid()
    kinds = {}
    for (_, kind), prof in _profiles.items():
        kinds.setdefault(kind, []).append(prof)
    for kind, profs in kinds.items():
        stats = pstats.Stats(profs[0])
        for p in profs[1:]:
            stats.add(p)
        stats.dump_stats(os.path.join(OUT, f"{kind}-{pid}.prof"))
    with open(os.path.join(OUT, f"queries-{pid}.json"), "w") as fh:
        json.dump(_counts, fh)
"""


def profile_report(directory: Path, stack: Stack, top: int = 25) -> str:
    """Merge the workers' profiles per request kind; the top functions by own and by
    cumulative time, queries per request and (PostgreSQL) the costliest statements."""
    import io
    import pstats

    lines: list[str] = []
    counts: dict[str, list[float]] = {}
    for path in directory.glob("queries-*.json"):
        for kind, values in json.loads(path.read_text()).items():
            c = counts.setdefault(kind, [0, 0, 0.0, 0.0])
            for i, v in enumerate(values):
                c[i] += v
    for kind, (n, q, sec, cpu) in sorted(counts.items()):
        if n:
            lines.append(
                f"{kind}: {int(n)} requests; per request {q / n:.1f} SQL queries, "
                f"{1000 * sec / n:.1f} ms wall, {1000 * cpu / n:.1f} ms CPU of the web "
                "thread (both under the profiler)"
            )
    for kind in sorted({p.name.rsplit("-", 1)[0] for p in directory.glob("*.prof")}):
        files = [str(p) for p in directory.glob(f"{kind}-*.prof")]
        for order in ("tottime", "cumulative"):
            buf = io.StringIO()
            stats = pstats.Stats(*files, stream=buf)
            stats.strip_dirs().sort_stats(order).print_stats(top)
            lines.append(f"\n===== {kind}: top {top} by {order} =====\n{buf.getvalue()}")
    if stack.pg is not None:
        import psycopg

        with psycopg.connect(
            stack.env["DATABASE_URL"].replace("postgres://", "postgresql://")
        ) as c:
            c.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            rows = c.execute(
                "SELECT calls, total_exec_time, mean_exec_time, left(regexp_replace(query, "
                "'\\s+', ' ', 'g'), 220) FROM pg_stat_statements "
                "ORDER BY total_exec_time DESC LIMIT 25"
            ).fetchall()
        lines.append("\n===== PostgreSQL: statements by total execution time =====")
        lines += [
            f"{calls:>8} calls {total:>10.0f} ms {mean:7.2f} ms/call  {q}"
            for calls, total, mean, q in rows
        ]
    text = "\n".join(lines)
    (directory / "report.txt").write_text(text)
    return text


# --- the run ------------------------------------------------------------------------------------
def ms(values: Sequence[float]) -> str:
    if not values:
        return "n=0"
    return (
        f"p50 {1000 * percentile(values, 50):7.1f}  p95 {1000 * percentile(values, 95):7.1f}  "
        f"p99 {1000 * percentile(values, 99):7.1f} ms  (n={len(values)})"
    )


def cost(usage: Usage, n: int) -> str:
    """CPU milliseconds per unit of work, per service (web, database, ...)."""
    if not n:
        return "-"
    parts = [
        f"{name} {1000 * sec / n:.1f}"
        for name, sec in sorted(usage.by_service.items())
        if sec > 0.0005 * n
    ]
    return " + ".join(parts) + " ms"


def timeline(stats: LoadStats, bucket: float = 10.0) -> str:
    """Cycles per second in each ``bucket`` seconds of measured time."""
    counts = Counter(int(stats.measured(t) // bucket) for t in stats.cycles if stats.measuring(t))
    n = int(stats.measured(stats.deadline) // bucket)
    return " ".join(f"{counts.get(i, 0) / bucket:.0f}" for i in range(n))


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    stack = Stack(args)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _run(args, stack)
    finally:
        with contextlib.suppress(Exception):
            from django.db import connections

            connections.close_all()
        stack.stop()
        signal.signal(signal.SIGTERM, previous)


def _run(args: argparse.Namespace, stack: Stack) -> int:
    t_setup = time.perf_counter()
    if args.sqlite:
        mode = "sqlite (embedded default: SQLite file, eager Celery, no Redis)"
    else:
        stack.start_postgres()
        stack.start_redis()
        fsync = "fsync on" if args.pg_fsync else "fsync off"
        mode = f"postgresql {stack.version} ({fsync}) + redis + 1 celery worker (solo pool)"
    print(f"[setup] {mode}; directory {stack.dir}", flush=True)
    stack.manage("migrate", "--noinput")
    django_setup(stack.env)
    setup = prepare_study(args)
    print(
        f"[setup] study {setup.public_id}: {args.systems} systems, {setup.pairs} pairs, "
        f"{args.inputs} inputs, redundancy {args.redundancy}, batch {args.batch_size}; "
        f"capacity and budget {setup.capacity} annotations",
        flush=True,
    )
    if not args.sqlite:
        stack.start_celery()
    stack.start_gunicorn()
    server = f"gunicorn {args.gunicorn_workers} x {args.worker_class}" + (
        f" ({args.threads} threads)" if args.worker_class == "gthread" else ""
    )
    print(
        f"[setup] {server} on {HOST}:{stack.web_port}; ready in "
        f"{time.perf_counter() - t_setup:.0f} s",
        flush=True,
    )

    stats, api = LoadStats(), LoadStats()
    workers = [Worker(n, random.Random(args.seed * 100003 + n)) for n in range(args.workers)]
    print(
        f"[load] {args.workers} workers: {args.warmup:g} s warm-up, then {args.seconds:g} s "
        f"measured against {args.api_seconds:g} s of the trivial endpoint, in "
        f"{args.slices} alternating slices ...",
        flush=True,
    )

    def crowd() -> Iterable:
        return (crowdworker(w, stack.web_port, setup.public_id, stats, args) for w in workers)

    began = time.perf_counter()
    asyncio.run(run_phase(stack, 0.0, args.warmup, crowd(), stats, measure=False))
    while not first_round_decided(setup.study_id) and time.perf_counter() - began < 180:
        asyncio.run(run_phase(stack, 0.0, 2.0, crowd(), stats, measure=False))
    warmed = time.perf_counter() - began
    settled = True
    for _ in range(args.slices):
        asyncio.run(run_phase(stack, args.rewarm, args.seconds / args.slices, crowd(), stats))
        settled &= wait_rounds_settled(setup.study_id, 120)
        asyncio.run(
            run_phase(
                stack,
                2.0,
                args.api_seconds / args.slices,
                (api_client(stack.web_port, setup.api_token, api) for _ in range(args.workers)),
                api,
            )
        )
    to_wall = time.time() - time.perf_counter()
    stack.stop_process("gunicorn")
    stack.stop_process("celery")
    rounds = round_figures(setup.study_id, stats.windows[0][0] + to_wall, stats.deadline + to_wall)
    checks = verify(
        setup.study_id,
        stats.submitted,
        stats.shared_tokens,
        sum(stats.errors.values()) + sum(api.errors.values()),
    )
    profile_text = profile_report(Path(args.profile), stack) if args.profile else ""

    in_window = [t for t in stats.cycles if stats.measuring(t)]
    cycles_s = len(in_window) / args.seconds
    api_s = api.api_ok / args.api_seconds
    ratio = cycles_s / api_s if api_s else float("nan")
    load_use, api_use = stats.usage, api.usage
    assert load_use is not None and api_use is not None
    lag = stats.lag
    client_share = load_use.client / load_use.wall
    generator_ok = client_share < 0.5 and percentile(lag, 99) < 0.02
    per_cycle = sum(load_use.by_service.values()) / max(len(in_window), 1)
    per_request = sum(api_use.by_service.values()) / max(api.api_ok, 1)
    cpu_ratio = per_request / per_cycle if per_cycle else float("nan")
    p99 = percentile(stats.submit_latency, 99)
    bar = "=" * 100
    out = [
        "",
        bar,
        "humeval load bench: summary",
        bar,
        f"command          {' '.join([Path(sys.executable).name, *sys.argv])}",
        f"mode             {mode}",
        f"web              {server}, DEBUG off, throttles raised",
        f"study            {args.kind}, {args.systems} systems ({setup.pairs} pairs), "
        f"{args.inputs} inputs, "
        f"redundancy {args.redundancy}, batch {args.batch_size}, budget {setup.capacity}, "
        "open links, gold rate 0, futility/ROPE off",
        f"workers          {args.workers} simulated crowdworkers, {args.seconds:g} s measured "
        f"after {warmed:.0f} s warm-up (at least {args.warmup:g} s and until the first round "
        f"is decided), in {args.slices} slices alternating with the trivial endpoint, "
        f"think time {args.think_ms:g} ms, re-entry after "
        f"~{args.reenter:g} s on the waiting or end page",
        f"full cycles      {len(in_window)} in {args.seconds:g} s = {cycles_s:.1f} cycles/s "
        f"[target >= {TARGET_CYCLES:g}: {'MET' if cycles_s >= TARGET_CYCLES else 'MISSED'}]",
        f"  per 10 s       {timeline(stats)}",
        f"next item  GET   {ms(stats.next_latency)}  (on entry; then each answer brings it)",
        f"submit     POST  {ms(stats.submit_latency)}  (stores the answer, serves the next) "
        f"[target p99 <= {TARGET_P99:g} s: {'MET' if p99 <= TARGET_P99 else 'MISSED'}]",
        f"no work    GET   {ms(stats.nowork_latency)}  -> waiting page (or end page, re-entered)",
        f"entry      GET   {ms(stats.entry_latency)}",
        f"trivial endpoint GET /api/studies/ (token): {api_s:.1f} req/s, {ms(api.api_latency)}",
        f"ratio            cycles/s / trivial req/s = {ratio:.3f} "
        f"[target >= {TARGET_RATIO:g}: {'MET' if ratio >= TARGET_RATIO else 'MISSED'}]  "
        "(a cycle is one request once working: the answer brings the next task)",
        f"rounds           {rounds['opened']} opened and {rounds['decided']} decided during the "
        f"load; {rounds['total']} in all; decision (closed -> decided) "
        f"p50 {percentile(rounds['decide_s'], 50):.2f} s, max "
        f"{max(rounds['decide_s'], default=float('nan')):.2f} s; closed -> next opened "
        f"p50 {percentile(rounds['gap_s'], 50):.2f} s; items per round {rounds['items']}"
        + ("" if settled else "  (a round was still undecided after 120 s)"),
        f"CPU, load phase  {load_use.describe()}",
        f"CPU, api phase   {api_use.describe()}",
        f"CPU per cycle    {cost(load_use, len(in_window))}; per trivial request "
        f"{cost(api_use, api.api_ok)}",
        f"ratio by CPU     server CPU per trivial request / per cycle = {cpu_ratio:.3f} "
        "(what the ratio is on an otherwise idle machine when the server is CPU-bound)",
        f"load generator   {100 * client_share:.0f}% of one core, event-loop lag p50 "
        f"{1000 * percentile(lag, 50):.1f} ms / p99 {1000 * percentile(lag, 99):.1f} ms / max "
        f"{1000 * max(lag, default=0):.1f} ms, {stats.connects} connections "
        f"-> {'not the bottleneck' if generator_ok else 'MAY BE THE BOTTLENECK'}",
        f"HTTP errors      {dict(stats.errors + api.errors) or 'none'}",
    ]
    if stats.messages:
        out.append(f"page messages    {dict(stats.messages)}")
    out.append("integrity")
    out += [f"  [{'ok' if c.ok else 'FAILED'}] {c.name}: {c.detail}" for c in checks]
    failed = [c for c in checks if not c.ok]
    out.append(
        f"result           {'PASS' if not failed else 'FAIL: ' + ', '.join(c.name for c in failed)}"
    )
    if args.profile:
        out.append(f"profile          {Path(args.profile).resolve() / 'report.txt'}")
    out.append(bar)
    print("\n".join(out), flush=True)
    if profile_text:
        print(profile_text[:6000])
    summary = {
        "kind": args.kind,
        "cycles_s": round(cycles_s, 1),
        "trivial_s": round(api_s, 1),
        "ratio": round(ratio, 3),
        "cpu_ratio": round(cpu_ratio, 3),
        "p50": round(percentile(stats.submit_latency, 50), 3),
        "p99": round(p99, 3),
        "integrity": "PASS" if not failed else "FAIL",
    }
    print("SUMMARY " + json.dumps(summary), flush=True)
    return 1 if failed else 0


def run_kinds(argv: list[str]) -> int:
    """``--kind all``: each kind in its own process (a fresh stack), then a table."""
    rest, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == "--kind":
            skip = True
            continue
        if not a.startswith("--kind="):
            rest.append(a)
    rows, code = [], 0
    for kind in KINDS:
        proc = subprocess.run(
            [PYTHON, str(Path(__file__).resolve()), "--kind", kind, *rest],
            stdout=subprocess.PIPE,
            text=True,
        )
        print(proc.stdout, flush=True)
        code = code or proc.returncode
        found = [ln for ln in proc.stdout.splitlines() if ln.startswith("SUMMARY ")]
        rows.append(json.loads(found[-1][8:]) if found else {"kind": kind, "integrity": "-"})
    print(
        f"{'kind':<13}{'cycles/s':>10}{'trivial/s':>11}{'ratio':>8}{'by CPU':>8}"
        f"{'p50 s':>8}{'p99 s':>8}  integrity"
    )
    for r in rows:
        print(
            f"{r['kind']:<13}{r.get('cycles_s', float('nan')):>10}"
            f"{r.get('trivial_s', float('nan')):>11}{r.get('ratio', float('nan')):>8}"
            f"{r.get('cpu_ratio', float('nan')):>8}{r.get('p50', float('nan')):>8}"
            f"{r.get('p99', float('nan')):>8}  {r['integrity']}"
        )
    return code


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=180.0, help="load phase length")
    p.add_argument(
        "--kind", choices=[*KINDS, "all"], default="pairwise", help="the study's task kind"
    )
    p.add_argument("--workers", type=int, default=200, help="simulated crowdworkers")
    p.add_argument(
        "--warmup",
        type=float,
        default=30.0,
        help="unmeasured start (every worker enters), extended until the study's first "
        "round is decided (its one-off calibration)",
    )
    p.add_argument(
        "--api-seconds", type=float, default=20.0, help="trivial endpoint's measured time"
    )
    p.add_argument(
        "--slices",
        type=int,
        default=4,
        help="alternate the load and the trivial endpoint this many times, so that both "
        "are measured under the same machine conditions",
    )
    p.add_argument(
        "--rewarm", type=float, default=3.0, help="unmeasured restart of each later slice"
    )
    p.add_argument("--sqlite", action="store_true", help="embedded SQLite, eager Celery")
    p.add_argument("--gunicorn-workers", type=int, help="default 6 (PostgreSQL), 3 (SQLite)")
    p.add_argument("--worker-class", choices=["sync", "gthread"], default="sync")
    p.add_argument("--threads", type=int, default=4, help="threads per gthread worker")
    p.add_argument("--systems", type=int, default=8)
    p.add_argument(
        "--inputs",
        type=int,
        help="inputs (default: enough for the pairwise default's 84,000 annotations, 1,000 "
        "pairwise, 3,500 Likert and error spans, 28,000 ranking): open work for the whole run",
    )
    p.add_argument("--redundancy", type=int, default=3)
    p.add_argument(
        "--batch-size",
        type=int,
        help="inputs per pair per round (default: rounds of about 2,520 annotations, "
        "the pairwise default's 30)",
    )
    p.add_argument("--think-ms", type=float, default=0.0, help="mean pause before answering")
    p.add_argument(
        "--reenter", type=float, default=5.0, help="mean pause on the waiting or end page"
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--no-pg-fsync",
        dest="pg_fsync",
        action="store_false",
        help="PostgreSQL without fsync/synchronous_commit (default: durable, as in production)",
    )
    p.add_argument("--profile", metavar="DIR", help="profile the web workers into DIR")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = p.parse_args(argv)
    if args.kind != "all":
        if args.batch_size is None:
            per_batch = batch_annotations(args.kind, args.systems, args.redundancy)
            args.batch_size = max(1, round(ROUND_ANNOTATIONS / per_batch))
        if args.inputs is None:
            per_input = items_per_input(args.kind, args.systems) * args.redundancy
            args.inputs = -(-CAPACITY // per_input)
    if args.gunicorn_workers is None:
        args.gunicorn_workers = 3 if args.sqlite else 6
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.kind == "all":
        return run_kinds(sys.argv[1:] if argv is None else argv)
    try:
        return run(args)
    except KeyboardInterrupt:
        print("interrupted; everything started was stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
