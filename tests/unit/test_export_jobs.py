"""Large Judge-Bench exports run as background jobs (``annotator/jobs.py``): 202 and a job
URL, progress on the job, a download for its owner only while it is kept, the file deleted
by the sweep after that and on failure, no part file left on any outcome. Celery is eager
here (the embedded mode); tests/integration/test_export_jobs.py runs a real worker."""

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from annotator import jobs, selectors
from annotator.models import ImportJob
from tests.unit.test_exports_by_kind import _owner, _study
from tests.unit.test_report import client_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def job_dir(settings, tmp_path):
    settings.HUMEVAL_JOB_DIR = tmp_path / "jobs"
    return tmp_path / "jobs"


def files(job_dir) -> list[str]:
    return sorted(p.name for p in job_dir.iterdir()) if job_dir.exists() else []


def streamed(response) -> bytes:
    return b"".join(response.streaming_content)


@pytest.mark.parametrize("name", ["pairwise", "likert"])
def test_an_async_export_answers_202_and_its_job_serves_the_same_document(
    make_study, job_dir, name
):
    study = _study(make_study, name)
    client = client_for(_owner(study))
    at_once = client.get(f"/api/studies/{study.pk}/judgebench/")
    assert at_once.status_code == 200 and not ImportJob.objects.exists()
    response = client.get(f"/api/studies/{study.pk}/judgebench/?async=1")
    assert response.status_code == 202
    job = response.json()
    assert response["Location"] == job["url"] and job["url"].endswith(f"/api/jobs/{job['id']}/")
    polled = client.get(job["url"]).json()
    assert polled["operation"] == "export" and polled["status"] == "done", polled
    assert polled["progress"] == polled["total"] == study.items.count()
    assert polled["download"].endswith(f"/api/jobs/{job['id']}/download/")
    download = client.get(polled["download"])
    assert download.status_code == 200 and download["Content-Type"] == "application/json"
    assert "attachment" in download["Content-Disposition"]
    body = streamed(download)
    assert body == streamed(at_once)
    assert json.loads(body) == selectors.study_judgebench(study)
    assert polled["size"] == len(body)
    assert files(job_dir) == [f"{job['id']}.judgebench.json"]  # no part file
    # someone else sees neither the job nor its file
    other = client_for(User.objects.create_user("other", password="x" * 12))
    assert other.get(job["url"]).status_code == 404
    assert other.get(polled["download"]).status_code == 404


@pytest.mark.parametrize("name", ["ranking", "error_spans"])
def test_a_kind_without_a_form_is_still_refused_with_409_and_no_job(make_study, job_dir, name):
    study = _study(make_study, name)
    response = client_for(_owner(study)).get(f"/api/studies/{study.pk}/judgebench/?async=1")
    assert response.status_code == 409
    assert not ImportJob.objects.exists() and files(job_dir) == []


def test_a_study_above_the_label_threshold_is_exported_as_a_job(make_study, job_dir, settings):
    study = _study(make_study, "pairwise")
    client = client_for(_owner(study))
    settings.HUMEVAL_EXPORT_JOB_LABELS = study.annotations.count()
    assert client.get(f"/api/studies/{study.pk}/judgebench/").status_code == 200
    settings.HUMEVAL_EXPORT_JOB_LABELS = study.annotations.count() - 1
    response = client.get(f"/api/studies/{study.pk}/judgebench/")
    assert response.status_code == 202
    assert client.get(response["Location"]).json()["status"] == "done"


def test_a_study_the_user_cannot_see_gives_404_and_no_job(make_study, job_dir):
    study = _study(make_study, "pairwise")
    stranger = client_for(User.objects.create_user("stranger", password="x" * 12))
    assert stranger.get(f"/api/studies/{study.pk}/judgebench/?async=1").status_code == 404
    assert not ImportJob.objects.exists() and files(job_dir) == []


def test_an_export_that_fails_midway_leaves_no_file(make_study, job_dir, monkeypatch):
    study = _study(make_study, "likert")
    real = selectors.study_judgebench_chunks

    def fails(*args, **kwargs):
        chunks = real(*args, **kwargs)
        yield next(chunks)
        raise RuntimeError("disk full")

    monkeypatch.setattr(selectors, "study_judgebench_chunks", fails)
    client = client_for(_owner(study))
    response = client.get(f"/api/studies/{study.pk}/judgebench/?async=1")
    polled = client.get(response["Location"]).json()
    assert polled["status"] == "failed" and polled["download"] is None
    assert polled["errors"] == ["the export failed on the server"]  # no traceback
    assert files(job_dir) == []
    assert client.get(f"/api/jobs/{polled['id']}/download/").status_code == 404


def test_the_sweep_deletes_an_expired_export_and_its_link_goes(make_study, job_dir):
    study = _study(make_study, "pairwise")
    client = client_for(_owner(study))
    url = client.get(f"/api/studies/{study.pk}/judgebench/?async=1")["Location"]
    job = ImportJob.objects.get()
    assert jobs.job_files_sweep() == 0 and len(files(job_dir)) == 1  # kept until it expires
    ImportJob.objects.filter(pk=job.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert client.get(url).json()["download"] is None
    assert client.get(f"/api/jobs/{job.public_id}/download/").status_code == 404
    assert jobs.job_files_sweep() == 1 and files(job_dir) == []


def test_the_sweep_deletes_the_part_file_of_an_export_whose_worker_died(
    make_study, job_dir, settings
):
    study = _study(make_study, "pairwise")
    job = ImportJob.objects.create(
        owner=_owner(study), operation=ImportJob.Operation.EXPORT, study=study, status="running"
    )
    job_dir.mkdir()
    (job_dir / f"{job.public_id}.part").write_text("{")
    assert jobs.job_files_sweep() == 0
    old = timezone.now() - timedelta(seconds=settings.HUMEVAL_EXPORT_KEEP_SECONDS + 1)
    ImportJob.objects.filter(pk=job.pk).update(created_at=old)
    assert jobs.job_files_sweep() == 1 and files(job_dir) == []


def test_an_export_job_reports_instances_written_as_it_goes(make_study, job_dir, monkeypatch):
    from formats import judgebench_export

    study = _study(make_study, "pairwise")
    monkeypatch.setattr(judgebench_export, "PROGRESS_EVERY", 1)
    monkeypatch.setattr(jobs, "PROGRESS_SECONDS", 0)
    seen = []
    real = jobs._Progress.__call__

    def record(self, value, force=False):
        real(self, value, force)
        seen.append(ImportJob.objects.get(pk=self.pk).progress)

    monkeypatch.setattr(jobs._Progress, "__call__", record)
    client_for(_owner(study)).get(f"/api/studies/{study.pk}/judgebench/?async=1")
    n = study.items.count()
    assert seen[:n] == list(range(1, n + 1))
    assert ImportJob.objects.get().progress == n


def test_a_bad_async_value_is_a_400_and_starts_nothing(make_study, job_dir):
    study = _study(make_study, "pairwise")
    response = client_for(_owner(study)).get(f"/api/studies/{study.pk}/judgebench/?async=yes")
    assert response.status_code == 400 and "async" in response.json()
    assert not ImportJob.objects.exists()
