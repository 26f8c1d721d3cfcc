import os
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from rest_framework.authtoken.models import Token

from annotator import services
from annotator.models import Study

DEMO_DIR = Path(settings.BASE_DIR) / "demo"
DEMO_FILES = (
    (
        "llmbar_natural.judgebench.json",
        {
            "name": "Demo: which response is better? (LLMBar, pairwise)",
            "redundancy": 3,
            "question": "Which response follows the instruction better?",
            "open_links": True,
        },
    ),
    ("likert_demo.jsonl", {"open_links": True}),
)
#: LLMBar's expert labels let the pairwise demo carry gold checks.
DEMO_GOLD = 5


class Command(BaseCommand):
    help = "Set up the demo: database, an admin account, a pairwise and a Likert study."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="http://127.0.0.1:8000")

    def handle(self, *args, host: str, **options):
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
                if study.kind == "pairwise":
                    services.study_prepare_checks(study, n_gold=DEMO_GOLD, seed=0)
            studies.append(study)
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
