"""What the protocol does when the annotator app reports an event (connected in ready())."""

from django.db import transaction
from django.dispatch import receiver

from annotator.models import Study
from annotator.signals import (
    annotation_submitted,
    items_skipped,
    study_created,
)

from . import services
from .tasks import decide_round


@receiver(study_created)
def start_adaptive_study(sender, study: Study, **kwargs) -> None:
    if study.collection == "adaptive":
        services.protocol_start(study)


@receiver(annotation_submitted)
def close_complete_round(sender, annotation, **kwargs) -> None:
    item = annotation.item  # its n_done is exact: annotation_submit read it back
    if item.round_number is None or item.is_gold or item.n_done < item.redundancy:
        return  # only the annotation that completes an item can complete its round
    if services.round_close_if_complete(item.study_id, item.round_number):
        study_id, number = item.study_id, item.round_number
        transaction.on_commit(lambda: decide_round.delay(study_id, number))


@receiver(items_skipped)
def close_round_of_skipped(sender, study_id: int, round_number: int, **kwargs) -> None:
    """A skipped judge-clean item leaves its round: that may complete it."""
    if services.round_close_if_complete(study_id, round_number):
        transaction.on_commit(lambda: decide_round.delay(study_id, round_number))
