"""Running a study on Prolific: create and publish, places from the protocol within the
money budget, submissions and their reviews, bonuses, returns. Every call that changes
something on the platform goes through :func:`_ledgered` (a row before, reconciled after).
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import F, Sum
from django.urls import reverse

from annotator import services as annotator_services
from annotator.choices import AnnotationSource
from annotator.invites import PROLIFIC_QUERY
from annotator.models import Annotation, Item, Participation

from .client import Backoff, CrowdError, ProlificClient, Uncertain
from .models import CrowdStudy, LedgerEntry, Submission

#: Submission statuses after which the participant holds no work any more.
GONE = {"RETURNED", "TIMED-OUT", "REJECTED"}
#: Statuses awaiting the researcher's review.
AWAITING = "AWAITING REVIEW"
#: The message Prolific shows a rejected participant (its API asks for 100+ characters).
REJECT_MESSAGE = (
    "Your submission was reviewed against the study's checks and could not be approved: {why}. "
    "The checks were explained in the study's instructions."
)
#: The reason given when asking a participant to return (one of Prolific's own).
RETURNING = ["Didn't finish the study"]
#: Ours, not Prolific's: a return was asked for and the participant has not yet returned.
RETURN_REQUESTED = "RETURN REQUESTED"

#: Builds the client for a crowd study (tests swap it; the token never leaves the client).
client_factory: Callable[[CrowdStudy], ProlificClient] = lambda crowd: ProlificClient(  # noqa: E731
    crowd.token()
)


#: The client of the entry check: one quick try (a worker is waiting for the page).
entry_client_factory: Callable[[CrowdStudy], ProlificClient] = lambda crowd: ProlificClient(  # noqa: E731
    crowd.token(), backoff=Backoff(attempts=1), timeout=5.0
)


class BudgetExceeded(CrowdError):
    pass


# --- the ledger ------------------------------------------------------------------------------
def _ledgered(
    crowd: CrowdStudy,
    action: str,
    key: str,
    call: Callable[[dict], Any],
    *,
    cents: int = 0,
    detail: dict | None = None,
    repeatable: bool = True,
) -> LedgerEntry:
    """Make one changing call at most once per ``key``. The row is written (and committed)
    first; a ``done`` or ``uncertain`` row is never sent again; a ``pending`` row left by a
    crashed run is sent again only when the call is ``repeatable`` (else it becomes
    ``uncertain``); a ``failed`` one (refused, nothing happened) may be tried again.
    ``call`` gets the row's ``detail`` (to keep remote ids in) and returns the answer."""
    with transaction.atomic():
        entry, created = LedgerEntry.objects.select_for_update().get_or_create(
            key=key,
            defaults={"crowd": crowd, "action": action, "cents": cents, "detail": detail or {}},
        )
        if entry.state in (LedgerEntry.State.DONE, LedgerEntry.State.UNCERTAIN):
            return entry
        if not created and entry.state == LedgerEntry.State.PENDING and not repeatable:
            entry.state, entry.note = LedgerEntry.State.UNCERTAIN, "a run stopped mid-call"
            entry.save(update_fields=["state", "note", "updated_at"])
            return entry
        if cents and _over_budget(crowd, extra=cents, besides=entry.pk):
            entry.state, entry.note = LedgerEntry.State.FAILED, "over the money budget"
            entry.save(update_fields=["state", "note", "updated_at"])
            raise BudgetExceeded(f"{action}: {cents} cents is over the study's money budget")
        entry.state, entry.cents = LedgerEntry.State.PENDING, cents
        entry.save(update_fields=["state", "cents", "updated_at"])
    try:
        answer = call(entry.detail)
    except Uncertain as exc:
        entry.state, entry.note = LedgerEntry.State.UNCERTAIN, str(exc)[:500]
        entry.save(update_fields=["state", "note", "detail", "updated_at"])
        return entry
    except CrowdError as exc:
        entry.state, entry.note = LedgerEntry.State.FAILED, str(exc)[:500]
        entry.save(update_fields=["state", "note", "detail", "updated_at"])
        raise
    entry.state, entry.note = LedgerEntry.State.DONE, ""
    entry.detail = {**entry.detail, "answer": _small(answer)}
    entry.save(update_fields=["state", "note", "detail", "updated_at"])
    return entry


def _small(answer: Any) -> Any:
    text = json.dumps(answer, default=str)
    return answer if len(text) < 2000 else {"truncated": text[:2000]}


def _log(crowd: CrowdStudy, action: str, key: str, **detail) -> None:
    LedgerEntry.objects.get_or_create(
        key=key,
        defaults={"crowd": crowd, "action": action, "state": "done", "detail": detail},
    )


# --- money -----------------------------------------------------------------------------------
def bonus_cents(crowd: CrowdStudy) -> int:
    """Bonuses sent or being sent (fee included); an uncertain one counts as paid."""
    live = [LedgerEntry.State.PENDING, LedgerEntry.State.DONE, LedgerEntry.State.UNCERTAIN]
    return crowd.ledger.filter(action="bonus", state__in=live).aggregate(s=Sum("cents"))["s"] or 0


def place_cents(crowd: CrowdStudy) -> int:
    return crowd.with_fee(crowd.terms()[1])


def _over_budget(crowd: CrowdStudy, *, extra: int, besides: int | None = None) -> bool:
    live = [LedgerEntry.State.PENDING, LedgerEntry.State.DONE, LedgerEntry.State.UNCERTAIN]
    bonuses = (
        crowd.ledger.filter(action="bonus", state__in=live)
        .exclude(pk=besides)
        .aggregate(s=Sum("cents"))["s"]
        or 0
    )
    return crowd.places * place_cents(crowd) + bonuses + extra > crowd.money_budget_cents


def spend(crowd: CrowdStudy) -> dict:
    """Committed money (places × reward + bonuses, the fee on both) against the budget, and
    what is paid so far (approved submissions' rewards + bonuses)."""
    approved = crowd.submissions.filter(status="APPROVED").count()
    rewards = crowd.places * place_cents(crowd)
    bonuses = bonus_cents(crowd)
    return {
        "rewards_committed": rewards,
        "rewards_paid": approved * place_cents(crowd),
        "bonuses": bonuses,
        "committed": rewards + bonuses,
        "budget": crowd.money_budget_cents,
        "left": crowd.money_budget_cents - rewards - bonuses,
    }


def max_places(crowd: CrowdStudy) -> int:
    """Places the money budget pays for, after the bonuses committed."""
    return max(crowd.money_budget_cents - bonus_cents(crowd), 0) // max(place_cents(crowd), 1)


# --- places from the protocol ----------------------------------------------------------------
def released_annotations(crowd: CrowdStudy) -> int:
    """Annotations the study has released so far: in an adaptive study the protocol's
    ledger (items × redundancy of the rounds opened), else every active item's."""
    study = crowd.study
    if study.collection == "adaptive":
        from protocol.models import ProtocolConfig

        committed = ProtocolConfig.objects.filter(study=study).values_list("committed", flat=True)
        return committed.first() or 0
    rows = Item.objects.filter(study=study, is_active=True, is_gold=False)
    return rows.aggregate(s=Sum("redundancy"))["s"] or 0


def wanted_places(crowd: CrowdStudy) -> int:
    """Places the released work needs (annotations ÷ items per worker, rounded up), never
    more than the money budget pays for."""
    per_worker = crowd.study.items_per_worker
    if not per_worker:
        raise CrowdError("Set the study's items per worker: places are annotations ÷ items")
    return min(math.ceil(released_annotations(crowd) / per_worker), max_places(crowd))


def study_done(crowd: CrowdStudy) -> bool:
    """No more work will be released: an adaptive study with rounds and none open or
    awaiting its decision; a study of all items at once when every item is complete."""
    study = crowd.study
    if study.collection == "adaptive":
        from protocol.models import Round

        rounds = Round.objects.filter(study=study)
        return rounds.exists() and not rounds.exclude(state=Round.State.DECIDED).exists()
    items = Item.objects.filter(study=study, is_active=True, is_gold=False)
    return items.exists() and not items.filter(n_done__lt=F("redundancy")).exists()


def study_body(crowd: CrowdStudy, base_url: str) -> dict:
    """The draft study Prolific is asked to create (its ``POST /api/v1/studies/`` body)."""
    study = crowd.study
    minutes, reward = crowd.terms()
    url = base_url.rstrip("/") + reverse("annotator:prolific", args=[study.public_id])
    codes = [
        {
            "code": study.completion_code,
            "code_type": "COMPLETED",
            "actions": [
                {"action": "AUTOMATICALLY_APPROVE"}
                if crowd.auto_approve
                else {"action": "MANUALLY_REVIEW"}
            ],
        },
    ]
    if study.fail_code:
        codes.append(
            {
                "code": study.fail_code,
                "code_type": "FAILED_ATTENTION_CHECK",
                "actions": [{"action": "REQUEST_RETURN", "return_reason": "failed checks"}],
            }
        )
    if study.no_work_code:
        codes.append(
            {
                "code": study.no_work_code,
                "code_type": "NO_WORK_LEFT",
                "actions": [{"action": "REQUEST_RETURN", "return_reason": "no work left"}],
            }
        )
    filters = [
        {"filter_id": "participant_group_blocklist", "selected_values": [group]}
        for group in crowd.exclude_groups
    ]
    return {
        "name": study.name,
        "internal_name": f"humeval {study.public_id}",
        "description": study.description or study.name,
        "external_study_url": url + "?" + PROLIFIC_QUERY,
        "prolific_id_option": "url_parameters",
        "completion_codes": codes,
        "estimated_completion_time": minutes,
        "reward": reward,
        "total_available_places": 0,
        "device_compatibility": crowd.device_compatibility or ["desktop"],
        "filters": filters,
    }


def create(crowd: CrowdStudy, base_url: str, client: ProlificClient | None = None) -> CrowdStudy:
    """The draft study on Prolific, once: a crashed or lost create is found again by its
    ``internal_name`` instead of made twice."""
    if crowd.remote_id:
        return crowd
    client = client or client_factory(crowd)
    body = study_body(crowd, base_url)
    if not crowd.study.completion_code:
        raise CrowdError("Set the study's completion code first")
    key = f"create:{crowd.pk}"
    entry = _ledgered(crowd, "create", key, lambda d: client.study_create(body), repeatable=False)
    remote = (entry.detail.get("answer") or {}).get("id")
    if not remote:  # uncertain: look for it
        found = [s for s in client.studies() if s.get("internal_name") == body["internal_name"]]
        if found:
            remote = found[0]["id"]
            entry.state, entry.detail = LedgerEntry.State.DONE, {**entry.detail, "answer": found[0]}
            entry.save(update_fields=["state", "detail", "updated_at"])
        else:  # it never arrived: forget the attempt and create it now
            entry.delete()
            return create(crowd, base_url, client)
    crowd.remote_id, crowd.remote_status = remote, "UNPUBLISHED"
    crowd.save(update_fields=["remote_id", "remote_status"])
    return crowd


def hooks_subscribe(
    crowd: CrowdStudy, base_url: str, workspace_id: str, client: ProlificClient | None = None
) -> str:
    """Ask Prolific for the workspace's hook secret (kept sealed) and subscribe this study's
    hook URL to submission status changes; returns the URL."""
    from .platforms import of

    of(crowd).refuse("hooks")  # MTurk: none
    client = client or client_factory(crowd)
    url = base_url.rstrip("/") + reverse("crowd:prolific-hook", args=[crowd.study.public_id])
    secret = client.hook_secret_create(workspace_id)
    crowd.set_hook_secret(secret["value"])
    crowd.save(update_fields=["hook_secret_sealed"])
    _ledgered(
        crowd,
        "hooks",
        f"hooks:{crowd.pk}:{url}",
        lambda d: client.hook_subscribe(workspace_id, "submission.status.change", url),
    )
    return url


def transition(crowd: CrowdStudy, action: str, client: ProlificClient | None = None) -> None:
    client = client or client_factory(crowd)
    n = crowd.ledger.filter(action=action.lower()).count()
    entry = _ledgered(
        crowd,
        action.lower(),
        f"{action.lower()}:{crowd.pk}:{n}",
        lambda d: client.study_transition(crowd.remote_id, action),
    )
    status = {"PUBLISH": "ACTIVE", "PAUSE": "PAUSED", "START": "ACTIVE", "STOP": "COMPLETED"}
    answer = entry.detail.get("answer") or {}
    crowd.remote_status = answer.get("status") or status[action]
    crowd.save(update_fields=["remote_status"])


def publish(crowd: CrowdStudy, base_url: str, client: ProlificClient | None = None) -> None:
    client = client or client_factory(crowd)
    create(crowd, base_url, client)
    set_places(crowd, wanted_places(crowd), client)
    if crowd.remote_status in ("", "UNPUBLISHED"):
        transition(crowd, "PUBLISH", client)


def set_places(crowd: CrowdStudy, places: int, client: ProlificClient | None = None) -> bool:
    """Raise the remote places to ``places`` (never lower; never beyond the budget)."""
    if places <= crowd.places:
        return False
    if places > max_places(crowd):
        raise BudgetExceeded(f"{places} places cost more than the money budget")
    client = client or client_factory(crowd)
    _ledgered(
        crowd,
        "places",
        f"places:{crowd.pk}:{places}",
        lambda d: client.study_set_places(crowd.remote_id, places),
        detail={"from": crowd.places, "to": places},
    )
    crowd.places = places
    crowd.save(update_fields=["places"])
    return True


def sync(crowd: CrowdStudy, client: ProlificClient | None = None) -> dict:
    """Follow the protocol: places for the work released; the remote study stopped once no
    more work will come; submissions polled (the fallback for hooks)."""
    if not crowd.remote_id:
        return {"places": crowd.places, "stopped": False}
    client = client or client_factory(crowd)
    grown = False
    if crowd.remote_status not in ("COMPLETED",):
        grown = set_places(crowd, wanted_places(crowd), client)
    stopped = False
    if study_done(crowd) and crowd.remote_status not in ("COMPLETED", "UNPUBLISHED"):
        transition(crowd, "STOP", client)
        stopped = True
    poll(crowd, client)
    return {"places": crowd.places, "grown": grown, "stopped": stopped}


# --- submissions -----------------------------------------------------------------------------
def poll(crowd: CrowdStudy, client: ProlificClient | None = None) -> int:
    """Read every submission; free the work of those gone; propose reviews."""
    client = client or client_factory(crowd)
    remote = client.submissions(crowd.remote_id)
    for row in remote:
        record(
            crowd,
            row["id"],
            row.get("participant_id", ""),
            row.get("status", ""),
            row.get("study_code") or "",
        )
    return len(remote)


def record(
    crowd: CrowdStudy, remote_id: str, participant: str, status: str, code: str = ""
) -> Submission:
    """Note a submission's status; one gone (returned, timed out, rejected) frees that
    participant's leases at once (their finished labels count as usual)."""
    sub, _ = Submission.objects.get_or_create(
        crowd=crowd, remote_id=remote_id, defaults={"participant_id": participant, "status": status}
    )
    if sub.status == RETURN_REQUESTED and status == AWAITING:
        status = RETURN_REQUESTED  # still awaiting the participant's return
    sub.participant_id = participant or sub.participant_id
    sub.status, sub.study_code = status, code or sub.study_code
    if status == AWAITING and not sub.proposal:
        propose(crowd, sub)
    sub.save()
    if status in GONE:
        part = participation_of(crowd, sub)
        if part is not None and part.status in (
            Participation.Status.ACTIVE,
            Participation.Status.QUALIFYING,
        ):
            annotator_services.participation_stop(part)
    if status == AWAITING and crowd.auto_approve and sub.proposal == "approve":
        from .platforms import of

        of(crowd).decide(crowd, [sub])
    return sub


def entry_vouched(crowd: CrowdStudy, participant: str, session: str) -> bool | None:
    """Whether Prolific knows ``session`` as ``participant``'s submission in the study
    (answers cached an hour); ``None`` when Prolific cannot be asked (entry goes ahead)."""
    from django.core.cache import cache

    if not session:
        return False
    key = (
        "crowd-entry:" + hashlib.sha256(f"{crowd.pk}:{participant}:{session}".encode()).hexdigest()
    )
    known = cache.get(key)
    if known is not None:
        return known
    try:
        row = entry_client_factory(crowd).submission(session)
    except CrowdError as exc:
        if exc.status in (400, 404):
            cache.set(key, False, 3600)
            return False
        return None  # unreachable or failing: do not lock real participants out
    vouched = row.get("participant_id") == participant and row.get("study_id") in (
        None,
        crowd.remote_id,
    )
    cache.set(key, vouched, 3600)
    return vouched


def participation_of(crowd: CrowdStudy, sub: Submission) -> Participation | None:
    rows = Participation.objects.filter(study=crowd.study, annotator__platform=crowd.platform)
    return (
        rows.filter(platform_session=sub.remote_id).first()
        or rows.filter(annotator__external_id=sub.participant_id).first()
    )


def evidence(crowd: CrowdStudy, part: Participation | None) -> dict:
    if part is None:
        return {"found": False}
    labels = Annotation.objects.filter(
        study=crowd.study, annotator_id=part.annotator_id, source=AnnotationSource.PLATFORM
    ).exclude(item__is_gold=True)
    times = [t for t in labels.values_list("time_spent_ms", flat=True) if t]
    return {
        "found": True,
        "status": part.status,
        "code": part.code_given,
        "labels": labels.count(),
        "gold_seen": part.gold_seen,
        "gold_correct": part.gold_correct,
        "strikes": part.strikes,
        "median_seconds": statistics.median(times) / 1000 if times else None,
    }


def propose(crowd: CrowdStudy, sub: Submission) -> None:
    """Approve, reject (with Prolific's category) or ask to return, from the evidence.

    Prolific's rules for a valid rejection are followed: reject only on clear evidence
    (failed attention checks, exceptionally fast work, no completion code); a participant
    who did not finish, failed a screening test or found no work is asked to return instead.
    """
    study = crowd.study
    ev = evidence(crowd, participation_of(crowd, sub))
    proposal, category, reason = "approve", "", "completion code earned, checks passed"
    if not ev["found"] or ev["labels"] == 0 and ev.get("status") != Participation.Status.BLOCKED:
        proposal, reason = "return", "no work done here"
    elif ev["status"] == Participation.Status.FAILED:
        proposal, reason = "return", "failed the qualification test (a screen, not a rejection)"
    elif ev["status"] == Participation.Status.BLOCKED or (
        ev["gold_seen"] >= 2 and ev["gold_correct"] / ev["gold_seen"] < crowd.min_gold_accuracy
    ):
        proposal, category = "reject", "FAILED_CHECK"
        reason = (
            f"failed {ev['gold_seen'] - ev['gold_correct']} of {ev['gold_seen']} attention checks"
        )
    elif ev["median_seconds"] is not None and ev["median_seconds"] < crowd.min_seconds_per_item:
        proposal, category = "reject", "TOO_QUICKLY"
        reason = (
            f"median {ev['median_seconds']:.1f} s per item (under {crowd.min_seconds_per_item:g} s)"
        )
    elif ev["code"] != study.completion_code:
        proposal, reason = "return", "did not finish the study (no completion code)"
    sub.proposal, sub.category, sub.reason = proposal, category, reason
    sub.bonus_cents = (
        ev["labels"] * crowd.bonus_per_item_cents + ev["gold_correct"] * crowd.bonus_per_gold_cents
        if proposal == "approve"
        else 0
    )


def decide(crowd: CrowdStudy, subs, client: ProlificClient | None = None) -> dict:
    """Carry out the proposals of ``subs`` (awaiting review) on the platform."""
    client = client or client_factory(crowd)
    done = {"approve": 0, "reject": 0, "return": 0}
    for sub in subs:
        if sub.status != AWAITING or sub.proposal not in done:
            continue
        if sub.proposal == "approve":
            call, status = (lambda d, s=sub: client.submission_approve(s.remote_id)), "APPROVED"
        elif sub.proposal == "reject":
            message = REJECT_MESSAGE.format(why=sub.reason)
            call = lambda d, s=sub, m=message: client.submission_reject(s.remote_id, s.category, m)  # noqa: E731
            status = "REJECTED"
        else:
            call = lambda d, s=sub: client.submission_request_return(s.remote_id, RETURNING)  # noqa: E731
            status = RETURN_REQUESTED
        _ledgered(
            crowd,
            sub.proposal,
            f"{sub.proposal}:{crowd.pk}:{sub.remote_id}",
            call,
            detail={
                "participant": sub.participant_id,
                "reason": sub.reason,
                "category": sub.category,
            },
        )
        sub.status = status
        sub.save(update_fields=["status", "updated_at"])
        part = participation_of(crowd, sub)
        if part is not None and sub.proposal in ("approve", "reject"):
            annotator_services.participation_review(part, approved=sub.proposal == "approve")
        done[sub.proposal] += 1
    group_workers(crowd, client)
    return done


def group_workers(crowd: CrowdStudy, client: ProlificClient | None = None) -> list[str]:
    """Add the study's approved workers to its participant group (``worker_group``), so a
    later study can exclude them ("no one who did wave 1"); returns those added now."""
    if not crowd.worker_group:
        return []
    grouped = set()
    for entry in crowd.ledger.filter(action="group", state=LedgerEntry.State.DONE):
        grouped |= set(entry.detail.get("participants", []))
    approved = crowd.submissions.filter(status="APPROVED").values_list("participant_id", flat=True)
    new = sorted(set(approved) - grouped)
    if not new:
        return []
    client = client or client_factory(crowd)
    digest = hashlib.sha256(",".join(new).encode()).hexdigest()[:32]
    _ledgered(
        crowd,
        "group",
        f"group:{crowd.pk}:{digest}",
        lambda d: client.group_add(crowd.worker_group, new),
        detail={"participants": new},
    )
    return new


def add_places(crowd: CrowdStudy, extra: int, client: ProlificClient | None = None) -> int:
    """The researcher's own "add places" (beyond what the protocol asked), within budget."""
    if extra < 1:
        raise CrowdError("Add at least one place")
    set_places(crowd, crowd.places + extra, client)
    return crowd.places


# --- bonuses ---------------------------------------------------------------------------------
def bonus_preview(crowd: CrowdStudy) -> dict:
    """Bonuses due (approved submissions not yet bonused), per participant, with the total
    and the platform's fee on it."""
    paid = set()
    for entry in crowd.ledger.filter(action="bonus").exclude(state=LedgerEntry.State.FAILED):
        paid |= set(entry.detail.get("amounts", {}))
    due = {
        s.participant_id: s.bonus_cents
        for s in crowd.submissions.filter(status="APPROVED", bonus_cents__gt=0)
        if s.participant_id not in paid
    }
    total = sum(due.values())
    return {"amounts": due, "total": total, "with_fee": crowd.with_fee(total) if total else 0}


def bonus_pay(crowd: CrowdStudy, client: ProlificClient | None = None) -> LedgerEntry | None:
    """Pay the due bonuses in one bulk payment, at most once: set up (safe to repeat), then
    pay (never repeated; a lost answer leaves the row ``uncertain`` and counted as paid)."""
    client = client or client_factory(crowd)
    preview = bonus_preview(crowd)
    pending = crowd.ledger.filter(action="bonus", state=LedgerEntry.State.PENDING).first()
    if pending is not None:  # a run that stopped mid-way: finish or settle it first
        return _bonus_send(crowd, pending, client)
    if not preview["amounts"]:
        return None
    digest = hashlib.sha256(json.dumps(preview["amounts"], sort_keys=True).encode()).hexdigest()
    amounts = {pid: str(Decimal(c) / 100) for pid, c in preview["amounts"].items()}
    with transaction.atomic():
        if _over_budget(crowd, extra=preview["with_fee"]):
            raise BudgetExceeded("The bonuses would take the study over its money budget")
        entry, _ = LedgerEntry.objects.get_or_create(
            key=f"bonus:{crowd.pk}:{digest[:32]}",
            defaults={
                "crowd": crowd,
                "action": "bonus",
                "cents": preview["with_fee"],
                "detail": {"amounts": amounts},
            },
        )
        if entry.state == LedgerEntry.State.FAILED:  # refused before: nothing was paid
            entry.state, entry.detail = (
                LedgerEntry.State.PENDING,
                {
                    **entry.detail,
                    "pay_sent": False,
                },
            )
            entry.save(update_fields=["state", "detail", "updated_at"])
    return _bonus_send(crowd, entry, client)


def _bonus_send(crowd: CrowdStudy, entry: LedgerEntry, client: ProlificClient) -> LedgerEntry:
    if entry.state != LedgerEntry.State.PENDING:
        return entry
    if entry.detail.get("pay_sent"):  # a crash after the pay call went out: never again
        entry.state, entry.note = LedgerEntry.State.UNCERTAIN, "a run stopped while paying"
        entry.save(update_fields=["state", "note", "updated_at"])
        return entry
    bulk = entry.detail.get("bulk_id")
    try:
        if not bulk:
            amounts = {pid: Decimal(v) for pid, v in entry.detail["amounts"].items()}
            bulk = client.bonus_setup(crowd.remote_id, amounts)["id"]
            entry.detail = {**entry.detail, "bulk_id": bulk}
        entry.detail = {**entry.detail, "pay_sent": True}
        entry.save(update_fields=["detail", "updated_at"])
        client.bonus_pay(bulk)
    except Uncertain as exc:
        entry.state, entry.note = LedgerEntry.State.UNCERTAIN, str(exc)[:500]
    except CrowdError as exc:
        entry.state, entry.note = LedgerEntry.State.FAILED, str(exc)[:500]
        entry.save(update_fields=["state", "note", "updated_at"])
        raise
    else:
        entry.state, entry.note = LedgerEntry.State.DONE, ""
    entry.save(update_fields=["state", "note", "detail", "updated_at"])
    return entry


def settle(entry: LedgerEntry, *, paid: bool) -> None:
    """The researcher's word on an uncertain row (after checking on the platform): paid
    (done) or not (failed, so the next run may send it)."""
    entry.refresh_from_db()
    if entry.state != LedgerEntry.State.UNCERTAIN:
        raise CrowdError("Only an uncertain row can be settled")
    entry.state = LedgerEntry.State.DONE if paid else LedgerEntry.State.FAILED
    entry.note = f"settled by the researcher: {'paid' if paid else 'not paid'}"
    entry.save(update_fields=["state", "note", "updated_at"])


def status(crowd: CrowdStudy) -> dict:
    awaiting = crowd.submissions.filter(status=AWAITING)
    return {
        "platform": crowd.get_platform_display(),
        "remote_id": crowd.remote_id,
        "remote_status": crowd.remote_status or "not created",
        "places": crowd.places,
        "max_places": max_places(crowd),
        "wanted_places": _safe(lambda: wanted_places(crowd)),
        "spend": spend(crowd),
        "awaiting": awaiting.count(),
        "uncertain": crowd.ledger.filter(state=LedgerEntry.State.UNCERTAIN).count(),
    }


def _safe(fn):
    try:
        return fn()
    except CrowdError:
        return None
