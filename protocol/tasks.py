"""Celery tasks of the protocol: thin, idempotent, retried on database hiccups."""

from celery import shared_task
from celery.signals import worker_ready
from django.db import InterfaceError, OperationalError

from . import services
from .models import Round


@shared_task(
    name="protocol.decide_round",
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=10,
)
def decide_round(study_id: int, number: int) -> bool:
    """Decide a complete round and open the next; a no-op if it is decided already."""
    return services.round_decide(study_id, number)


@shared_task(name="protocol.recover_rounds")
def recover_rounds() -> int:
    """Queue the decision of every complete round still undecided (after a crash)."""
    pending = list(Round.objects.filter(state=Round.State.CLOSED).values_list("study_id", "number"))
    for study_id, number in pending:
        decide_round.delay(study_id, number)
    return len(pending)


@worker_ready.connect
def _recover_on_start(sender=None, **kwargs) -> None:
    recover_rounds.delay()
