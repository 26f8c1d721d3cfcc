"""Big files off the request path.

Imports: the API stores a large upload as a job file and answers 202 with the job's URL; a
Celery task (``annotator.import_study_job``; run at once in the embedded mode, where Celery
is eager) imports it through :func:`services.study_import` and deletes the file on every
outcome (done, a rejected file, an error). Exports: a large Judge-Bench export is written by
a Celery task (``annotator.export_judgebench_job``) instance by instance to a part file,
renamed when complete and deleted on any failure; its owner downloads it until the job's
``expires_at``, then :func:`job_files_sweep` deletes it. Both report progress on the job.
The command lines stay synchronous (``import_study``, ``export_labels``)."""

from __future__ import annotations

import logging
import os
import shutil
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from . import exports, services
from .errors import ImportRejected
from .models import Annotation, ImportJob, Study

#: At most one progress write per job in this many seconds.
PROGRESS_SECONDS = 0.5

log = logging.getLogger(__name__)


#: A job that stopped this way is failed with this reason.
CANCELLED = "cancelled by its owner"
STALE = "the worker stopped before the job finished; start it again"
ACTIVE = (ImportJob.Status.QUEUED, ImportJob.Status.RUNNING)


class JobCancelled(Exception):
    """The job's owner cancelled it while it ran."""


def export_format(job: ImportJob) -> str:
    """An export job's format (of :data:`exports.FORMATS`), kept in its ``overrides``."""
    return (job.overrides or {}).get("format", "judgebench")


def job_file(job: ImportJob) -> Path:
    """The job's file: an import's upload, an export's finished document."""
    if job.operation == ImportJob.Operation.EXPORT:
        suffix = exports.FORMATS[export_format(job)][1]
    else:
        suffix = ".upload"
    return Path(settings.HUMEVAL_JOB_DIR) / f"{job.public_id}{suffix}"


def _part_file(job: ImportJob) -> Path:
    return Path(settings.HUMEVAL_JOB_DIR) / f"{job.public_id}.part"


class _Progress:
    """Writes ``progress`` on the job row, at most every :data:`PROGRESS_SECONDS`; raises
    :class:`JobCancelled` when the row is no longer running (its owner cancelled it)."""

    def __init__(self, job: ImportJob) -> None:
        self.pk, self.last = job.pk, 0.0

    def __call__(self, value: int, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.last >= PROGRESS_SECONDS:
            self.last = now
            running = ImportJob.objects.filter(pk=self.pk, status=ImportJob.Status.RUNNING)
            if not running.update(progress=value):
                raise JobCancelled


class _Counting:
    """A binary file whose import reports its progress in bytes of twice its size: the
    position each read of the checking pass reaches (up to ``size``), then the inputs stored
    (:func:`services.study_import`'s ``progress``) as the rest of the way (up to
    ``2 * size``). Reads after the checking pass reached the end are not reported."""

    def __init__(self, file, report: _Progress, size: int) -> None:
        self._file, self._report, self._size = file, report, size
        self._checked = False

    def read(self, size: int = -1) -> bytes:
        data = self._file.read(size)
        if not self._checked:
            position = self._file.tell()
            self._checked = position >= self._size
            self._report(min(position, self._size))
        return data

    def stored(self, done: int, inputs: int) -> None:
        self._checked = True
        self._report(self._size + (self._size * done // inputs if inputs else self._size))

    def __getattr__(self, name: str):
        return getattr(self._file, name)


def import_job_create(
    upload: UploadedFile, *, overrides: dict[str, Any], owner: AbstractBaseUser
) -> ImportJob:
    """Keep ``upload`` as a job file (moved, not copied, when Django spooled it to disk)
    and queue its import once the job row is committed."""
    size = upload.size or 0
    job = ImportJob(owner=owner, filename=upload.name[:300], size=size, total=2 * size)
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
    """Import the job's file (once: a job already finished or cancelled is left as it is),
    record the outcome, and delete the file whatever happens."""
    job = ImportJob.objects.select_related("owner").get(pk=job_id)
    path = job_file(job)
    try:
        started = ImportJob.objects.filter(pk=job.pk, status__in=ACTIVE)
        if not started.update(status=ImportJob.Status.RUNNING):
            job.refresh_from_db()
            return job
        try:
            with path.open("rb") as data:
                counting = _Counting(data, _Progress(job), job.size)
                study = services.study_import(
                    counting,
                    filename=job.filename,
                    overrides=job.overrides,
                    owner=job.owner,
                    progress=counting.stored,
                )
        except JobCancelled:
            job.refresh_from_db()
            return job
        except ImportRejected as exc:
            job.status, job.errors = ImportJob.Status.FAILED, exc.errors
        except FileNotFoundError:
            job.status, job.errors = ImportJob.Status.FAILED, ["the uploaded file is gone"]
        except Exception:
            log.exception("import job %s failed", job.public_id)
            job.status, job.errors = ImportJob.Status.FAILED, ["the import failed on the server"]
        else:
            # the study exists: recorded even if a cancel came too late to stop it
            job.status, job.study, job.progress = ImportJob.Status.DONE, study, job.total
            job.errors = []
        job.finished_at = timezone.now()
        fields = ["status", "errors", "study", "finished_at", "progress"]
        finished = ImportJob.objects.filter(pk=job.pk)
        if job.status != ImportJob.Status.DONE:
            finished = finished.filter(status__in=ACTIVE)
        finished.update(**{name: getattr(job, name) for name in fields})
        job.refresh_from_db()
        return job
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def export_job_needed(study: Study, asked: bool) -> bool:
    """Whether the API's Judge-Bench export of ``study`` runs as a job: when asked
    (``?async=1``) or above ``HUMEVAL_EXPORT_JOB_LABELS`` labels."""
    if asked:
        return True
    limit = settings.HUMEVAL_EXPORT_JOB_LABELS
    return Annotation.objects.filter(study=study)[: limit + 1].count() > limit


def export_job_create(
    study: Study, *, owner: AbstractBaseUser, fmt: str = "judgebench"
) -> ImportJob:
    """Queue an export of ``study`` as ``fmt`` (of :data:`exports.FORMATS`; checked by the
    caller: ``owner`` may read it, a Judge-Bench one is of a kind with that form) once the job
    row is committed."""
    job = ImportJob.objects.create(
        owner=owner,
        operation=ImportJob.Operation.EXPORT,
        study=study,
        filename=f"study-{study.pk}{exports.FORMATS[fmt][1]}",
        total=exports.export_total(study, fmt),
        overrides={"format": fmt},
    )
    from .tasks import export_judgebench_job

    transaction.on_commit(lambda: export_judgebench_job.delay(job.pk))
    return job


def export_job_run(job_id: int) -> ImportJob:
    """Write the job's study in its format to a part file, piece by piece, then rename it
    to the job's file (once: a finished or cancelled job is left as it is). On any failure,
    a cancel, or a study deleted meanwhile, the part file is deleted and the job failed."""
    job = ImportJob.objects.select_related("study").get(pk=job_id)
    if not ImportJob.objects.filter(pk=job.pk, status__in=ACTIVE).update(
        status=ImportJob.Status.RUNNING
    ):
        job.refresh_from_db()
        return job
    part, path = _part_file(job), job_file(job)
    progress = _Progress(job)
    try:
        if job.study is None:
            raise LookupError("the study is gone")
        part.parent.mkdir(parents=True, exist_ok=True)
        with part.open("w", encoding="utf-8", newline="") as out:
            for chunk in exports.export_chunks(job.study, export_format(job), progress=progress):
                out.write(chunk)
        os.replace(part, path)
    except JobCancelled:
        pass
    except LookupError as exc:
        job.status, job.errors = ImportJob.Status.FAILED, [str(exc)]
    except Exception:
        log.exception("export job %s failed", job.public_id)
        job.status, job.errors = ImportJob.Status.FAILED, ["the export failed on the server"]
    else:
        job.status, job.size, job.progress = ImportJob.Status.DONE, path.stat().st_size, job.total
        job.expires_at = timezone.now() + timedelta(seconds=settings.HUMEVAL_EXPORT_KEEP_SECONDS)
    finally:
        part.unlink(missing_ok=True)
    job.finished_at = timezone.now()
    fields = ["status", "errors", "size", "progress", "expires_at", "finished_at"]
    if job.status == ImportJob.Status.RUNNING or not ImportJob.objects.filter(
        pk=job.pk, status__in=ACTIVE
    ).update(**{name: getattr(job, name) for name in fields}):
        path.unlink(missing_ok=True)  # cancelled meanwhile: nothing is kept
    elif job.status != ImportJob.Status.DONE:
        path.unlink(missing_ok=True)
    job.refresh_from_db()
    return job


def job_cancel(job: ImportJob) -> bool:
    """Stop a queued or running job of its owner: failed at once with :data:`CANCELLED`,
    its files deleted (a running one stops at its next progress write, within about
    :data:`PROGRESS_SECONDS`, and an import's transaction is rolled back). False when the
    job had already finished."""
    stopped = ImportJob.objects.filter(pk=job.pk, status__in=ACTIVE).update(
        status=ImportJob.Status.FAILED, errors=[CANCELLED], finished_at=timezone.now()
    )
    if stopped:
        _unlink_files(job)
    return bool(stopped)


def _unlink_files(job: ImportJob) -> int:
    gone = 0
    for path in (job_file(job), _part_file(job)):
        try:
            path.unlink()
            gone += 1
        except FileNotFoundError:
            pass
    return gone


def export_job_file(job: ImportJob) -> Path | None:
    """The finished export's file while it is kept, else ``None``."""
    if job.operation != ImportJob.Operation.EXPORT or job.status != ImportJob.Status.DONE:
        return None
    if job.expires_at is None or job.expires_at <= timezone.now():
        return None
    path = job_file(job)
    return path if path.exists() else None


def job_files_sweep() -> int:
    """Delete the files of exports past ``expires_at``, of failed jobs, and of jobs whose
    worker died (unfinished ``HUMEVAL_JOB_STALE_SECONDS`` after they were created: failed
    with :data:`STALE`); returns how many files were deleted. (An import's upload is also
    deleted by its own run, whatever its outcome.)"""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.HUMEVAL_JOB_STALE_SECONDS)
    ImportJob.objects.filter(status__in=ACTIVE, created_at__lte=stale).update(
        status=ImportJob.Status.FAILED, errors=[STALE], finished_at=now
    )
    gone = 0
    finished = ImportJob.objects.filter(
        Q(operation=ImportJob.Operation.EXPORT, expires_at__lte=now)
        | Q(status=ImportJob.Status.FAILED)
    )
    for job in finished.iterator():
        gone += _unlink_files(job)
    return gone
