import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotator import services
from annotator.errors import ImportRejected


class Command(BaseCommand):
    help = "Import a study from a JSONL/CSV bundle or a Judge-Bench JSON file; prints its id."

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path)
        parser.add_argument("--name", help="Study name (overrides the file's).")
        parser.add_argument("--kind", choices=["pairwise", "likert"])
        parser.add_argument(
            "--config",
            type=Path,
            help="JSON file of study options (the JSONL 'study' object), for CSV.",
        )

    def handle(self, *args, path: Path, name, kind, config, **options):
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror}") from None
        overrides = {}
        if config:
            try:
                overrides = json.loads(config.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise CommandError(f"cannot read the config {config}: {exc}") from None
        overrides |= {k: v for k, v in (("name", name), ("kind", kind)) if v}
        try:
            study = services.study_import(data, filename=path.name, overrides=overrides)
        except ImportRejected as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(str(study.pk))
