"""Places follow the protocol: when the protocol has opened a round (or found there is no
more work), the study's remote places are synced (and the remote study stopped at the end)."""

import logging

from annotator.signals import collection_changed

from . import tasks
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
