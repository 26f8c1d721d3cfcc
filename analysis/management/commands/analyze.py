import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from analysis import selectors
from analysis.render import render_html, render_text
from annotator.models import Study


class Command(BaseCommand):
    help = "Print a study's report (reliability, win rates, human vs judge, ...) as text or JSON."

    def add_arguments(self, parser):
        parser.add_argument("study", type=int, help="Study id.")
        parser.add_argument("--json", action="store_true", help="Print the report as JSON.")
        parser.add_argument(
            "--include-flagged",
            action="store_true",
            help="Keep labels of workers blocked after gold checks (excluded by default).",
        )
        parser.add_argument(
            "--threshold", type=float, default=0.1, help="Soft-vote tie threshold (default 0.1)."
        )
        parser.add_argument("--n-boot", type=int, default=1000, help="Bootstrap resamples.")
        parser.add_argument("--seed", type=int, default=0, help="Bootstrap seed.")
        parser.add_argument(
            "--interval", action="store_true", help="Also report interval-level alpha."
        )
        parser.add_argument(
            "--worker-models",
            action="store_true",
            help="Also report Dawid-Skene and MACE labels with each worker's reliability.",
        )
        parser.add_argument("--html", metavar="OUT", help="Also write a standalone HTML report.")

    def handle(self, *args, study, **options):
        try:
            study_obj = Study.objects.get(pk=study)
        except Study.DoesNotExist:
            raise CommandError(f"no study with id {study}") from None
        try:
            report = selectors.study_report(
                study_obj,
                threshold=options["threshold"],
                include_flagged=options["include_flagged"],
                n_boot=options["n_boot"],
                seed=options["seed"],
                interval=options["interval"],
                worker_models=options["worker_models"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if options["html"]:
            Path(options["html"]).write_text(render_html(report), "utf-8")
        if options["json"]:
            text = json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
        else:
            text = render_text(report)
        self.stdout.write(text, ending="")
