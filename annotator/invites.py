"""Links that bring workers in: signed invitations (the worker id travels signed, not
guessable) and the entry URLs a researcher gives to Prolific or MTurk."""

from __future__ import annotations

import re

from django.core import signing
from django.urls import reverse

from .models import Study

SALT = "humeval.invite"

#: The query Prolific fills in, exactly as Prolific's docs write its placeholders.
PROLIFIC_QUERY = (
    "PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
)
#: The most invitation links one request makes (the admin form, the command).
MAX_INVITES = 1000
#: A worker id an invitation may name: what a platform or a lab would hand out.
WORKER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}")


def invite_token(study: Study, worker: str) -> str:
    return signing.dumps({"study": str(study.public_id), "worker": worker}, salt=SALT)


def invite_worker(study: Study, token: str) -> str | None:
    """The worker id an invite names, or ``None`` if it is forged or for another study."""
    try:
        data = signing.loads(token, salt=SALT)
    except signing.BadSignature:
        return None
    if not isinstance(data, dict) or data.get("study") != str(study.public_id):
        return None
    worker = data.get("worker")
    return worker if isinstance(worker, str) and worker else None


def invite_path(study: Study, worker: str) -> str:
    """The path of ``worker``'s signed invitation to ``study``."""
    return reverse("annotator:invite", args=[study.public_id, invite_token(study, worker)])


def numbered_workers(prefix: str, count: int, start: int = 1) -> list[str]:
    """``count`` worker ids ``prefix-001`` … (zero-padded to three digits at least)."""
    width = max(3, len(str(start + count - 1)))
    return [f"{prefix}-{n:0{width}d}" for n in range(start, start + count)]


def invite_links(study: Study, workers: list[str], host: str) -> list[tuple[str, str]]:
    """``(worker, link)`` per worker id: a signed invitation at ``host`` (``http://…``, no
    trailing slash). The ``invite_links`` command and the admin's form both call this."""
    return [(worker, f"{host}{invite_path(study, worker)}") for worker in workers]


def entry_urls(study: Study) -> dict[str, str]:
    """Where each platform sends workers (shown to researchers in the admin). The Prolific
    URL carries Prolific's placeholders literally: Prolific replaces ``{{%PROLIFIC_PID%}}``
    only as written, never its percent-encoded form."""
    base = reverse("annotator:enter", args=[study.public_id])
    return {
        "prolific": reverse("annotator:prolific", args=[study.public_id]) + "?" + PROLIFIC_QUERY,
        "mturk": reverse("annotator:mturk", args=[study.public_id]),
        "open": base + "?worker=WORKER_ID",
    }
