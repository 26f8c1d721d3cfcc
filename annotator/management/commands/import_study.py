import json
from pathlib import Path

from django.contrib.auth import get_user_model
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
        parser.add_argument(
            "--researcher",
            metavar="USERNAME",
            help="Name this user a researcher of the new study (only researchers of a study, "
            "and superusers, see it).",
        )

    def handle(self, *args, path: Path, name, kind, config, researcher, **options):
        owner = None
        if researcher:
            try:
                owner = get_user_model().objects.get_by_natural_key(researcher)
            except get_user_model().DoesNotExist:
                raise CommandError(f"no user named {researcher!r}") from None
        overrides = {}
        if config:
            try:
                overrides = json.loads(config.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise CommandError(f"cannot read the config {config}: {exc}") from None
            if not isinstance(overrides, dict):
                raise CommandError(f"the config {config} must hold one JSON object")
        overrides |= {k: v for k, v in (("name", name), ("kind", kind)) if v}
        try:
            # the open file, not its bytes: one above the size limit is refused unread
            with path.open("rb") as data:
                study = services.study_import(
                    data, filename=path.name, overrides=overrides, owner=owner
                )
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror}") from None
        except ImportRejected as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(str(study.pk))
