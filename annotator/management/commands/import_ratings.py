from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotator import services
from annotator.errors import ImportRejected
from annotator.models import Study


class Command(BaseCommand):
    help = "Import metric or LLM-judge ratings (JSONL or CSV) into a study; see docs."

    def add_arguments(self, parser):
        parser.add_argument("study", type=int)
        parser.add_argument("path", type=Path)
        parser.add_argument("--judge", default="", help="Judge name for rows that have none.")

    def handle(self, *args, study, path, judge, **options):
        try:
            study_obj = Study.objects.get(pk=study)
        except Study.DoesNotExist:
            raise CommandError(f"no study with id {study}") from None
        try:
            # the open file, not its bytes: one above the size limit is refused unread
            with path.open("rb") as data:
                count = services.judge_ratings_import(
                    study_obj, data, filename=path.name, judge=judge
                )
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
        except ImportRejected as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"{count} ratings imported")
