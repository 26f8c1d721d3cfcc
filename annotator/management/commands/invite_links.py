from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from annotator.invites import invite_token
from annotator.models import Study


class Command(BaseCommand):
    help = "Print a signed invitation link per worker id (lab studies)."

    def add_arguments(self, parser):
        parser.add_argument("study", type=int)
        parser.add_argument("--workers", required=True, help="Comma-separated worker ids.")
        parser.add_argument("--host", default="http://127.0.0.1:8000")

    def handle(self, *args, study, workers, host, **options):
        try:
            study_obj = Study.objects.get(pk=study)
        except Study.DoesNotExist:
            raise CommandError(f"no study with id {study}") from None
        for worker in filter(None, (w.strip() for w in workers.split(","))):
            path = reverse(
                "annotator:invite", args=[study_obj.public_id, invite_token(study_obj, worker)]
            )
            self.stdout.write(f"{worker}\t{host}{path}")
