"""A worker in a study: enter, claim, sweep, review, finish, stop, block."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import (
    Exists,
    Max,
    OuterRef,
    Q,
)
from django.utils import timezone

from .. import selectors
from ..choices import AssignmentState
from ..errors import (
    InvalidAnswer,
    OpenInAnotherBrowser,
)
from ..models import (
    Annotation,
    Annotator,
    Assignment,
    Participation,
    QualificationAttempt,
    Study,
    browser_key,
)
from .leasing import _release, assignment_release_expired


# --- workers and assignments --------------------------------------------------------------------
def annotator_enter(*, platform: str, external_id: str) -> Annotator:
    """The worker behind a platform id, created on first entry."""
    external_id = external_id.strip()
    if not external_id or len(external_id) > 200:
        raise InvalidAnswer("The link does not identify a worker.")
    annotator, _ = Annotator.objects.get_or_create(platform=platform, external_id=external_id)
    return annotator


def participation_enter(
    *, study: Study, platform: str, external_id: str, session: str = "", return_url: str = ""
) -> Participation:
    """Enter (or re-enter) a study from a recruiting platform; a returning worker resumes.

    In a study with a qualification test the worker starts with the test; attempts count
    per study and platform id (:func:`qualification_next`).
    """
    annotator = annotator_enter(platform=platform, external_id=external_id)
    with transaction.atomic():
        participation, created = Participation.objects.select_for_update().get_or_create(
            study=study,
            annotator=annotator,
            defaults={"platform_session": session[:200], "return_url": return_url[:300]},
        )
        if created and study.qualification_id:  # the test comes first (qualification_next)
            participation.status = Participation.Status.QUALIFYING
            participation.save(update_fields=["status"])
    return participation


def participations_sweep_unused(*, now: datetime | None = None) -> int:
    """Delete the participations that never led to work, entered more than
    ``HUMEVAL_ENTRY_SWEEP_MINUTES`` ago: no item ever leased, no test answered, no code
    given, neither blocked, failed nor stopped; then the workers left with nothing (not
    blocked, no label). A flood of entries costs rows for that long only; a worker whose
    entry was swept enters again from their link. Returns how many participations went."""
    now = now or timezone.now()
    cutoff = now - timedelta(minutes=settings.HUMEVAL_ENTRY_SWEEP_MINUTES)
    same_worker = {"study_id": OuterRef("study_id"), "annotator_id": OuterRef("annotator_id")}
    unused = Participation.objects.filter(
        started_at__lt=cutoff,
        status__in=[Participation.Status.ACTIVE, Participation.Status.QUALIFYING],
        code_given="",
    ).exclude(
        Exists(Assignment.objects.filter(**same_worker))
        | Exists(QualificationAttempt.objects.filter(**same_worker))
    )
    with transaction.atomic():
        per_model = unused.delete()[1]
        Annotator.objects.filter(
            created_at__lt=cutoff, is_blocked=False, participations__isnull=True
        ).exclude(
            Exists(Assignment.objects.filter(annotator_id=OuterRef("pk")))
            | Exists(Annotation.objects.filter(annotator_id=OuterRef("pk")))
            | Exists(QualificationAttempt.objects.filter(annotator_id=OuterRef("pk")))
        ).delete()
    return per_model.get(Participation._meta.label, 0)


def participation_claim(
    participation: Participation,
    *,
    secret: str = "",
    session: str = "",
    now: datetime | None = None,
) -> str:
    """Bind the participation to the browser presenting ``secret`` (from its cookie, or
    ``""``); returns the secret that browser must carry from now on.

    The browser holding the participation gets its own secret back. A participation no
    browser holds yet is bound to this one with a new secret. Another browser may take
    it over (a new secret; the old browser's cookie stops working) only once the holder
    has no live lease and nothing happened in the participation for ``lease_seconds``
    (its claim, a lease issued, an answer stored); before that it raises
    :class:`~annotator.errors.OpenInAnotherBrowser` and changes nothing. The status
    (a failed test, a block, a stop) stays with the platform id whichever browser holds it.

    A platform id can be learnt, its session cannot: an entry carrying a platform
    ``session`` (Prolific's ``SESSION_ID``, MTurk's ``assignmentId``) other than the one
    the participation holds takes it over at once while no label has been stored in it,
    so whoever used a worker's id first cannot keep the real worker out; the live lease
    goes with it (docs/crowd.md, "Who holds a participation").
    """
    now = now or timezone.now()
    session = session[:200]
    with transaction.atomic():
        part = (
            Participation.objects.select_for_update()
            .select_related("study")
            .get(pk=participation.pk)
        )
        if secret and part.held_by(secret):
            return secret
        if part.browser_key and _new_session_before_work(part, session):
            part.platform_session = session
            part.save(update_fields=["platform_session"])
        elif part.browser_key:
            available = _takeover_time(part, now)
            if available > now:
                raise OpenInAnotherBrowser(
                    "This study is open in another browser.", available_at=available
                )
        fresh = secrets.token_urlsafe(24)
        part.browser_key, part.browser_since = browser_key(fresh), now
        part.save(update_fields=["browser_key", "browser_since"])
    participation.browser_key, participation.browser_since = part.browser_key, now
    return fresh


def _new_session_before_work(part: Participation, session: str) -> bool:
    """Whether an entry with platform ``session`` may take ``part`` over at once: a
    session other than the participation's, and no label stored in it yet."""
    return (
        bool(session)
        and session != part.platform_session
        and not Annotation.objects.filter(
            study_id=part.study_id, annotator_id=part.annotator_id
        ).exists()
    )


def _takeover_time(part: Participation, now: datetime) -> datetime:
    """When another browser may take ``part`` over: ``lease_seconds`` after the last thing
    that happened in it, and never while a lease is live."""
    leases = Assignment.objects.filter(study_id=part.study_id, annotator_id=part.annotator_id)
    seen = leases.aggregate(
        issued=Max("issued_at"),
        closed=Max("closed_at"),
        live=Max("expires_at", filter=Q(state=AssignmentState.ISSUED)),
    )
    idle = timedelta(seconds=part.study.lease_seconds)
    moments = [m + idle for m in (part.browser_since, seen["issued"], seen["closed"]) if m]
    if seen["live"] is not None:
        moments.append(seen["live"])
    return max(moments, default=now)


def participation_set_blocked(participation: Participation, blocked: bool) -> Participation:
    """Block a worker by hand (their labels flagged, open work given back) or unblock them
    (labels unflagged; strikes kept)."""
    now = timezone.now()
    with transaction.atomic():
        part = Participation.objects.select_for_update().get(pk=participation.pk)
        labels = Annotation.objects.filter(study_id=part.study_id, annotator_id=part.annotator_id)
        if blocked:
            part.status, part.finished_at = Participation.Status.BLOCKED, now
            labels.update(is_flagged=True)
            leases = Assignment.objects.filter(
                study_id=part.study_id,
                annotator_id=part.annotator_id,
                state=AssignmentState.ISSUED,
            )
            for lease in leases.select_for_update().select_related("item").order_by("item_id"):
                _release(lease, now, AssignmentState.RETURNED)
        elif part.status == Participation.Status.BLOCKED:
            part.status, part.finished_at = Participation.Status.ACTIVE, None
            labels.update(is_flagged=False)
        part.save(update_fields=["status", "finished_at"])
    return part


def participation_review(participation: Participation, approved: bool) -> Participation:
    participation.review = (
        Participation.Review.APPROVED if approved else Participation.Review.REJECTED
    )
    participation.save(update_fields=["review"])
    return participation


def participation_finish(participation: Participation, *, now: datetime | None = None) -> dict:
    """The end page: how the worker's visit stands (see
    :func:`~annotator.selectors.participation_outcome`). When a code is due, the worker is
    marked finished and the code they were given is recorded; a worker with work left is
    told so and nothing changes. Expired leases are released first, so a lease left
    behind by someone else does not count as work still to come."""
    now = now or timezone.now()
    assignment_release_expired(study=participation.study, now=now)
    outcome = selectors.participation_outcome(participation, now=now)
    if outcome["code_due"]:
        with transaction.atomic():
            part = Participation.objects.select_for_update().get(pk=participation.pk)
            leases = Assignment.objects.filter(  # a finished worker holds no item back
                study_id=part.study_id,
                annotator_id=part.annotator_id,
                state=AssignmentState.ISSUED,
            )
            for lease in leases.select_for_update().select_related("item").order_by("item_id"):
                _release(lease, now, AssignmentState.RETURNED)
            fields = ["code_given"]
            part.code_given = outcome["code"]
            if part.status == Participation.Status.ACTIVE:
                part.status, part.finished_at = Participation.Status.FINISHED, now
                fields += ["status", "finished_at"]
            part.save(update_fields=fields)
        participation.status, participation.code_given = part.status, part.code_given
    return outcome


def participation_stop(participation: Participation, *, now: datetime | None = None) -> None:
    """The worker stops before their work is done: their open lease goes back to the pool
    and they get no code (on Prolific they return the submission). Final: the stopped
    worker is given no more work in the study. A failed or blocked worker stays so."""
    now = now or timezone.now()
    with transaction.atomic():
        part = Participation.objects.select_for_update().get(pk=participation.pk)
        if part.status in (Participation.Status.FAILED, Participation.Status.BLOCKED):
            return
        leases = Assignment.objects.filter(
            study_id=part.study_id, annotator_id=part.annotator_id, state=AssignmentState.ISSUED
        )
        for lease in leases.select_for_update().select_related("item").order_by("item_id"):
            _release(lease, now, AssignmentState.RETURNED)
        part.status, part.finished_at = Participation.Status.STOPPED, now
        part.save(update_fields=["status", "finished_at"])
    participation.status = part.status
