"""Celery tasks of the annotator app: thin wrappers over services, safe to run twice."""

import os

from celery import shared_task

from . import judging, services
from .models import Study


@shared_task(name="annotator.release_expired_leases", acks_late=True)
def release_expired_leases() -> int:
    """Give expired assignments back to the pool; returns how many were released."""
    return services.assignment_release_expired()


@shared_task(name="annotator.sweep_unused_entries", acks_late=True)
def sweep_unused_entries() -> int:
    """Delete entries that never led to work (:func:`services.participations_sweep_unused`)."""
    return services.participations_sweep_unused()


@shared_task(name="annotator.import_study_job", acks_late=True)
def import_study_job(job_id: int) -> str:
    """Import a large uploaded study (:func:`annotator.jobs.import_job_run`)."""
    from . import jobs

    return jobs.import_job_run(job_id).status


@shared_task(name="annotator.run_judge")
def run_judge(study_id: int, api_key_env: str, **options) -> str:
    """Rate a study with an LLM judge (:func:`annotator.judging.judge_run`); the key is
    read here from the worker's environment, never passed through the broker."""
    study = Study.objects.get(pk=study_id)
    api_key = os.environ.get(api_key_env) or None
    return judging.judge_run(study, api_key=api_key, **options).summary()
