"""A Judge-Bench API export handed to a real Celery worker (with beat): 202 at once, the job
polled to its download, the same document as the streamed answer, then deleted by the
periodic sweep once expired; no part file left (``annotator/jobs.py``)."""

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

from annotator.models import ImportJob
from tests.conftest import pairwise_bundle
from tests.services import CeleryWorker, wait_for
from tests.unit.test_report import annotate, client_for


@pytest.mark.django_db(transaction=True)
def test_an_api_export_is_written_by_the_worker_served_then_swept(tmp_path, settings, make_study):
    jobs = tmp_path / "jobs"
    settings.HUMEVAL_JOB_DIR = jobs
    settings.HUMEVAL_EXPORT_JOB_LABELS = 10
    study = make_study(pairwise_bundle(n_inputs=30, systems=("a", "b", "c")), redundancy=2)
    annotate(study, workers=("w1", "w2"))
    owner = User.objects.create_user("owner", password="x" * 12)
    study.researchers.add(owner)
    client = client_for(owner)
    worker = CeleryWorker(
        connection.settings_dict["NAME"],
        tmp_path / "celery.log",
        beat=True,
        env={"HUMEVAL_JOB_DIR": str(jobs), "HUMEVAL_SWEEP_SECONDS": "1"},
    )
    worker.start()
    try:
        stranger = client_for(User.objects.create_user("stranger", password="x" * 12))
        assert stranger.get(f"/api/studies/{study.pk}/judgebench/").status_code == 404
        response = client.get(f"/api/studies/{study.pk}/judgebench/")  # above 10 labels
        assert response.status_code == 202
        url = response["Location"]
        wait_for(lambda: client.get(url).json()["status"] in ("done", "failed"), timeout=120)
        job = client.get(url).json()
        assert job["status"] == "done", (job, worker.log.read_text()[-3000:])
        assert job["progress"] == job["total"] == study.items.count()
        download = client.get(job["download"])
        assert download.status_code == 200
        body = b"".join(download.streaming_content)
        settings.HUMEVAL_EXPORT_JOB_LABELS = 10**9
        assert body == b"".join(
            client.get(f"/api/studies/{study.pk}/judgebench/").streaming_content
        )
        assert len(json.loads(body)["instances"]) == study.items.count() == 90
        assert [p.name for p in jobs.iterdir()] == [f"{job['id']}.judgebench.json"]
        # expired: the beat's sweep deletes it
        expired = timezone.now() - timedelta(seconds=1)
        ImportJob.objects.filter(public_id=job["id"]).update(expires_at=expired)
        wait_for(lambda: not any(jobs.iterdir()), timeout=60)
    finally:
        worker.stop()
    log = worker.log.read_text()
    assert "annotator.export_judgebench_job" in log and "annotator.sweep_job_files" in log
    assert ImportJob.objects.count() == 1  # the stranger's request made none
    assert client.get(url).json()["download"] is None
