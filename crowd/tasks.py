from celery import shared_task

from . import platforms
from .client import CrowdError
from .models import CrowdStudy


@shared_task(name="crowd.sync", autoretry_for=(CrowdError,), retry_backoff=True, max_retries=5)
def crowd_sync(crowd_id: int) -> dict:
    """Places for the released work, stop when done, poll submissions (idempotent)."""
    crowd = CrowdStudy.objects.select_related("study").get(pk=crowd_id)
    return platforms.of(crowd).sync(crowd)


@shared_task(name="crowd.sync_all")
def crowd_sync_all() -> int:
    """The polling fallback where hooks are not configured (on the beat)."""
    ids = list(
        CrowdStudy.objects.exclude(remote_id="")
        .exclude(remote_status="COMPLETED")
        .values_list("pk", flat=True)
    )
    for pk in ids:
        crowd_sync.delay(pk)
    return len(ids)
