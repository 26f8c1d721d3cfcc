"""Places follow the protocol: when the protocol has opened a round (or found there is no
more work), the study's remote places are synced (and the remote study stopped at the end)."""

import logging

from annotator import entry
from annotator.signals import collection_changed

from . import services, tasks
from .models import CrowdStudy

log = logging.getLogger(__name__)


def follow_protocol(sender, study_id: int, **kwargs) -> None:
    crowd = CrowdStudy.objects.filter(study_id=study_id).exclude(remote_id="").first()
    if crowd is None:
        return
    try:
        tasks.crowd_sync.delay(crowd.pk)
    except Exception:  # the crowd never breaks the protocol; the beat's sync retries
        log.exception("crowd sync of study %s failed", study_id)


collection_changed.connect(follow_protocol, dispatch_uid="crowd.follow_protocol")


def vouch_for_prolific_entry(study, external_id: str, session: str) -> bool | None:
    """``False`` when the study runs on Prolific and Prolific says ``session`` is not this
    participant's submission in it (a guessed or leaked id cannot pre-empt the real
    participant); ``None`` (no opinion) otherwise, and when Prolific cannot be asked
    (registered for ``prolific`` entries with :func:`annotator.entry.register`)."""
    crowd = (
        CrowdStudy.objects.filter(
            study=study, platform="prolific", remote_status__in=["ACTIVE", "PAUSED"]
        )
        .exclude(remote_id="")
        .first()
    )
    if crowd is None:
        return None
    return services.entry_vouched(crowd, external_id, session)


entry.register("prolific", vouch_for_prolific_entry)
