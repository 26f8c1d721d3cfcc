"""Links that bring workers in: signed invitations (the worker id travels signed, not
guessable) and the entry URLs a researcher gives to Prolific or MTurk."""

from django.core import signing
from django.urls import reverse

from .models import Study

SALT = "humeval.invite"


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


def entry_urls(study: Study) -> dict[str, str]:
    """Where each platform sends workers (shown to researchers in the admin)."""
    base = reverse("annotator:enter", args=[study.public_id])
    return {
        "prolific": reverse("annotator:prolific", args=[study.public_id])
        + "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}",
        "mturk": reverse("annotator:mturk", args=[study.public_id]),
        "open": base + "?worker=WORKER_ID",
    }
