"""Celery tasks of the annotator app: thin wrappers over services, safe to run twice."""

from celery import shared_task

from . import services


@shared_task(name="annotator.release_expired_leases", acks_late=True)
def release_expired_leases() -> int:
    """Give expired assignments back to the pool; returns how many were released."""
    return services.assignment_release_expired()
