"""Celery tasks of the annotator app: thin wrappers over services, safe to run twice."""

from celery import shared_task
from django.conf import settings

from . import judging, services


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


@shared_task(name="annotator.export_judgebench_job", acks_late=True)
def export_judgebench_job(job_id: int) -> str:
    """Write an export job's file, in its format (:func:`annotator.jobs.export_job_run`; the
    name is kept from when only Judge-Bench exports ran as jobs)."""
    from . import jobs

    return jobs.export_job_run(job_id).status


@shared_task(name="annotator.sweep_job_files", acks_late=True)
def sweep_job_files() -> int:
    """Delete expired export files (:func:`annotator.jobs.job_files_sweep`)."""
    from . import jobs

    return jobs.job_files_sweep()


# Routed to the "judge" queue (settings.CELERY_TASK_ROUTES), whose workers do nothing else.
# Acknowledged on receipt, not at the end: a run outlasts the broker's visibility timeout and
# would otherwise be delivered again while it runs; a lost run is started again by hand (a
# rerun skips what is stored). Celery's time limit backs up the run's own deadline.
@shared_task(
    name="annotator.run_judge",
    acks_late=False,
    soft_time_limit=settings.HUMEVAL_JUDGE_RUN_SECONDS + 120,
    time_limit=settings.HUMEVAL_JUDGE_RUN_SECONDS + 300,
)
def run_judge(run_id: int) -> str:
    """Carry out a queued judge run (:func:`annotator.judging.judge_run_execute`); the
    operator's key is read here from the worker's environment, never passed through the
    broker, and only for a URL listed in this worker's ``HUMEVAL_JUDGE_ENDPOINTS``."""
    return judging.judge_run_execute(run_id)
