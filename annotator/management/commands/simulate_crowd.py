"""``python manage.py simulate_crowd STUDY``: simulated workers answer through the services."""

from django.core.management.base import BaseCommand, CommandError

from annotator.models import Study
from annotator.simulated_crowd import PER_WORKER, crowd_run


class Command(BaseCommand):
    help = (
        "Let simulated workers answer a study through the same services the worker pages "
        "call, from a seeded model of the truth (Input.metadata['truth'], else the items' "
        "known answers, else at random). On an adaptive study the protocol's rounds run as "
        "with people; see annotator/simulated_crowd.py."
    )

    def add_arguments(self, parser):
        parser.add_argument("study", type=int, help="Study id.")
        parser.add_argument("--workers", type=int, default=20, help="Crowd size (default 20).")
        parser.add_argument("--seed", type=int, default=0, help="Seed of every random draw.")
        parser.add_argument(
            "--until-done",
            action="store_true",
            help="Workers come back until no work is left (the adaptive study is decided, or "
            f"every item is complete); otherwise each gives at most {PER_WORKER} answers.",
        )
        parser.add_argument("--max-answers", type=int, help="Stop after this many answers.")
        parser.add_argument(
            "--wait",
            type=float,
            default=60.0,
            help="With a separate Celery worker: seconds to wait for a round's decision.",
        )

    def handle(self, *args, study, workers, seed, until_done, max_answers, wait, **options):
        if workers < 1:
            raise CommandError("--workers must be at least 1")
        if max_answers is not None and max_answers < 0:
            raise CommandError("--max-answers must not be negative")
        try:
            study_obj = Study.objects.get(pk=study)
        except Study.DoesNotExist:
            raise CommandError(f"no study with id {study}") from None
        report = crowd_run(
            study_obj,
            workers=workers,
            seed=seed,
            until_done=until_done,
            max_answers=max_answers,
            wait_seconds=wait,
        )
        out = self.stdout.write
        out(
            f"{report.answers} answers from {report.workers} simulated workers "
            f"in '{study_obj.name}' ({report.stopped})."
        )
        if report.qualification_answers:
            out(f"{report.qualification_answers} qualification answers given.")
        if report.failed:
            out(f"{len(report.failed)} failed the qualification test.")
        if report.blocked:
            out(f"{len(report.blocked)} were blocked after missed gold checks.")
        if report.random_answers:
            out(f"{report.random_answers} answers were random: no truth known for those items.")
        if study_obj.collection == "adaptive":
            out(f"Rounds and decisions: /studies/{study_obj.pk}/protocol/")
        out(f"Report: /studies/{study_obj.pk}/report/")
