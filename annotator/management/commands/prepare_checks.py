"""``python manage.py prepare_checks STUDY --gold N --qualification N``."""

from django.core.management.base import BaseCommand, CommandError

from annotator import services
from annotator.errors import ServiceError
from annotator.models import Study


class Command(BaseCommand):
    help = (
        "Turn a pairwise study's items with a known answer (per-input 'gold', Judge-Bench "
        "'majority_human') into gold checks shown among the work and a qualification test "
        "taken before it. Test questions leave the work pool."
    )

    def add_arguments(self, parser):
        parser.add_argument("study", type=int, help="Study id.")
        parser.add_argument(
            "--qualification", type=int, default=0, metavar="N", help="Questions in the test."
        )
        parser.add_argument("--gold", type=int, default=0, metavar="N", help="Gold checks.")
        parser.add_argument("--seed", type=int, help="Seed of the random choice of items.")

    def handle(self, *args, study, qualification, gold, seed, **options):
        if qualification < 0 or gold < 0:
            raise CommandError("--gold and --qualification must not be negative")
        if not qualification and not gold:
            raise CommandError("nothing asked for: give --gold N and/or --qualification N")
        try:
            study_obj = Study.objects.get(pk=study)
        except Study.DoesNotExist:
            raise CommandError(f"no study with id {study}") from None
        try:
            test = services.study_prepare_checks(
                study_obj, n_gold=gold, n_qualification=qualification, seed=seed
            )
        except ServiceError as exc:
            raise CommandError(f"nothing was made: {exc.message}") from None
        made = [f"{gold} gold checks"] if gold else []
        if test is not None:
            made.append(
                f"a qualification test of {qualification} questions "
                f"({test.pass_threshold} correct to pass)"
            )
        self.stdout.write(f"{study_obj.name}: made {' and '.join(made)}.")
