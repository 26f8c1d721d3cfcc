"""Big files off the admin's request path: an uploaded study above
``HUMEVAL_IMPORT_JOB_BYTES`` and every label export (CSV, JSON Lines, JSON, Judge-Bench)
run as the background jobs of :mod:`annotator.jobs`, the API's own; the admin answers at
once with the job's page (status, progress, errors, the study or the download when done, a
cancel button while it runs), which only the job's owner sees. No logic of its own."""

from __future__ import annotations

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse

from . import exports, jobs
from .errors import NoJudgeBenchForm
from .models import ImportJob, Study


def job_url(job: ImportJob) -> str:
    return reverse("admin:annotator_study_job", args=[job.public_id])


def import_needs_job(upload) -> bool:
    """An uploaded file (not pasted rows) above ``HUMEVAL_IMPORT_JOB_BYTES``."""
    return isinstance(upload, UploadedFile) and (upload.size or 0) > (
        settings.HUMEVAL_IMPORT_JOB_BYTES
    )


def import_start(request: HttpRequest, upload: UploadedFile, overrides: dict) -> HttpResponse:
    job = jobs.import_job_create(upload, overrides=overrides, owner=request.user)
    return redirect(job_url(job))


def export_formats(study: Study) -> list[dict]:
    """The export buttons a study's page offers: Judge-Bench only for a kind with that form."""
    offered = [*exports.ROW_FORMATS]
    if study.kind_impl.judgebench_form:
        offered.append("judgebench")
    return [{"value": fmt, "label": exports.FORMATS[fmt][0]} for fmt in offered]


def export_start(request: HttpRequest, study: Study) -> HttpResponse:
    """POST ``format``: queue the export and show its job; a bad format answers 400, a
    Judge-Bench export of a kind without that form 409, and neither makes a job."""
    if request.method != "POST":
        return HttpResponse("Export with POST.", status=405, content_type="text/plain")
    fmt = request.POST.get("format", "")
    if fmt not in exports.FORMATS:
        choices = ", ".join(exports.FORMATS)
        return HttpResponse(
            f"No export format {fmt!r}: one of {choices}.", status=400, content_type="text/plain"
        )
    if fmt == "judgebench":
        try:
            exports.export_chunks(study, fmt).close()  # refused before anything is read
        except NoJudgeBenchForm as exc:
            return HttpResponse(exc.message, status=exc.status, content_type="text/plain")
    job = jobs.export_job_create(study, owner=request.user, fmt=fmt)
    return redirect(job_url(job))


def _own_job(request: HttpRequest, public_id) -> ImportJob:
    job = (
        ImportJob.objects.filter(owner=request.user, public_id=public_id)
        .select_related("study")
        .first()
    )
    if job is None:
        raise Http404("No such job of yours.")
    return job


def job_page(request: HttpRequest, public_id, context: dict) -> HttpResponse:
    """The job's page, refreshing itself while the job is queued or running; POST
    ``cancel`` stops it (its files deleted)."""
    job = _own_job(request, public_id)
    if request.method == "POST" and "cancel" in request.POST:
        jobs.job_cancel(job)
        return redirect(job_url(job))
    active = job.status in jobs.ACTIVE
    of = job.total
    storing = job.operation == ImportJob.Operation.IMPORT and job.progress > job.size
    percent = min(100, round(100 * job.progress / of)) if of else (0 if active else 100)
    download = jobs.export_job_file(job) is not None
    context = {
        **context,
        "title": f"{'Import' if job.operation == ImportJob.Operation.IMPORT else 'Export'} of "
        f"{job.filename}",
        "job": job,
        "active": active,
        "progress_of": of,
        "phase": "stored" if storing else "checked",
        "percent": percent,
        "export_format": exports.FORMATS[jobs.export_format(job)][0]
        if job.operation == ImportJob.Operation.EXPORT
        else "",
        "download_url": reverse("admin:annotator_study_job_download", args=[job.public_id])
        if download
        else "",
        "study_url": reverse("admin:annotator_study_change", args=[job.study_id])
        if job.study_id and job.operation == ImportJob.Operation.IMPORT
        else "",
    }
    return TemplateResponse(request, "admin/annotator/study/job.html", context)


def job_download(request: HttpRequest, public_id) -> FileResponse:
    """A finished export's file, streamed, to its owner while it is kept (else 404)."""
    job = _own_job(request, public_id)
    path = jobs.export_job_file(job)
    if path is None:
        raise Http404("This export is not finished or is no longer kept.")
    return FileResponse(path.open("rb"), as_attachment=True, filename=job.filename)
