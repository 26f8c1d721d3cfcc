"""Import memory benchmark: peak resident memory of one large study import.

Writes a valid study file of about ``--mb`` MiB (``--format`` jsonl, csv or judgebench;
pairwise, three systems, ~1 KiB outputs; Judge-Bench with two human labels per instance),
migrates a fresh SQLite database (``--database-url``: an empty PostgreSQL one) and imports
the file in a fresh subprocess: ``--via api`` (default) as a multipart upload to
``POST /api/studies/import/`` through Django's WSGI handler (the body streamed from disk),
``--via file`` with ``services.study_import`` (the CLI and the admin). Prints the peak
resident memory above the baseline after Django setup (``VmHWM``, reset there), its ratio to
the file size and the time. Exit status 1 when the import fails or the ratio exceeds 2.

    python bench/import_memory.py [--mb 200] [--format jsonl|csv|judgebench] [--via api|file]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SYSTEMS = ("alpha", "beta", "gamma")
WORDS = (
    "the model answers question because evidence suggests however careful reading shows "
    "that both outputs differ in tone length accuracy und größe — 日本語 ça dépend naïve"
).split()


def _paragraphs(rng: random.Random, n: int, words: int) -> list[str]:
    return [" ".join(rng.choices(WORDS, k=words)) for _ in range(n)]


def generate(path: Path, fmt: str, size: int, seed: int = 1) -> int:
    """Write a valid study file of at least ``size`` bytes; returns its number of inputs."""
    rng = random.Random(seed)
    prompts, outputs = _paragraphs(rng, 200, 40), _paragraphs(rng, 500, 150)
    n = 0
    with path.open("w", encoding="utf-8", newline="") as out:
        if fmt == "jsonl":
            out.write(json.dumps({"study": {"name": "memory", "kind": "pairwise"}}) + "\n")
        elif fmt == "csv":
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(["input_id", "input", "system", "output"])
        else:
            labels = ["model_a", "model_b", "tie"]
            out.write(
                '{"dataset": "memory", "annotations": [{"metric": "pref", "category": '
                f'"categorical", "labels_list": {json.dumps(labels)}}}], "instances": [\n'
            )
        while out.tell() < size:
            ident = f"q{n}"
            prompt = f"{rng.choice(prompts)} #{n}"
            texts = {s: f"{rng.choice(outputs)} ({s} {n})" for s in SYSTEMS}
            if fmt == "jsonl":
                out.write(json.dumps({"id": ident, "input": prompt, "outputs": texts}) + "\n")
            elif fmt == "csv":
                writer.writerows([ident, prompt, s, t] for s, t in texts.items())
            else:
                instance = {
                    "id": ident,
                    "instance": {
                        "input": prompt,
                        "output_a": texts["alpha"],
                        "output_b": texts["beta"],
                    },
                    "annotations": {"pref": {"individual_human_scores": ["model_a", "tie"]}},
                }
                out.write(("" if n == 0 else ",\n") + json.dumps(instance))
            n += 1
        if fmt == "judgebench":
            out.write("\n]}\n")
    return n


def _status(field: str) -> int | None:
    """A memory figure of this process from ``/proc/self/status``, in bytes (Linux)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _baseline() -> int:
    """Resident memory now, with the peak mark reset to it (Linux: ``clear_refs`` 5), so
    the peak read later is the import's. ``ru_maxrss`` is the fallback only: after ``fork``
    and ``exec`` it can start at the parent's resident size."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return _status("VmRSS") or 0
    except OSError:
        return _status("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _peak() -> int:
    """Peak resident memory of this process since :func:`_baseline`, in bytes."""
    return _status("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def child(path: Path, via: str) -> None:
    """Import ``path`` once in this fresh process and print one JSON line of measurements."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.handlers.wsgi import WSGIHandler
    from rest_framework.authtoken.models import Token

    from annotator import services
    from annotator.models import Annotation, Item, Output, Study

    user = User.objects.create_superuser("bench", "bench@example.org", "unused-password")
    token = Token.objects.create(user=user).key
    handler = WSGIHandler()
    size = path.stat().st_size
    boundary = "----humeval-bench-boundary"
    kind = {"kind": "pairwise"} if path.suffix == ".csv" else {}  # a CSV file names no kind
    if via == "api":  # the request body as a client sends it, kept on disk like a socket
        body = path.with_suffix(".multipart")
        with body.open("wb") as out, path.open("rb") as src:
            for field, value in kind.items():
                out.write(
                    f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"'
                    f"\r\n\r\n{value}\r\n".encode()
                )
            out.write(
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
                f'filename="{path.name}"\r\nContent-Type: application/octet-stream\r\n\r\n'.encode()
            )
            while chunk := src.read(1 << 20):
                out.write(chunk)
            out.write(f"\r\n--{boundary}--\r\n".encode())
    baseline = _baseline()
    started, cpu = time.perf_counter(), time.process_time()
    if via == "api":
        status: list[str] = []
        with body.open("rb") as stream:
            environ = {
                "REQUEST_METHOD": "POST",
                "PATH_INFO": "/api/studies/import/",
                "SCRIPT_NAME": "",
                "QUERY_STRING": "",
                "SERVER_NAME": "localhost",
                "SERVER_PORT": "80",
                "SERVER_PROTOCOL": "HTTP/1.1",
                "HTTP_HOST": "localhost",
                "REMOTE_ADDR": "127.0.0.1",
                "HTTP_AUTHORIZATION": f"Token {token}",
                "CONTENT_TYPE": f"multipart/form-data; boundary={boundary}",
                "CONTENT_LENGTH": str(body.stat().st_size),
                "wsgi.input": stream,
                "wsgi.url_scheme": "http",
                "wsgi.errors": sys.stderr,
            }
            answer = b"".join(handler(environ, lambda s, headers, *exc: status.append(s)))
        if not status[0].startswith("201"):
            print(json.dumps({"error": f"{status[0]}: {answer[:2000].decode()}"}))
            sys.exit(1)
    else:
        with path.open("rb") as data:
            services.study_import(data, filename=path.name, overrides=kind)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    peak = _peak()
    study = Study.objects.get()
    print(
        json.dumps(
            {
                "bytes": size,
                "baseline": baseline,
                "peak": peak,
                "seconds": elapsed,
                "cpu": cpu,
                "inputs": study.inputs.count(),
                "outputs": Output.objects.count(),
                "items": Item.objects.count(),
                "annotations": Annotation.objects.count(),
            }
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=200, help="file size in MiB (default 200)")
    parser.add_argument("--format", choices=("jsonl", "csv", "judgebench"), default="jsonl")
    parser.add_argument("--via", choices=("api", "file"), default="api")
    parser.add_argument("--database-url", help="an empty database (default: SQLite in a temp dir)")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.via)
        return 0
    suffix = {"jsonl": ".jsonl", "csv": ".csv", "judgebench": ".json"}[args.format]
    with tempfile.TemporaryDirectory(prefix="humeval-import-") as tmp:
        path = Path(tmp) / f"memory{suffix}"
        started = time.perf_counter()
        n = generate(path, args.format, int(args.mb * 1024 * 1024))
        size = path.stat().st_size
        took = time.perf_counter() - started
        print(f"generated {path.name}: {size / 2**20:.1f} MiB, {n} inputs ({took:.1f} s)")
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": args.database_url or f"sqlite:///{tmp}/bench.sqlite3",
            "HUMEVAL_IMPORT_MAX_BYTES": str(max(size, 200 * 1024 * 1024)),
            "DJANGO_SECRET_KEY": os.environ.get("DJANGO_SECRET_KEY", "bench-" + "x" * 50),
        }
        env.pop("CELERY_BROKER_URL", None)  # decisions run eagerly; no broker needed
        manage = [sys.executable, str(ROOT / "manage.py")]
        subprocess.run([*manage, "migrate", "-v", "0"], env=env, cwd=ROOT, check=True)
        run = subprocess.run(
            [sys.executable, __file__, "--child", str(path), "--via", args.via],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        lines = run.stdout.strip().splitlines()
        if run.returncode or not lines:
            print(run.stdout, run.stderr, sep="\n")
            return 1
        result = json.loads(lines[-1])
        if "error" in result:
            print("import failed:", result["error"])
            return 1
    used = result["peak"] - result["baseline"]
    ratio = used / result["bytes"]
    print(
        f"{args.format} via {args.via}: {result['bytes'] / 2**20:.1f} MiB file, "
        f"{result['inputs']} inputs, {result['outputs']} outputs, {result['items']} items, "
        f"{result['annotations']} labels"
    )
    print(
        f"peak RSS above baseline {used / 2**20:.0f} MiB = {ratio:.2f}x the file "
        f"(baseline {result['baseline'] / 2**20:.0f} MiB); {result['seconds']:.1f} s "
        f"({result['cpu']:.1f} s CPU)"
    )
    verdict = "PASS" if ratio <= 2 else "FAIL"
    print(f"target at most 2.00x: {verdict}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
