import sys

from django.core.management.base import BaseCommand, CommandError
from rest_framework.exceptions import ValidationError

from annotator.filters import LabelFilter
from annotator.models import Study
from annotator.renderers import csv_text, jsonl_lines
from annotator.selectors import annotations_for_export, label_rows


class Command(BaseCommand):
    help = "Write a study's labels with provenance as CSV, JSON Lines or JSON."

    def add_arguments(self, parser):
        parser.add_argument("study", type=int, help="Study id.")
        parser.add_argument("--format", choices=["csv", "jsonl", "json"], default="csv")
        parser.add_argument("--output", "-o", help="File to write (default: standard output).")
        for name in LabelFilter.base_filters:
            parser.add_argument(f"--{name.replace('_', '-')}", dest=f"filter_{name}")

    def handle(self, *args, study, format, output, **options):
        try:
            study_obj = Study.objects.get(pk=study)
        except Study.DoesNotExist:
            raise CommandError(f"no study with id {study}") from None
        data = {
            k.removeprefix("filter_"): v
            for k, v in options.items()
            if k.startswith("filter_") and v is not None
        }
        filterset = LabelFilter(data, queryset=annotations_for_export(study_obj))
        if not filterset.is_valid():
            raise CommandError(f"bad filter: {filterset.errors.as_text()}")
        try:
            rows = label_rows(filterset.qs.iterator(chunk_size=2000))
            if format == "csv":
                criteria = list(study_obj.criteria.values_list("name", flat=True))
                chunks = csv_text(rows, criteria)
            elif format == "jsonl":
                chunks = jsonl_lines(rows)
            else:
                chunks = _json_array(rows)
            out = open(output, "w", encoding="utf-8", newline="") if output else sys.stdout
            try:
                for chunk in chunks:
                    out.write(chunk)
            finally:
                if output:
                    out.close()
        except ValidationError as exc:
            raise CommandError(f"bad filter: {exc.detail}") from None


def _json_array(rows):
    import json

    yield "["
    for i, row in enumerate(rows):
        yield ("," if i else "") + "\n" + json.dumps(row, ensure_ascii=False)
    yield "\n]\n"
