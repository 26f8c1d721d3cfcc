from django.core.management.base import BaseCommand, CommandError

from annotator.invites import MAX_INVITES, WORKER_ID, invite_links, numbered_workers
from annotator.models import Study


class Command(BaseCommand):
    help = (
        "Print a signed invitation link per worker id (lab studies): name the workers "
        "(--workers a,b,c) or ask for numbered ones (--count 20 --prefix lab). The study's "
        "admin page makes the same links (Invitation links)."
    )

    def add_arguments(self, parser):
        parser.add_argument("study", type=int)
        parser.add_argument("--workers", help="Comma-separated worker ids.")
        parser.add_argument("--count", type=int, help="Make this many numbered worker ids.")
        parser.add_argument("--prefix", default="worker", help="Of numbered ids (default worker).")
        parser.add_argument("--host", default="http://127.0.0.1:8000")

    def handle(self, *args, study, workers, count, prefix, host, **options):
        try:
            study_obj = Study.objects.get(pk=study)
        except Study.DoesNotExist:
            raise CommandError(f"no study with id {study}") from None
        if (workers is None) == (count is None):
            raise CommandError("give --workers a,b,c or --count N (one of the two)")
        if count is not None:
            if not 1 <= count <= MAX_INVITES:
                raise CommandError(f"--count must be between 1 and {MAX_INVITES}")
            ids = numbered_workers(prefix, count)
        else:
            ids = [w for w in (w.strip() for w in workers.split(",")) if w]
        bad = [w for w in ids if not WORKER_ID.fullmatch(w)]
        if bad:
            raise CommandError(
                f"not a worker id: {bad[0]!r} (letters, digits and . _ @ + -, at most 100)"
            )
        for worker, link in invite_links(study_obj, ids, host.rstrip("/")):
            self.stdout.write(f"{worker}\t{link}")
