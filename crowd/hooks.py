"""Prolific's hooks (``submission.status.change``), verified as Prolific defines: the
``X-Prolific-Request-Signature`` header is the base64 HMAC-SHA256, under the hook secret,
of the ``X-Prolific-Request-Timestamp`` header followed by the raw body. Unverified or stale
requests are refused; a redelivered one is recognised by its digest and changes nothing."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

from django.db import IntegrityError, transaction

from .models import CrowdStudy, HookDelivery
from .services import record

#: A hook older (or newer) than this many seconds is refused (a replayed capture).
MAX_SKEW = 300


class Refused(Exception):
    def __init__(self, message: str, status: int = 403):
        super().__init__(message)
        self.status = status


def sign(secret: str, timestamp: str, body: bytes) -> str:
    mac = hmac.new(secret.encode(), timestamp.encode() + body, hashlib.sha256)
    return base64.b64encode(mac.digest()).decode()


def verify(secret: str, timestamp: str, signature: str, body: bytes, now: float | None = None):
    if not secret:
        raise Refused("hooks are not configured for this study", 404)
    if not timestamp or not signature:
        raise Refused("unsigned hook")
    try:
        skew = abs((now or time.time()) - float(timestamp))
    except ValueError:
        raise Refused("bad timestamp") from None
    if skew > MAX_SKEW:
        raise Refused("stale hook")
    if not hmac.compare_digest(sign(secret, timestamp, body), signature):
        raise Refused("bad signature")


def receive(crowd: CrowdStudy, timestamp: str, signature: str, body: bytes) -> str:
    """Verify and apply one hook; returns ``"applied"`` or ``"duplicate"``."""
    verify(crowd.hook_secret(), timestamp, signature, body)
    try:
        event = json.loads(body)
    except ValueError:
        raise Refused("not JSON", 400) from None
    if not isinstance(event, dict) or not isinstance(event.get("resource_id"), str):
        raise Refused("no resource_id", 400)
    status = str(event.get("status", ""))
    try:
        with transaction.atomic():
            HookDelivery.objects.create(
                digest=hashlib.sha256(body).hexdigest(),
                event_type=str(event.get("event_type", ""))[:64],
                resource_id=event["resource_id"][:64],
                status=status[:24],
            )
    except IntegrityError:
        return "duplicate"
    participant = str(event.get("participant_id", ""))[:64]
    record(crowd, event["resource_id"][:64], participant, status[:24])
    return "applied"
