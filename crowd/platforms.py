"""The one place a crowd study's platform is looked at: :func:`of` gives the platform's
adapter (Prolific or MTurk) with the same operations — publish, pause, resume, sync,
add places, poll, decide, bonuses — and what the platform lacks, refused with a reason.

Prolific's adapter hands each operation to :mod:`crowd.services` unchanged. MTurk's runs the
same protocol with MTurk's calls (:mod:`crowd.mturk`): the HIT is the remote study (live
from its creation: publishing creates it), its assignments are the places, added as rounds
open; it expires when the study is done; assignments are reviewed from the same evidence and
bonuses sent one per assignment. Every call goes through the same ledger
(:func:`crowd.services._ledgered`) and carries MTurk's ``UniqueRequestToken`` where MTurk
takes one, so a retried call never spends twice.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone

from annotator import services as annotator_services

from . import mturk, services
from .client import CrowdError
from .models import CrowdStudy, LedgerEntry, Submission


class Platform:
    """Prolific: every operation as :mod:`crowd.services` does it."""

    name = "prolific"
    #: Actions this platform does not have, with the reason shown when one is asked for.
    lacks: dict[str, str] = {}
    #: The review decisions the platform can carry out.
    decisions: tuple[str, ...] = ("approve", "reject", "return")
    #: Where the platform's credentials come from when none is set on the crowd study.
    credentials = "not set (HUMEVAL_PROLIFIC_TOKEN is used)"

    def refuse(self, action: str) -> None:
        if action in self.lacks:
            raise CrowdError(self.lacks[action])

    def publish(self, crowd: CrowdStudy, base_url: str) -> None:
        services.publish(crowd, base_url)

    def pause(self, crowd: CrowdStudy) -> None:
        services.transition(crowd, "PAUSE")

    def resume(self, crowd: CrowdStudy) -> None:
        services.transition(crowd, "START")

    def sync(self, crowd: CrowdStudy) -> dict:
        return services.sync(crowd)

    def add_places(self, crowd: CrowdStudy, extra: int) -> int:
        return services.add_places(crowd, extra)

    def poll(self, crowd: CrowdStudy) -> int:
        return services.poll(crowd)

    def decide(self, crowd: CrowdStudy, subs) -> dict:
        return services.decide(crowd, subs)

    def bonus_pay(self, crowd: CrowdStudy) -> LedgerEntry | None:
        return services.bonus_pay(crowd)


# --- MTurk -----------------------------------------------------------------------------------
#: Builds the boto3 MTurk client of a crowd study (tests swap it for a Stubber's or a
#: stand-in). Credentials: boto3's own chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY).
mturk_client_factory: Callable[[CrowdStudy], Any] = lambda crowd: mturk.client(  # noqa: E731
    sandbox=mturk.sandbox()
)

#: MTurk's assignment statuses as the review step names them (Prolific's words).
MTURK_STATUS = {"Submitted": services.AWAITING, "Approved": "APPROVED", "Rejected": "REJECTED"}
#: MTurk forgets a UniqueRequestToken after 24 hours: a call first tried longer ago than
#: this is not sent again by itself (it could be done twice); the researcher settles it.
TOKEN_LIFE = timedelta(hours=23)
#: MTurk cannot extend a HIT made with fewer than 10 assignments to 10 or more.
MTURK_TEN = 10


class MTurk(Platform):
    name = "mturk"
    lacks = {
        "pause": "MTurk has no pause: a HIT is open from its creation until it expires "
        "(it expires by itself when the study is done).",
        "resume": "MTurk has no resume: the HIT stays open until the study is done.",
        "hooks": "MTurk sends no hooks here: submissions are read by polling "
        "(Read submissions, or the periodic sync).",
        "return": "MTurk has no return: approve or reject these assignments (MTurk approves "
        "an assignment left unreviewed by itself after the HIT's auto-approval delay).",
    }
    decisions = ("approve", "reject")
    credentials = "none here: boto3 reads AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"

    def __init__(self, client: Any = None):
        self._client = client

    def client(self, crowd: CrowdStudy):
        return self._client or mturk_client_factory(crowd)

    # the HIT and its assignments
    def publish(self, crowd: CrowdStudy, base_url: str) -> None:
        """Create the HIT (live at once); when it exists, follow the protocol's places."""
        if crowd.remote_id:
            self.sync(crowd)
            return
        self.create(crowd, base_url)

    def create(self, crowd: CrowdStudy, base_url: str) -> CrowdStudy:
        """The study's HIT, once, with the first round's assignments within the budget.
        A create whose answer was lost is found again: the retry carries the same
        UniqueRequestToken and MTurk answers HitAlreadyExists naming the HIT (or the HIT
        is looked up by its RequesterAnnotation)."""
        if crowd.remote_id:
            return crowd
        client = self.client(crowd)
        minutes, reward = crowd.terms()
        places = services.wanted_places(crowd)
        if places < 1:
            raise CrowdError(
                "No assignment to put on MTurk: no work released yet, or the money budget "
                "pays for none"
            )
        study = crowd.study

        def call(detail: dict) -> dict:
            hit = mturk.hit_create(
                client,
                study,
                base_url,
                reward=Decimal(reward) / 100,
                assignments=places,
                minutes=minutes,
                exclude_qualification=list(crowd.exclude_groups or []),
            )
            if hit.get("already"):
                found = mturk.HIT_ID.search(hit.get("message", ""))
                hit_id = found.group(0) if found else mturk.hit_find(client, study)
                if not hit_id:  # failed: the next run asks again with the same token
                    raise CrowdError("MTurk says the HIT exists but it is not found yet")
                hit = mturk.hit_get(client, hit_id)  # made by an earlier try: as it was made
            detail["assignments"] = hit.get("MaxAssignments") or places
            return {"HITId": hit.get("HITId", ""), "MaxAssignments": detail["assignments"]}

        key = f"create:{crowd.pk}"
        self._stale(key)
        entry = services._ledgered(
            crowd, "create", key, call, detail={"assignments": places, "reward_cents": reward}
        )
        answer = entry.detail.get("answer") or {}
        if not answer.get("HITId"):
            raise CrowdError("MTurk made no HIT, or it cannot be found: check the ledger")
        crowd.remote_id, crowd.remote_status = answer["HITId"], "ACTIVE"
        crowd.places = answer.get("MaxAssignments") or places
        crowd.save(update_fields=["remote_id", "remote_status", "places"])
        return crowd

    def _created_with(self, crowd: CrowdStudy) -> int:
        entry = crowd.ledger.filter(action="create", state=LedgerEntry.State.DONE).first()
        return (entry.detail.get("assignments") if entry else None) or crowd.places

    def set_places(self, crowd: CrowdStudy, places: int, *, strict: bool = False) -> bool:
        """Add assignments up to ``places`` (never fewer; never beyond the budget). A HIT
        made with fewer than 10 cannot reach 10 on MTurk: the protocol's growth stops at 9
        (noted once in the ledger); a researcher's own request is refused (``strict``)."""
        self._reconcile(crowd)
        if places <= crowd.places:
            return False
        if places > services.max_places(crowd):
            raise services.BudgetExceeded(f"{places} assignments cost more than the money budget")
        if self._created_with(crowd) < MTURK_TEN <= places:
            why = (
                "MTurk cannot extend a HIT made with fewer than 10 assignments to 10 or more: "
                "start a new wave for more workers"
            )
            if strict:
                raise CrowdError(why)
            services._log(crowd, "limit", f"limit:{crowd.pk}:ten", wanted=places, note=why)
            places = MTURK_TEN - 1
            if places <= crowd.places:
                return False
        client, extra, hit = self.client(crowd), places - crowd.places, crowd.remote_id
        key = f"places:{crowd.pk}:{places}"
        self._stale(key)
        services._ledgered(
            crowd,
            "places",
            key,
            lambda d: _plain(mturk.assignments_add(client, hit, extra, total_after=places)),
            detail={"from": crowd.places, "to": places},
        )
        crowd.places = places
        crowd.save(update_fields=["places"])
        return True

    def _reconcile(self, crowd: CrowdStudy) -> None:
        """An earlier add whose outcome is unknown (it failed, or its run stopped, and this
        add asks for another total: another token) is checked against the HIT itself
        (GetHIT) first, so assignments a lost answer did add are never added again."""
        unsure = crowd.ledger.filter(
            action="places", state__in=[LedgerEntry.State.FAILED, LedgerEntry.State.PENDING]
        ).exclude(note__startswith="reconciled")
        if not unsure.exists() or not crowd.remote_id:
            return
        real = mturk.hit_get(self.client(crowd), crowd.remote_id).get("MaxAssignments") or 0
        if real > crowd.places:
            crowd.places = real
            crowd.save(update_fields=["places"])
        for row in unsure:
            added = real >= (row.detail.get("to") or 0)
            row.state = LedgerEntry.State.DONE if added else LedgerEntry.State.FAILED
            row.note = f"reconciled with the HIT ({real} assignments): " + (
                "added" if added else "not added"
            )
            row.save(update_fields=["state", "note", "updated_at"])

    def add_places(self, crowd: CrowdStudy, extra: int) -> int:
        if extra < 1:
            raise CrowdError("Add at least one place")
        if not crowd.remote_id:
            raise CrowdError("Publish first: the HIT does not exist yet")
        self.set_places(crowd, crowd.places + extra, strict=True)
        return crowd.places

    def expire(self, crowd: CrowdStudy) -> None:
        """No more work will come: the HIT expires now (workers at it may still submit)."""
        client, hit = self.client(crowd), crowd.remote_id
        services._ledgered(
            crowd, "stop", f"stop:{crowd.pk}:0", lambda d: _plain(mturk.hit_expire(client, hit))
        )
        crowd.remote_status = "COMPLETED"
        crowd.save(update_fields=["remote_status"])

    def sync(self, crowd: CrowdStudy) -> dict:
        """As Prolific's: assignments for the released work, the HIT expired once no more
        work will come, assignments read."""
        if not crowd.remote_id:
            return {"places": crowd.places, "stopped": False}
        grown = stopped = False
        if crowd.remote_status != "COMPLETED":
            grown = self.set_places(crowd, services.wanted_places(crowd))
            if services.study_done(crowd):
                self.expire(crowd)
                stopped = True
        self.poll(crowd)
        return {"places": crowd.places, "grown": grown, "stopped": stopped}

    # reviews
    def poll(self, crowd: CrowdStudy) -> int:
        """Read the HIT's assignments as submissions, with proposals from the evidence."""
        if not crowd.remote_id:
            raise CrowdError("Publish first: the HIT does not exist yet")
        rows = mturk.assignments(self.client(crowd), crowd.remote_id)
        for row in rows:
            status = MTURK_STATUS.get(row.get("AssignmentStatus", ""), "")
            if status:
                services.record(crowd, row["AssignmentId"], row.get("WorkerId", ""), status)
        return len(rows)

    def decide(self, crowd: CrowdStudy, subs) -> dict:
        """Approve or reject on MTurk as proposed (a rejection says why). A proposal to
        return is refused before anything is sent: MTurk has none."""
        subs = [s for s in subs if s.status == services.AWAITING]
        returns = [s.remote_id for s in subs if s.proposal == "return"]
        if returns:
            raise CrowdError(f"{self.lacks['return']} ({', '.join(returns)})")
        client = self.client(crowd)
        done = {"approve": 0, "reject": 0}
        for sub in subs:
            if sub.proposal == "approve":
                call = lambda d, s=sub: _plain(mturk.approve(client, s.remote_id))  # noqa: E731
                status = "APPROVED"
            elif sub.proposal == "reject":
                message = services.REJECT_MESSAGE.format(why=sub.reason)
                call = lambda d, s=sub, m=message: _plain(mturk.reject(client, s.remote_id, m))  # noqa: E731
                status = "REJECTED"
            else:
                continue
            services._ledgered(
                crowd,
                sub.proposal,
                f"{sub.proposal}:{crowd.pk}:{sub.remote_id}",
                call,
                detail={"participant": sub.participant_id, "reason": sub.reason},
            )
            sub.status = status
            sub.save(update_fields=["status", "updated_at"])
            part = services.participation_of(crowd, sub)
            if part is not None:
                annotator_services.participation_review(part, approved=status == "APPROVED")
            done[sub.proposal] += 1
        self.mark_workers(crowd)
        return done

    def mark_workers(self, crowd: CrowdStudy) -> list[str]:
        """Give the approved workers the study's qualification (``worker_group``), so a
        later wave's HIT can exclude them; returns those marked now."""
        if not crowd.worker_group:
            return []
        marked = set(
            crowd.ledger.filter(action="group", state=LedgerEntry.State.DONE).values_list(
                "detail__participant", flat=True
            )
        )
        approved = crowd.submissions.filter(status="APPROVED").values_list(
            "participant_id", flat=True
        )
        new = sorted(set(approved) - marked)
        client = self.client(crowd) if new else None
        for worker in new:
            services._ledgered(
                crowd,
                "group",
                f"group:{crowd.pk}:{worker}",
                lambda d, w=worker: _plain(mturk.mark_worker(client, crowd.worker_group, w)),
                detail={"participant": worker},
            )
        return new

    # bonuses
    def bonus_pay(self, crowd: CrowdStudy) -> LedgerEntry | None:
        """Send the due bonuses, one SendBonus per approved assignment, each written in the
        ledger first and carrying a token made from the assignment: a call that failed
        mid-way is sent again with the same token and MTurk pays it once."""
        preview = services.bonus_preview(crowd)
        if not preview["amounts"]:
            return None
        if services._over_budget(crowd, extra=preview["with_fee"]):
            raise services.BudgetExceeded("The bonuses would take the study over its money budget")
        client = self.client(crowd)
        subs = {
            s.participant_id: s
            for s in Submission.objects.filter(
                crowd=crowd, status="APPROVED", participant_id__in=list(preview["amounts"])
            )
        }
        reason = f"A bonus for your work in {crowd.study.name}, as the study's rules set out."
        entry = None
        for worker, cents in sorted(preview["amounts"].items()):
            assignment, amount = subs[worker].remote_id, Decimal(cents) / 100
            key = f"bonus:{crowd.pk}:{assignment}"
            self._stale(key)
            entry = services._ledgered(
                crowd,
                "bonus",
                key,
                lambda d, w=worker, a=assignment, m=amount: _plain(
                    mturk.bonus(client, w, a, m, reason)
                ),
                cents=crowd.with_fee(cents),
                detail={"amounts": {worker: str(amount)}, "assignment": assignment},
            )
        return entry

    @staticmethod
    def _stale(key: str) -> None:
        """A call first tried more than a day ago and not known done: its token has expired
        at MTurk, so sending it again could do it twice; it waits for the researcher."""
        LedgerEntry.objects.filter(
            key=key,
            state__in=[LedgerEntry.State.PENDING, LedgerEntry.State.FAILED],
            created_at__lt=timezone.now() - TOKEN_LIFE,
        ).update(
            state=LedgerEntry.State.UNCERTAIN,
            note="MTurk's request token has expired (24 h): check on MTurk, then settle",
            updated_at=timezone.now(),
        )


def _plain(answer: dict) -> dict:
    """The part of an MTurk answer worth keeping in the ledger (JSON, no metadata)."""
    return {k: v for k, v in (answer or {}).items() if k in ("already", "message")}


PLATFORMS: dict[str, type[Platform]] = {"prolific": Platform, "mturk": MTurk}


def of(crowd: CrowdStudy) -> Platform:
    """The adapter of the crowd study's platform."""
    return PLATFORMS[crowd.platform]()
