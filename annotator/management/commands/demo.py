import errno
import os
import socket
import sys
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from rest_framework.authtoken.models import Token

from annotator import selectors, services
from annotator.models import QualificationTest, Study

DEMO_DIR = Path(settings.BASE_DIR) / "demo"
#: The address ``./run demo`` serves (``runserver`` takes the same variable).
ADDR_ENV = "HUMEVAL_DEMO_ADDR"
DEFAULT_ADDR = "127.0.0.1:8000"
DEMO_FILES = (
    (
        "llmbar_natural.judgebench.json",
        {
            "name": "Demo: which response is better? (LLMBar, pairwise)",
            "redundancy": 3,
            "question": "Which response follows the instruction better?",
            # the file's prompt is written for an AI judge; workers get instructions for people
            "instructions": (DEMO_DIR / "pairwise_instructions.md").read_text(encoding="utf-8"),
            "open_links": True,
        },
    ),
    ("likert_demo.jsonl", {"open_links": True}),
    ("esa_demo.jsonl", {"open_links": True}),
    ("adaptive_demo.jsonl", {}),
    ("ranking_demo.jsonl", {"open_links": True}),
)
#: LLMBar's expert labels let the pairwise demo carry gold checks.
DEMO_GOLD = 5


def _split(addr: str) -> tuple[str, int]:
    """``(host, port)`` of a runserver address (``8123``, ``0.0.0.0:8123``, ``[::1]:80``)."""
    addr = addr.strip().removeprefix("http://").rstrip("/")
    if addr.isdigit():
        addr = f"127.0.0.1:{addr}"
    elif ":" not in addr or addr.endswith("]"):
        addr = f"{addr}:8000"
    host, _, port = addr.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise CommandError(f"not a host:port address: {addr!r}")
    return host, int(port)


def _base_url(addr: str) -> str:
    """``http://host:port`` of a runserver address (``8123``, ``0.0.0.0:8123``, ``[::1]:80``)."""
    host, port = _split(addr)
    if host in ("0.0.0.0", "", "[::]"):  # noqa: S104 - a link, not a bind: use loopback
        host = "127.0.0.1"
    return f"http://{host}:{port}"


def port_in_use(addr: str) -> bool:
    """Whether a server already listens where ``addr`` would be served."""
    host, port = _split(addr)
    host = host.strip("[]") or "127.0.0.1"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def reset_demo() -> int:
    """Delete the demo's studies (with their labels, workers' participations, rounds and
    qualification tests) so that the next run imports them afresh; returns how many."""
    studies = Study.objects.filter(source__startswith="demo/")
    tests = list(studies.exclude(qualification=None).values_list("qualification", flat=True))
    with transaction.atomic():
        count = studies.count()
        studies.delete()
        QualificationTest.objects.filter(pk__in=tests, studies__isnull=True).delete()
    return count


class Command(BaseCommand):
    help = (
        "Set up the demo: database, an admin account and a study of each of the four kinds "
        "(pairwise, Likert, error spans, ranking) plus an adaptive pairwise study. Links "
        f"point at --addr (default: ${ADDR_ENV} or {DEFAULT_ADDR}). --reset starts the demo's "
        "studies afresh."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--addr",
            default=os.environ.get(ADDR_ENV) or DEFAULT_ADDR,
            help="host:port the server runs on (as given to runserver).",
        )
        parser.add_argument(
            "--check-port",
            action="store_true",
            help="Stop before anything else if a server already listens on --addr.",
        )
        parser.add_argument(
            "--reset",
            action="store_true",
            help="Delete the demo's studies (and their labels) and import them afresh.",
        )

    def handle(self, *args, addr: str, check_port: bool, reset: bool, **options):
        host = _base_url(addr)
        if check_port and port_in_use(addr):
            raise CommandError(
                f"{addr} is already in use (another server, or an earlier demo still "
                f"running). Stop it, or pick another address: {ADDR_ENV}=127.0.0.1:8123 "
                "./run demo"
            )
        out = self.stdout.write
        out("Preparing the database…")
        call_command("migrate", verbosity=0)
        if reset:
            out(f"Reset: deleted {reset_demo()} demo studies and their labels.")
        user_model = get_user_model()
        password = os.environ.get("HUMEVAL_DEMO_PASSWORD", "demo-admin")
        admin = user_model.objects.filter(username="admin").first()
        if admin is None:
            admin = user_model.objects.create_superuser("admin", "admin@example.org", password)
        token, _ = Token.objects.get_or_create(user=admin)
        studies = []
        for filename, overrides in DEMO_FILES:
            study = Study.objects.filter(source=f"demo/{filename}").first()
            if study is None:
                out(f"Importing demo/{filename}…")
                study = services.study_import(
                    (DEMO_DIR / filename).read_bytes(),
                    filename=filename,
                    overrides={**overrides, "source": f"demo/{filename}"},
                    owner=admin,
                )
                if study.collection != "adaptive" and selectors.has_known_answers(study):
                    services.study_prepare_checks(study, n_gold=DEMO_GOLD, seed=0)
            studies.append(study)
        adaptive = next(s for s in studies if s.collection == "adaptive")
        out("")
        out("The demo is ready. Open a worker link in your browser (any worker id works):")
        for study in studies:
            out(f"  {study.name}")
            out(f"    {host}/w/{study.public_id}/?worker=demo-worker-1")
        out("")
        out(f"Researchers: {host}/admin/  (user 'admin', password '{password}')")
        out(
            f"Labels:      curl -H 'Authorization: Token {token.key}' "
            f"'{host}/api/studies/{studies[0].pk}/annotations/?format=csv'"
        )
        out(f"API docs:    {host}/api/docs/")
        out("")
        out("Reports (log in as admin first):")
        for study in studies:
            out(f"  {study.name}")
            out(f"    {host}/studies/{study.pk}/report/")
        out("")
        out("The adaptive study works in rounds. Let a simulated crowd run them (in another")
        out("terminal, or before starting the server), then watch the rounds and the decided")
        out("order of the four systems on its protocol page:")
        python = os.path.relpath(sys.executable) if sys.executable else "python"
        out(f"  {python} manage.py simulate_crowd {adaptive.pk} --until-done")
        out(f"  {host}/studies/{adaptive.pk}/protocol/")
        others = [s for s in studies if s.collection != "adaptive"]
        out("Any other study can be answered the same way, e.g. the ranking of conversations:")
        out(f"  {python} manage.py simulate_crowd {others[-1].pk}")
        out("")
        out("Start again from fresh demo studies (labels deleted): ./run demo --reset")
