"""``manage.py crowd STUDY status|publish|sync|review|bonus|pause|resume`` — the command-line
twin of the admin's Crowd panel, for scripted studies. STUDY: the study's public id or
primary key; the study must have a crowd study (admin: Crowd platforms)."""

import json

from django.core.management.base import BaseCommand, CommandError

from crowd import platforms, services
from crowd.client import CrowdError
from crowd.models import CrowdStudy


class Command(BaseCommand):
    help = "Run a study's crowd platform: status, publish, sync, review, bonus, pause, resume."

    def add_arguments(self, parser):
        parser.add_argument("study", help="The study's public id (UUID) or primary key.")
        parser.add_argument(
            "action", choices=["status", "publish", "sync", "review", "bonus", "pause", "resume"]
        )
        parser.add_argument(
            "--base-url", default="", help="publish: the address workers reach this site at."
        )
        parser.add_argument(
            "--confirm",
            action="store_true",
            help="review: carry out the proposals; bonus: pay (without it, a preview only).",
        )

    def handle(self, *args, study: str, action: str, base_url: str, confirm: bool, **options):
        crowd = self._crowd(study)
        self.platform = platforms.of(crowd)
        try:
            self.platform.refuse(action)
            result = getattr(self, f"_{action}")(crowd, base_url=base_url, confirm=confirm)
        except CrowdError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(json.dumps(result, indent=2, default=str))

    def _crowd(self, ref: str) -> CrowdStudy:
        rows = CrowdStudy.objects.select_related("study")
        found = (
            rows.filter(study__pk=int(ref)).first()
            if ref.isdigit()
            else rows.filter(study__public_id=ref).first()
            if len(ref) == 36
            else None
        )
        if found is None:
            raise CommandError(f"No crowd study for study {ref!r} (add one in the admin)")
        return found

    def _status(self, crowd, **_):
        return services.status(crowd)

    def _publish(self, crowd, base_url, **_):
        if not base_url:
            raise CommandError("publish needs --base-url (where workers reach this site)")
        self.platform.publish(crowd, base_url)
        return services.status(crowd)

    def _sync(self, crowd, **_):
        return self.platform.sync(crowd)

    def _pause(self, crowd, **_):
        self.platform.pause(crowd)
        return services.status(crowd)

    def _resume(self, crowd, **_):
        self.platform.resume(crowd)
        return services.status(crowd)

    def _review(self, crowd, confirm, **_):
        self.platform.poll(crowd)
        awaiting = list(crowd.submissions.filter(status=services.AWAITING))
        proposals = [
            {
                "submission": s.remote_id,
                "participant": s.participant_id,
                "proposal": s.proposal,
                "category": s.category,
                "why": s.reason,
            }
            for s in awaiting
        ]
        if not confirm:
            return {"proposals": proposals, "note": "nothing sent; --confirm carries them out"}
        doable = [s for s in awaiting if s.proposal in self.platform.decisions]
        result = {"proposals": proposals, "done": self.platform.decide(crowd, doable)}
        if "return" in self.platform.lacks and any(s.proposal == "return" for s in awaiting):
            result["not_sent"] = self.platform.lacks["return"]
        return result

    def _bonus(self, crowd, confirm, **_):
        preview = services.bonus_preview(crowd)
        if not confirm:
            return {**preview, "note": "nothing paid; --confirm pays"}
        entry = self.platform.bonus_pay(crowd)
        return {**preview, "state": entry.state if entry else "nothing due"}
