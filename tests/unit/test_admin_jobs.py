"""The admin's big files as background jobs (``annotator/admin_jobs.py``, the jobs of
``annotator/jobs.py``): an upload above ``HUMEVAL_IMPORT_JOB_BYTES`` and every label export
answer at once with the job's page, which only its owner sees; cancel and a dead worker
leave no file. Celery is eager here (the embedded mode); a real worker runs them in
tests/integration/test_admin_jobs.py."""

import csv
import io
import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from annotator import jobs, selectors
from annotator.models import ImportJob, Study
from tests.conftest import PASSWORD, make_superuser, pairwise_bundle
from tests.unit.test_exports_by_kind import STUDIES, _study

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def job_dir(settings, tmp_path):
    settings.HUMEVAL_JOB_DIR = tmp_path / "jobs"
    return tmp_path / "jobs"


def files(job_dir) -> list[str]:
    return sorted(p.name for p in job_dir.iterdir()) if job_dir.exists() else []


def login(name: str) -> Client:
    make_superuser(name)
    client = Client()
    client.login(username=name, password=PASSWORD)
    return client


def upload(data: bytes, name: str = "big.jsonl") -> io.BytesIO:
    f = io.BytesIO(data)
    f.name = name
    return f


def test_a_large_admin_upload_is_imported_as_a_job_with_its_page(job_dir, settings):
    settings.HUMEVAL_IMPORT_JOB_BYTES = 1000
    data = pairwise_bundle(n_inputs=40)
    assert len(data) > 1000
    client = login("res")
    response = client.post(
        "/admin/annotator/study/import/", {"file": upload(data), "name": "Big one"}
    )
    job = ImportJob.objects.get()
    assert response.status_code == 302
    assert response.url == f"/admin/annotator/study/jobs/{job.public_id}/"
    assert job.status == "done" and job.progress == job.total == 2 * job.size == 2 * len(data)
    study = Study.objects.get()
    assert study.name == "Big one" and study.inputs.count() == 40
    page = client.get(response.url)
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="job-status">Done<' in text and 'value="100"' in text
    assert f"/admin/annotator/study/{study.pk}/change/" in text
    assert 'http-equiv="refresh"' not in text  # finished: no more refreshing
    assert files(job_dir) == []
    # another user, even a superuser, does not see it
    assert login("other").get(response.url).status_code == 404
    # a small upload stays synchronous
    small = client.post("/admin/annotator/study/import/", {"file": upload(pairwise_bundle())})
    assert small.status_code == 302 and small.url.endswith("/change/")
    assert ImportJob.objects.count() == 1


def test_a_rejected_large_upload_shows_its_errors_on_the_job_page(job_dir, settings):
    settings.HUMEVAL_IMPORT_JOB_BYTES = 100
    bad = b'{"id": "q", "outputs": {"a": "x"}}\n{"id": "q", "outputs": {"a": "y"}}\n' * 3
    client = login("res")
    response = client.post("/admin/annotator/study/import/", {"file": upload(bad)})
    page = client.get(response.url).content.decode()
    assert 'id="job-status">Failed<' in page and "duplicate input id" in page
    assert not Study.objects.exists() and files(job_dir) == []


@pytest.mark.parametrize("name", list(STUDIES))
@pytest.mark.parametrize("fmt", ["csv", "jsonl", "json", "judgebench"])
def test_every_admin_export_runs_as_a_job_and_downloads(make_study, job_dir, name, fmt):
    study = _study(make_study, name)
    client = login("res")
    change = client.get(f"/admin/annotator/study/{study.pk}/change/").content.decode()
    offered = study.kind_impl.judgebench_form is not None or fmt != "judgebench"
    assert (f'name="format" value="{fmt}"' in change) == offered
    response = client.post(f"/admin/annotator/study/{study.pk}/export/", {"format": fmt})
    if not offered:
        assert response.status_code == 409 and b"Judge-Bench" in response.content
        assert not ImportJob.objects.exists() and files(job_dir) == []
        return
    job = ImportJob.objects.get()
    assert response.status_code == 302 and response.url.endswith(f"/jobs/{job.public_id}/")
    assert job.status == "done" and job.progress == job.total
    page = client.get(response.url).content.decode()
    link = f"/admin/annotator/study/jobs/{job.public_id}/download/"
    assert link in page
    download = client.get(link)
    assert download.status_code == 200 and "attachment" in download["Content-Disposition"]
    body = b"".join(download.streaming_content).decode()
    labels = study.annotations.count()
    if fmt == "csv":
        assert len(list(csv.DictReader(io.StringIO(body)))) == labels
    elif fmt == "jsonl":
        assert len(body.splitlines()) == labels
    elif fmt == "json":
        assert len(json.loads(body)) == labels
    else:
        assert json.loads(body) == selectors.study_judgebench(study)
    assert login("other").get(link).status_code == 404


def test_a_bad_export_format_is_refused_and_makes_no_job(make_study, job_dir):
    study = _study(make_study, "pairwise", annotated=False)
    client = login("res")
    url = f"/admin/annotator/study/{study.pk}/export/"
    assert client.post(url, {"format": "xlsx"}).status_code == 400
    assert client.get(url).status_code == 405
    assert not ImportJob.objects.exists()


def test_a_cancelled_job_stops_and_leaves_no_file(job_dir, settings):
    owner = User.objects.create_user("res")
    job = ImportJob.objects.create(owner=owner, filename="x.jsonl", size=10)
    job_dir.mkdir()
    jobs.job_file(job).write_bytes(pairwise_bundle())
    # running: its next progress write stops it
    ImportJob.objects.filter(pk=job.pk).update(status="running")
    assert jobs.job_cancel(job) and files(job_dir) == []
    with pytest.raises(jobs.JobCancelled):
        jobs._Progress(job)(5, force=True)
    job.refresh_from_db()
    assert job.status == "failed" and job.errors == [jobs.CANCELLED]
    assert not jobs.job_cancel(job)  # finished already
    # a queued one is never run
    queued = ImportJob.objects.create(owner=owner, filename="y.jsonl", size=10)
    jobs.job_file(queued).write_bytes(pairwise_bundle())
    assert jobs.job_cancel(queued)
    assert jobs.import_job_run(queued.pk).status == "failed"
    assert not Study.objects.exists() and files(job_dir) == []


def test_cancel_through_the_job_page_of_a_running_import(job_dir):
    client = login("res")
    owner = User.objects.get(username="res")
    job = ImportJob.objects.create(owner=owner, filename="x.jsonl", size=1000, status="running")
    job_dir.mkdir()
    jobs.job_file(job).write_bytes(b"x" * 1000)
    url = f"/admin/annotator/study/jobs/{job.public_id}/"
    page = client.get(url).content.decode()
    assert 'http-equiv="refresh"' in page and 'id="job-cancel"' in page
    assert login("other").post(url, {"cancel": "1"}).status_code == 404
    assert client.post(url, {"cancel": "1"}).status_code == 302
    job.refresh_from_db()
    assert job.status == "failed" and files(job_dir) == []
    assert jobs.CANCELLED in client.get(url).content.decode()


def test_the_sweep_fails_a_job_whose_worker_died_and_deletes_its_upload(job_dir, settings):
    owner = User.objects.create_user("res")
    job = ImportJob.objects.create(owner=owner, filename="x.jsonl", size=10, status="running")
    job_dir.mkdir()
    jobs.job_file(job).write_bytes(b"x" * 10)
    assert jobs.job_files_sweep() == 0 and len(files(job_dir)) == 1  # still within its time
    old = timezone.now() - timedelta(seconds=settings.HUMEVAL_JOB_STALE_SECONDS + 1)
    ImportJob.objects.filter(pk=job.pk).update(created_at=old)
    assert jobs.job_files_sweep() == 1 and files(job_dir) == []
    job.refresh_from_db()
    assert job.status == "failed" and job.errors == [jobs.STALE]
