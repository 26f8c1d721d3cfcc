import json
import tempfile
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

import kinds
from annotator import services
from annotator.errors import ImportRejected


class Command(BaseCommand):
    help = (
        "Import a study from a JSONL/CSV bundle, a Judge-Bench JSON file or a Hugging Face "
        "dataset (a save_to_disk directory, a Parquet file, a Hub-layout directory, "
        "hub:owner/name, or any of these with --map); prints its id."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", help="The file, a dataset directory or hub:owner/name.")
        parser.add_argument(
            "--map",
            dest="columns",
            metavar="FIELD=COLUMN,...",
            help="Read the source as a Hugging Face dataset, its columns mapped to the bundle's "
            "fields: id, input, reference, priority, gold, outputs.<system>, metadata.<key>.",
        )
        parser.add_argument("--split", help="The dataset split to read (default: train).")
        parser.add_argument("--name", help="Study name (overrides the file's).")
        parser.add_argument("--kind", choices=kinds.NAMES)
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

    def handle(self, *args, path: str, name, kind, config, researcher, columns, split, **options):
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
            if columns is not None or split or _is_dataset(path):
                study = _import_dataset(path, columns, split, overrides, owner)
            else:
                # the open file, not its bytes: one above the size limit is refused unread
                with Path(path).open("rb") as data:
                    study = services.study_import(
                        data, filename=Path(path).name, overrides=overrides, owner=owner
                    )
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
        except ImportRejected as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(str(study.pk))


def _is_dataset(path: str) -> bool:
    from formats.hf import HUB_PREFIX

    p = Path(path)
    return path.startswith(HUB_PREFIX) or p.is_dir() or p.suffix.lower() == ".parquet"


def _import_dataset(path: str, columns: str | None, split: str | None, overrides, owner):
    """The dataset's rows as a JSONL bundle in a temporary file (streamed, row by row), then
    the ordinary import of that bundle."""
    from formats import hf

    try:
        mapping = hf.parse_map(columns)
        rows, names, title = hf.open_rows(path, split)
        records = hf.records(rows, mapping, names)
    except ImportError as exc:
        raise CommandError(str(exc)) from None
    except ValueError as exc:  # MapError too: nothing read, nothing written
        raise CommandError(str(exc)) from None
    with tempfile.TemporaryFile(suffix=".jsonl") as bundle:
        hf.write_bundle(bundle, records, {"name": title})
        bundle.seek(0)
        return services.study_import(
            bundle, filename=f"{title}.jsonl", overrides=overrides, owner=owner
        )
