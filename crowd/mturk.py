"""MTurk the same way where it fits (optional extra ``humeval[mturk]``: boto3): a HIT with
the study's ExternalQuestion, assignments added as rounds open, approve / reject,
bonuses, and a qualification type that marks a study's workers so a later HIT excludes
them. Every spending call carries a ``UniqueRequestToken`` (MTurk's own idempotency key):
a retried call with the same token is refused by MTurk as already done, and read here as
done, so nothing is paid twice.

Operations used (MTurk API names): CreateHIT, CreateAdditionalAssignmentsForHIT,
ApproveAssignment, RejectAssignment, SendBonus, CreateQualificationType,
AssociateQualificationWithWorker, ListAssignmentsForHIT, ListHITs, GetHIT, UpdateExpirationForHIT.
:mod:`crowd.platforms` runs a study with these (the ledger, places from the protocol,
reviews, bonuses). Credentials come from boto3's own chain (``AWS_ACCESS_KEY_ID`` and
``AWS_SECRET_ACCESS_KEY``); the sandbox is used unless ``HUMEVAL_MTURK_SANDBOX=0``.
"""

from __future__ import annotations

import hashlib
import os
import re
from datetime import UTC, datetime
from decimal import Decimal
from xml.sax.saxutils import escape

from django.urls import reverse

from annotator.models import Study

from .client import CrowdError

EXTERNAL_QUESTION = (
    '<ExternalQuestion xmlns="http://mechanicalturk.amazonaws.com/'
    'AWSMechanicalTurkDataSchemas/2006-07-14/ExternalQuestion.xsd">'
    "<ExternalURL>{url}</ExternalURL><FrameHeight>0</FrameHeight></ExternalQuestion>"
)
SANDBOX = "https://mturk-requester-sandbox.us-east-1.amazonaws.com"


#: A HIT id in MTurk's answers (HitAlreadyExists names the HIT made by an earlier try).
HIT_ID = re.compile(r"\b[A-Z0-9]{30}\b")


def sandbox() -> bool:
    """Whether to use MTurk's sandbox (the default) rather than the live marketplace."""
    return os.environ.get("HUMEVAL_MTURK_SANDBOX", "1").strip().lower() not in ("0", "false", "no")


def annotation(study: Study) -> str:
    """The HIT's RequesterAnnotation: how a HIT whose answer was lost is found again."""
    return f"humeval {study.public_id}"


def client(sandbox: bool = True):
    """A boto3 MTurk client (the sandbox unless ``sandbox`` is false)."""
    try:
        import boto3
    except ImportError as exc:  # the optional extra
        raise CrowdError("MTurk needs boto3: pip install 'humeval[mturk]'") from exc
    return boto3.client(
        "mturk", region_name="us-east-1", **({"endpoint_url": SANDBOX} if sandbox else {})
    )


def token(*parts: object) -> str:
    """A UniqueRequestToken (at most 64 characters) for one logical call."""
    return hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()[:64]


def _call(operation, **params) -> dict:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return operation(**params)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        message = str(error.get("Message", ""))
        if (
            "UniqueRequestToken" in message
            or "already" in message.lower()
            or "AlreadyExists" in str(error.get("Code", ""))
        ):  # done by an earlier try with the same token
            return {"already": True, "message": message[:300]}
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        raise CrowdError(f"MTurk {operation.__name__}: {message}", status=status) from exc
    except BotoCoreError as exc:  # not reached, or no answer: a retry with the token is safe
        raise CrowdError(f"MTurk {operation.__name__}: {exc}") from exc


def question(study: Study, base_url: str) -> str:
    url = base_url.rstrip("/") + reverse("annotator:mturk", args=[study.public_id])
    return EXTERNAL_QUESTION.format(url=escape(url))


def hit_create(
    mturk,
    study: Study,
    base_url: str,
    *,
    reward: Decimal,
    assignments: int,
    minutes: int,
    exclude_qualification: str | list[str] = "",
    lifetime_days: int = 7,
) -> dict:
    """The study's HIT (``assignments`` to start; grown by :func:`assignments_add`),
    closed to workers holding any of the ``exclude_qualification`` types (earlier waves)."""
    excluded = (
        [exclude_qualification] if isinstance(exclude_qualification, str) else exclude_qualification
    )
    requirements = [{"QualificationTypeId": q, "Comparator": "DoesNotExist"} for q in excluded if q]
    answer = _call(
        mturk.create_hit,
        Title=study.name,
        Description=(study.description or study.name)[:2000],
        Reward=f"{reward:.2f}",
        MaxAssignments=assignments,
        AssignmentDurationInSeconds=minutes * 60 * 2,
        LifetimeInSeconds=lifetime_days * 86400,
        Question=question(study, base_url),
        QualificationRequirements=requirements,
        RequesterAnnotation=annotation(study),
        UniqueRequestToken=token("hit", study.public_id),
    )
    return answer.get("HIT", answer)


def hit_find(mturk, study: Study) -> str:
    """The id of the study's HIT made by an earlier try (by its RequesterAnnotation), or ''."""
    params: dict = {"MaxResults": 100}
    while True:
        page = _call(mturk.list_hits, **params)
        for hit in page.get("HITs", []):
            if hit.get("RequesterAnnotation") == annotation(study):
                return hit["HITId"]
        if not page.get("NextToken") or not page.get("HITs"):
            return ""
        params["NextToken"] = page["NextToken"]


def hit_get(mturk, hit_id: str) -> dict:
    """The HIT as MTurk has it (id, status, MaxAssignments)."""
    hit = _call(mturk.get_hit, HITId=hit_id).get("HIT", {})
    return {k: hit.get(k) for k in ("HITId", "HITStatus", "MaxAssignments")}


def hit_expire(mturk, hit_id: str) -> dict:
    """Close the HIT to new workers now (those working may still submit)."""
    return _call(mturk.update_expiration_for_hit, HITId=hit_id, ExpireAt=datetime.now(UTC))


def assignments(mturk, hit_id: str) -> list[dict]:
    """Every submitted, approved or rejected assignment of the HIT (all pages)."""
    rows: list[dict] = []
    params: dict = {
        "HITId": hit_id,
        "MaxResults": 100,
        "AssignmentStatuses": ["Submitted", "Approved", "Rejected"],
    }
    while True:
        page = _call(mturk.list_assignments_for_hit, **params)
        rows += page.get("Assignments", [])
        if not page.get("NextToken") or not page.get("Assignments"):
            return rows
        params["NextToken"] = page["NextToken"]


def assignments_add(mturk, hit_id: str, extra: int, total_after: int) -> dict:
    """Add ``extra`` assignments (keyed by the total they make: a retry adds none)."""
    return _call(
        mturk.create_additional_assignments_for_hit,
        HITId=hit_id,
        NumberOfAdditionalAssignments=extra,
        UniqueRequestToken=token("assignments", hit_id, total_after),
    )


def approve(mturk, assignment_id: str, feedback: str = "") -> dict:
    params = {"AssignmentId": assignment_id}
    if feedback:
        params["RequesterFeedback"] = feedback[:1024]
    return _call(mturk.approve_assignment, **params)


def reject(mturk, assignment_id: str, feedback: str) -> dict:
    if not feedback:
        raise CrowdError("MTurk needs a reason to reject")
    return _call(
        mturk.reject_assignment, AssignmentId=assignment_id, RequesterFeedback=feedback[:1024]
    )


def bonus(mturk, worker_id: str, assignment_id: str, amount: Decimal, reason: str) -> dict:
    return _call(
        mturk.send_bonus,
        WorkerId=worker_id,
        AssignmentId=assignment_id,
        BonusAmount=f"{amount:.2f}",
        Reason=reason,
        UniqueRequestToken=token("bonus", assignment_id),
    )


def wave_qualification(mturk, study: Study) -> str:
    """A qualification type marking this study's workers (to exclude in a later HIT)."""
    answer = _call(
        mturk.create_qualification_type,
        Name=f"humeval {study.public_id}",
        Description=f"Took part in {study.name}"[:2000],
        QualificationTypeStatus="Active",
    )
    return answer["QualificationType"]["QualificationTypeId"]


def mark_worker(mturk, qualification_id: str, worker_id: str) -> dict:
    return _call(
        mturk.associate_qualification_with_worker,
        QualificationTypeId=qualification_id,
        WorkerId=worker_id,
        IntegerValue=1,
        SendNotification=False,
    )
