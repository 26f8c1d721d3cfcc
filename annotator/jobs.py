"""Large imports off the request path: the API stores the upload as a job file and answers
202 with the job's URL; a Celery task (``annotator.import_study_job``; run at once in the
embedded mode, where Celery is eager) imports it through :func:`services.study_import` and
deletes the file on every outcome (done, a rejected file, an error). The command line stays
synchronous (``import_study``)."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils import timezone

from . import services
from .errors import ImportRejected
from .models import ImportJob

log = logging.getLogger(__name__)


def job_file(job: ImportJob) -> Path:
    return Path(settings.HUMEVAL_JOB_DIR) / f"{job.public_id}.upload"


def import_job_create(
    upload: UploadedFile, *, overrides: dict[str, Any], owner: AbstractBaseUser
) -> ImportJob:
    """Keep ``upload`` as a job file (moved, not copied, when Django spooled it to disk)
    and queue its import once the job row is committed."""
    job = ImportJob(owner=owner, filename=upload.name[:300], size=upload.size or 0)
    job.overrides = overrides
    path = job_file(job)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        spooled = getattr(upload, "temporary_file_path", None)
        if spooled is not None:
            upload.file.flush()
            shutil.move(spooled(), path)
        else:
            with path.open("wb") as out:
                for chunk in upload.chunks():
                    out.write(chunk)
        job.save()
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    from .tasks import import_study_job

    transaction.on_commit(lambda: import_study_job.delay(job.pk))
    return job


def import_job_run(job_id: int) -> ImportJob:
    """Import the job's file (once: a job already finished is left as it is), record the
    outcome, and delete the file whatever happens."""
    job = ImportJob.objects.select_related("owner").get(pk=job_id)
    path = job_file(job)
    try:
        if job.status in (ImportJob.Status.DONE, ImportJob.Status.FAILED):
            return job
        ImportJob.objects.filter(pk=job.pk).update(status=ImportJob.Status.RUNNING)
        try:
            with path.open("rb") as data:
                study = services.study_import(
                    data, filename=job.filename, overrides=job.overrides, owner=job.owner
                )
        except ImportRejected as exc:
            job.status, job.errors = ImportJob.Status.FAILED, exc.errors
        except FileNotFoundError:
            job.status, job.errors = ImportJob.Status.FAILED, ["the uploaded file is gone"]
        except Exception:
            log.exception("import job %s failed", job.public_id)
            job.status, job.errors = ImportJob.Status.FAILED, ["the import failed on the server"]
        else:
            job.status, job.study = ImportJob.Status.DONE, study
        job.finished_at = timezone.now()
        job.save(update_fields=["status", "errors", "study", "finished_at"])
        return job
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
