"""Per-request cost of the worker cycle: CPU of the web code and of the database, SQL
statements, one request at a time, in process, per task kind.

The load bench's study (adaptive, 8 systems, redundancy 3; one study per kind: pairwise,
Likert, ranking, error spans) through the production WSGI application (every middleware,
CSRF, throttles, the signed cookie, templates), ``--workers`` simulated workers taking
turns, then the end of the round (the answers that find no task, the waiting page's looks
while the round awaits its decision), and the trivial ``GET /api/studies/`` for comparison.
Per request: median and mean CPU of the web thread and of the PostgreSQL backend (from
/proc; SQLite runs in the web thread), statements and median wall time. PostgreSQL
(default: private cluster, fsync on, Redis) decides no round (no Celery worker);
``--sqlite`` is the embedded default. ``--profile FILE`` writes a cProfile of the answers.

    python bench/cycle_cost.py [--sqlite] [--kinds pairwise ...] [--cycles 1000]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlencode, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
import load  # noqa: E402 - the load bench's stack, study and page parsing


class Wsgi:
    """Calls the WSGI application the way gunicorn does, with one cookie jar per worker."""

    def __init__(self, app) -> None:
        self.app = app

    def __call__(
        self,
        method: str,
        path: str,
        *,
        cookies: dict[str, str] | None = None,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        parts = urlsplit(path)
        environ = {
            "REQUEST_METHOD": method,
            "PATH_INFO": parts.path,
            "QUERY_STRING": parts.query,
            "SERVER_NAME": load.HOST,
            "SERVER_PORT": "8000",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": load.HOST,
            "HTTP_HOST": load.HOST,
            "SCRIPT_NAME": "",
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr,
            "wsgi.version": (1, 0),
            "wsgi.multithread": False,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
        }
        if body:
            environ["CONTENT_LENGTH"] = str(len(body))
            environ["CONTENT_TYPE"] = "application/x-www-form-urlencoded"
        if cookies:
            environ["HTTP_COOKIE"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
        for key, value in (headers or {}).items():
            environ["HTTP_" + key.upper().replace("-", "_")] = value
        seen: dict[str, object] = {}

        def start_response(status, response_headers, exc_info=None):
            seen["status"] = int(status.split()[0])
            seen["headers"] = response_headers

        result = self.app(environ, start_response)
        try:
            data = b"".join(result)
        finally:
            if hasattr(result, "close"):
                result.close()  # request_finished: connection housekeeping, as in gunicorn
        head: dict[str, str] = {}
        for key, value in seen["headers"]:
            if key.lower() == "set-cookie" and cookies is not None:
                name, val, deleted = load.parse_set_cookie(value)
                if deleted:
                    cookies.pop(name, None)
                else:
                    cookies[name] = val
            else:
                head[key.lower()] = value
        return seen["status"], head, data


def backend_cpu(pid: int | None) -> float:
    """CPU seconds of a process, to the nanosecond (/proc/PID/schedstat; the tick counts of
    /proc/PID/stat are too coarse for one request)."""
    if not pid:
        return 0.0
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    except OSError:
        return 0.0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sqlite", action="store_true")
    p.add_argument("--cycles", type=int, default=1000, help="answers measured per kind")
    p.add_argument("--workers", type=int, default=50, help="workers taking turns")
    p.add_argument("--warmup", type=int, default=100, help="unmeasured answers first")
    p.add_argument(
        "--kinds",
        nargs="+",
        choices=list(load.KINDS),
        default=list(load.KINDS),
        help="task kinds measured, one study each (default: all four)",
    )
    p.add_argument("--looks", type=int, default=3, help="looks of each waiting worker")
    p.add_argument("--profile", metavar="FILE", help="cProfile of the answers into FILE")
    args = p.parse_args(argv)
    largs = load.parse_args(["--sqlite"] if args.sqlite else [])
    largs.profile = args.profile  # PostgreSQL: pg_stat_statements loaded
    stack = load.Stack(largs)
    try:
        return run(args, largs, stack)
    finally:
        from django.db import connections

        connections.close_all()
        stack.stop()


Row = tuple[float, float, int, float]  # web CPU, database CPU, statements, wall (seconds)


def run(args: argparse.Namespace, largs: argparse.Namespace, stack: load.Stack) -> int:
    if not args.sqlite:
        stack.start_postgres()
        stack.start_redis()
    stack.manage("migrate", "--noinput")
    load.django_setup(stack.env)

    from django.db import connection
    from django.test.utils import CaptureQueriesContext  # noqa: F401 - settles the import

    from config.wsgi import application

    call = Wsgi(application)
    profiler = cProfile.Profile(time.thread_time) if args.profile else None
    queries = [0]

    def counter(execute, sql, params, many, context):
        queries[0] += 1
        return execute(sql, params, many, context)

    def timed(into: dict[str, list[Row]], kind: str, measure: bool, *a, **kw):
        pid = None
        if connection.vendor == "postgresql" and connection.connection is not None:
            pid = connection.connection.info.backend_pid
        queries[0] = 0
        db0 = backend_cpu(pid)
        c0, w0 = time.thread_time(), time.perf_counter()
        prof = profiler if (measure and kind == "task-post") else None
        if prof:
            prof.enable()
        with connection.execute_wrapper(counter):
            out = call(*a, **kw)
        if prof:
            prof.disable()
        cpu, wall = time.thread_time() - c0, time.perf_counter() - w0
        if connection.vendor == "postgresql" and connection.connection is not None:
            pid = pid or connection.connection.info.backend_pid
        db = backend_cpu(pid) - db0
        if measure:
            into[kind].append((cpu, db, queries[0], wall))
        return out

    by_kind: dict[str, dict[str, list[Row]]] = {}
    for task_kind in args.kinds:
        largs.kind = task_kind
        # the first round holds every measured answer (no Celery worker decides it here)
        need = int(1.2 * (args.warmup + args.cycles)) + 3 * args.workers
        per_input = load.items_per_input(task_kind, largs.systems) * largs.redundancy
        largs.batch_size = -(-need // per_input)
        largs.inputs = max(1000, largs.batch_size + 10)
        setup = load.prepare_study(largs)
        rows: dict[str, list[Row]] = defaultdict(list)
        by_kind[task_kind] = rows
        headers = {"Authorization": f"Token {setup.api_token}", "Accept": "application/json"}

        def trivial(measure: bool, rows=rows, headers=headers) -> None:
            status, _, _ = timed(rows, "api", measure, "GET", "/api/studies/", headers=headers)
            assert status == 200, status

        cycle(args, call, timed, rows, task_kind, f"/w/{setup.public_id}/", trivial)
        print(f"[{task_kind}] measured", {k: len(v) for k, v in rows.items()}, flush=True)
    report(args, by_kind)
    busy0, total0 = load.machine_busy()
    time.sleep(1)
    busy1, total1 = load.machine_busy()
    share = (busy1 - busy0) / (total1 - total0) * (os.cpu_count() or 1)
    print(
        f"machine busy right after: {100 * share:.0f}% of {100 * (os.cpu_count() or 1)}% "
        "(this bench itself idle)"
    )
    if profiler is not None and not args.sqlite:
        with connection.cursor() as cursor:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            cursor.execute(
                "SELECT calls, total_exec_time, mean_exec_time, left(regexp_replace(query, "
                "'\\s+', ' ', 'g'), 160) FROM pg_stat_statements "
                "ORDER BY total_exec_time DESC LIMIT 20"
            )
            for calls, total, mean, q in cursor.fetchall():
                print(f"{calls:>8} calls {total:>9.0f} ms {mean:7.3f} ms/call  {q}")
    if profiler is not None:
        profiler.dump_stats(args.profile)
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out).strip_dirs()
        stats.sort_stats("cumulative").print_stats(45)
        stats.sort_stats("tottime").print_stats(30)
        print(out.getvalue())
    return 0


def cycle(args, call, timed, rows, task_kind: str, base: str, trivial) -> None:
    """``args.workers`` workers enter and answer in turn: ``args.warmup`` answers unmeasured,
    then ``args.cycles`` measured (``task-post``), each followed by the trivial request
    (``api``, the reference: measured alternately, so both see the same machine and the
    same warm process). Then the end of the round: the workers
    answer on until none has a task (``post-end``: an answer answered with the waiting
    page), and each looks again ``args.looks`` times where the page's refresh says
    (``wait-look``: the waiting page while the complete round awaits its decision, which no
    Celery worker makes here)."""
    import random

    jars = [dict() for _ in range(args.workers)]
    pages: list[load.TaskPage | None] = [None] * args.workers
    looks = [f"{base}task/"] * args.workers  # where each waiting page looks again
    rng = random.Random(1)
    for n, jar in enumerate(jars):
        status, head, _ = timed(rows, "entry", True, "GET", f"{base}?worker=cost-{n}", cookies=jar)
        assert status == 302, status
        timed(rows, "instructions", True, "GET", urlsplit(head["location"]).path, cookies=jar)
        status, _, body = timed(rows, "task-get", True, "GET", f"{base}task/", cookies=jar)
        pages[n] = load.parse_task_page(body.decode())
        assert pages[n] is not None, body[:300]
    answered = 0
    total = args.warmup + args.cycles
    # SQLite decides a round as its last answer commits (eager Celery): no end to measure
    end = total if args.sqlite else None
    while any(pages) and (end is None or answered < end):
        for n, jar in enumerate(jars):
            page = pages[n]
            if page is None or (end is not None and answered >= end):
                continue
            form = {
                "csrfmiddlewaretoken": page.csrf,
                "token": page.token,
                **load.answer_fields(task_kind, page, rng),
                "time_ms": str(rng.randint(800, 9000)),
            }
            measured = args.warmup <= answered < total
            posted = (
                "POST",
                f"{base}task/",
            )
            kw = {"cookies": jar, "body": urlencode(form).encode()}
            if answered < total:
                status, head, body = timed(rows, "task-post", measured, *posted, **kw)
                trivial(measured)
            else:  # the end of the round: only the answers that find no task are kept
                end_rows: dict[str, list[Row]] = defaultdict(list)
                status, head, body = timed(end_rows, "post", True, *posted, **kw)
            answered += 1
            html = body.decode()
            pages[n] = load.parse_task_page(html) if status == 200 else None
            if pages[n] is not None and pages[n].messages:
                raise SystemExit(f"answer refused: {pages[n].messages}")
            if pages[n] is None:
                if load.WAITING not in html:
                    raise SystemExit(f"no waiting page: {status} {html[:300]}")
                if answered <= total:
                    raise SystemExit(f"the round ended after {answered} answers")
                rows["post-end"] += end_rows["post"]
                looks[n] = load.refresh(html, 1.0, looks[n])[1]
    for _ in range(0 if args.sqlite else args.looks):
        for n, jar in enumerate(jars):  # as a browser: where the waiting page's refresh says
            status, _, body = timed(rows, "wait-look", True, "GET", looks[n], cookies=jar)
            assert status == 200 and load.WAITING in body.decode(), (status, body[:300])
            looks[n] = load.refresh(body.decode(), 1.0, looks[n])[1]


def report(args, by_kind: dict[str, dict[str, list[Row]]]) -> None:
    mode = "SQLite (embedded)" if args.sqlite else "PostgreSQL + Redis"
    print(f"\nper-request cost, {mode}, one request at a time (CPU time, not wall time)")
    head = (
        f"{'request':<14}{'n':>6}{'web CPU p50':>13}{'mean':>8}{'db CPU mean':>13}{'SQL':>6}"
        f"{'wall p50':>11}"
    )
    order = ("entry", "instructions", "task-get", "task-post", "api", "post-end", "wait-look")
    for task_kind, rows in by_kind.items():
        print(f"\n{task_kind}\n{head}")
        for name in order:
            line(name, rows.get(name, []))
    # an answer's CPU in the trivial requests measured between the same kind's answers
    pairwise = by_kind.get("pairwise")
    pair = mean_ms(pairwise["task-post"]) / mean_ms(pairwise["api"]) if pairwise else float("nan")
    print(
        f"\n{'kind':<13}{'answer ms':>10}{'trivial ms':>11}{'ratio by CPU':>14}{'SQL':>6}"
        f"{'vs pairwise':>13}{'end answer ms':>15}{'SQL':>6}{'wait look ms':>14}{'SQL':>6}"
    )
    for task_kind, rows in by_kind.items():
        post = rows["task-post"]
        cyc, triv = mean_ms(post), mean_ms(rows["api"])
        sql = mean_sql(post)
        end, look = rows.get("post-end", []), rows.get("wait-look", [])
        print(
            f"{task_kind:<13}{cyc:>10.2f}{triv:>11.2f}{triv / cyc:>14.3f}{sql:>6.1f}"
            f"{cyc / triv / pair:>13.3f}{mean_ms(end):>15.2f}{mean_sql(end):>6.1f}"
            f"{mean_ms(look):>14.2f}{mean_sql(look):>6.1f}"
        )
    print(
        "ratio by CPU: server CPU (web + database) per trivial request / per answer cycle, "
        "the trivial request measured after each answer; vs pairwise: the kind's answer "
        "against pairwise's, each in its own trivial requests "
        "[target >= 1.0, pairwise <= 11 SQL, every kind <= 1.2x pairwise]"
    )


def mean_ms(rows: list[Row]) -> float:
    return 1000 * statistics.mean(r[0] + r[1] for r in rows) if rows else float("nan")


def mean_sql(rows: list[Row]) -> float:
    return statistics.mean(r[2] for r in rows) if rows else float("nan")


def line(name: str, rows: list[Row]) -> None:
    if not rows:
        return
    web = [1000 * r[0] for r in rows]
    db = [1000 * r[1] for r in rows]
    sql = [r[2] for r in rows]
    wall = statistics.median(1000 * r[3] for r in rows)
    print(
        f"{name:<14}{len(rows):>6}{statistics.median(web):>10.2f} ms{statistics.mean(web):>8.2f}"
        f"{statistics.mean(db):>10.2f} ms{statistics.mean(sql):>6.1f}{wall:>8.2f} ms"
    )


if __name__ == "__main__":
    sys.exit(main())
