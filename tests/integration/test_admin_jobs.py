"""The admin's large import and its exports handed to a real Celery worker process: the
admin answers at once with the job's page, the worker does the job, the page then offers
the study or the download, and no file is left in the job directory but the finished
export (``annotator/admin_jobs.py``, ``annotator/jobs.py``)."""

import csv
import io
import json

import pytest
from django.test import Client

from annotator.models import ImportJob, Study
from tests.conftest import boss_client, pairwise_bundle
from tests.services import wait_for
from tests.unit.test_report import annotate


def finished(client: Client, url: str) -> str:
    page = client.get(url).content.decode()
    return (
        "Done"
        if 'id="job-status">Done<' in page
        else ("Failed" if 'id="job-status">Failed<' in page else "")
    )


@pytest.mark.django_db(transaction=True)
def test_admin_import_and_exports_are_done_by_the_worker(job_worker, settings):
    jobs, worker = settings.HUMEVAL_JOB_DIR, job_worker
    settings.HUMEVAL_IMPORT_JOB_BYTES = 2_000
    client = boss_client()
    data = io.BytesIO(pairwise_bundle(n_inputs=60, systems=("a", "b")))
    data.name = "large.jsonl"
    response = client.post("/admin/annotator/study/import/", {"file": data})
    assert response.status_code == 302 and "/admin/annotator/study/jobs/" in response.url
    wait_for(lambda: finished(client, response.url), timeout=120)
    page = client.get(response.url).content.decode()
    assert finished(client, response.url) == "Done", (page, worker.log.read_text()[-3000:])
    study = Study.objects.get()
    assert study.inputs.count() == 60 and f"/{study.pk}/change/" in page
    assert list(jobs.iterdir()) == []

    annotate(study, workers=("w1", "w2"))
    for fmt in ("csv", "judgebench"):
        response = client.post(f"/admin/annotator/study/{study.pk}/export/", {"format": fmt})
        assert response.status_code == 302
        wait_for(lambda url=response.url: finished(client, url), timeout=120)
        assert finished(client, response.url) == "Done", worker.log.read_text()[-3000:]
        job = ImportJob.objects.get(operation="export", overrides__format=fmt)
        download = client.get(f"/admin/annotator/study/jobs/{job.public_id}/download/")
        body = b"".join(download.streaming_content).decode()
        if fmt == "csv":
            assert len(list(csv.DictReader(io.StringIO(body)))) == study.annotations.count()
        else:
            assert len(json.loads(body)["instances"]) == study.items.count()
    worker.stop()
    log = worker.log.read_text()
    assert "annotator.import_study_job" in log and "annotator.export_judgebench_job" in log
    kept = sorted(p.name for p in jobs.iterdir())
    assert kept == sorted(
        f"{j.public_id}{'.csv' if j.overrides['format'] == 'csv' else '.judgebench.json'}"
        for j in ImportJob.objects.filter(operation="export")
    )  # the two finished exports, no upload and no part file
