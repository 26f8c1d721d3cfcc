import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from rest_framework.exceptions import ValidationError

from annotator.errors import NoJudgeBenchForm
from annotator.exports import export_chunks
from annotator.filters import LabelFilter
from annotator.models import Study
from annotator.selectors import annotations_for_export, export_rows, study_settings


class Command(BaseCommand):
    help = (
        "Write a study's labels with provenance as CSV, JSON Lines or JSON, as a Judge-Bench "
        "dataset, or as a Hugging Face dataset (--format hf DIR)."
    )

    def create_parser(self, prog_name, subcommand, **kwargs):
        """Options and arguments in any order: ``STUDY --format hf DIR``."""
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.parse_args = parser.parse_intermixed_args
        return parser

    def add_arguments(self, parser):
        parser.add_argument("study", type=int, help="Study id.")
        parser.add_argument(
            "--format", choices=["csv", "jsonl", "json", "judgebench", "hf"], default="csv"
        )
        parser.add_argument("directory", nargs="?", help="With --format hf: the directory.")
        parser.add_argument("--output", "-o", help="File to write (default: standard output).")
        parser.add_argument(
            "--push-to-hub",
            metavar="REPO",
            help="With --format hf: also push the dataset and its card to this Hub repository.",
        )
        for name in LabelFilter.base_filters:
            parser.add_argument(f"--{name.replace('_', '-')}", dest=f"filter_{name}")

    def handle(self, *args, study, format, output, directory, push_to_hub, **options):
        try:
            study_obj = Study.objects.get(pk=study)
        except Study.DoesNotExist:
            raise CommandError(f"no study with id {study}") from None
        if format != "hf" and (directory or push_to_hub):
            raise CommandError("a directory and --push-to-hub go with --format hf")
        data = {
            k.removeprefix("filter_"): v
            for k, v in options.items()
            if k.startswith("filter_") and v is not None
        }
        filterset = LabelFilter(data, queryset=annotations_for_export(study_obj))
        if not filterset.is_valid():
            raise CommandError(f"bad filter: {filterset.errors.as_text()}")
        try:
            if format == "hf":
                return self._hf(study_obj, filterset.qs, directory or output, push_to_hub)
            try:
                chunks = export_chunks(study_obj, format, filterset.qs)
            except NoJudgeBenchForm as exc:
                raise CommandError(exc.message) from None
            out = open(output, "w", encoding="utf-8", newline="") if output else sys.stdout
            try:
                for chunk in chunks:
                    out.write(chunk)
            finally:
                if output:
                    out.close()
        except ValidationError as exc:
            raise CommandError(f"bad filter: {exc.detail}") from None

    def _hf(self, study: Study, annotations, directory: str | None, repo: str | None) -> None:
        from formats import hf

        if not directory:
            raise CommandError("--format hf needs a directory: export_labels STUDY --format hf DIR")
        target = Path(directory)
        if target.exists() and any(target.iterdir()):
            raise CommandError(f"{target} is not empty; name a new or empty directory")
        try:
            hf.require()
        except ImportError as exc:
            raise CommandError(str(exc)) from None
        if not annotations.exists():
            # datasets.load_dataset cannot read back a split of no rows
            raise CommandError(
                f"study {study.pk} has no labels to export (none yet, or none match the "
                "filters); a Hugging Face dataset needs at least one. Nothing was written."
            )
        data = hf.save_labels(
            export_rows(annotations.iterator(chunk_size=2000), texts=True),
            target,
            study_settings(study),
            study.bound_kind().export_types(),
        )
        if repo:  # needs the network and a Hub token (HF_TOKEN); not exercised by the tests
            hf.push_labels(data, repo, (target / "README.md").read_text(encoding="utf-8"))
        self.stderr.write(f"wrote {len(data)} labels to {target}")
