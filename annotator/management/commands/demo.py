import os
import sys
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from rest_framework.authtoken.models import Token

from annotator import selectors, services
from annotator.models import Study

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
    ("adaptive_demo.jsonl", {}),
    ("ranking_demo.jsonl", {"open_links": True}),
)
#: LLMBar's expert labels let the pairwise demo carry gold checks.
DEMO_GOLD = 5


def _base_url(addr: str) -> str:
    """``http://host:port`` of a runserver address (``8123``, ``0.0.0.0:8123``, ``[::1]:80``)."""
    addr = addr.strip().removeprefix("http://").rstrip("/")
    if addr.isdigit():
        addr = f"127.0.0.1:{addr}"
    elif ":" not in addr:
        addr = f"{addr}:8000"
    host, _, port = addr.rpartition(":")
    if host in ("0.0.0.0", "", "[::]"):  # noqa: S104 - a link, not a bind: use loopback
        host = "127.0.0.1"
    return f"http://{host}:{port}"


class Command(BaseCommand):
    help = (
        "Set up the demo: database, an admin account, a pairwise, a Likert, an adaptive and a "
        f"ranking study. Links point at --addr (default: ${ADDR_ENV} or {DEFAULT_ADDR})."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--addr",
            default=os.environ.get(ADDR_ENV) or DEFAULT_ADDR,
            help="host:port the server runs on (as given to runserver).",
        )

    def handle(self, *args, addr: str, **options):
        host = _base_url(addr)
        call_command("migrate", verbosity=0)
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
        out = self.stdout.write
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
            out(f"  {host}/studies/{study.pk}/report/")
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
