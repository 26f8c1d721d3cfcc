"""Large API imports run as background jobs (``annotator/jobs.py``): 202 and a job URL,
the job polled to its outcome, and no file left behind after success, a rejected file or
a failure. Celery is eager here (the embedded mode); tests/integration runs a real worker."""

import io

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotator import services
from annotator.models import ImportJob, Input, Study
from tests.conftest import pairwise_bundle

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def dirs(settings, tmp_path):
    """The job directory and Django's upload spool, each watched for leftovers."""
    settings.HUMEVAL_JOB_DIR = tmp_path / "jobs"
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path / "uploads")
    (tmp_path / "uploads").mkdir()
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 1000  # spooled to disk, as a large upload is
    settings.HUMEVAL_IMPORT_JOB_BYTES = 2000
    return [tmp_path / "jobs", tmp_path / "uploads"]


def client_of(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture
def researcher():
    user = User.objects.create_user("res", password="x" * 12)
    user.user_permissions.add(Permission.objects.get(codename="add_study"))
    return User.objects.get(pk=user.pk)


def upload(data: bytes, name: str = "big.jsonl") -> io.BytesIO:
    file = io.BytesIO(data)
    file.name = name
    return file


def leftovers(dirs) -> list:
    return [p for d in dirs if d.exists() for p in d.iterdir()]


def test_a_large_import_answers_202_and_its_job_gives_the_study(researcher, dirs):
    client = client_of(researcher)
    data = pairwise_bundle(n_inputs=40)
    assert len(data) > 2000
    response = client.post(
        "/api/studies/import/", {"file": upload(data), "name": "large"}, format="multipart"
    )
    assert response.status_code == 202
    job = response.json()
    assert response["Location"] == job["url"] and job["url"].endswith(f"/api/jobs/{job['id']}/")
    polled = client.get(f"/api/jobs/{job['id']}/").json()
    assert polled["status"] == "done" and polled["errors"] == []
    study = Study.objects.get(pk=polled["study"]["id"])
    assert study.name == "large" and study.inputs.count() == 40
    assert researcher in study.researchers.all()
    assert leftovers(dirs) == []
    # another researcher cannot see the job
    other = User.objects.create_user("other", password="x" * 12)
    assert client_of(other).get(f"/api/jobs/{job['id']}/").status_code == 404


def test_a_small_import_is_still_answered_at_once(researcher, dirs):
    response = client_of(researcher).post(
        "/api/studies/import/", {"file": upload(pairwise_bundle(n_inputs=1))}, format="multipart"
    )
    assert response.status_code == 201 and not ImportJob.objects.exists()


def test_a_bad_large_file_fails_its_job_with_every_reason_and_leaves_no_file(researcher, dirs):
    client = client_of(researcher)
    bad = b"".join(b'{"id": %d, "outputs": {}}\n' % i for i in range(200))
    response = client.post("/api/studies/import/", {"file": upload(bad)}, format="multipart")
    assert response.status_code == 202
    polled = client.get(response.json()["url"]).json()
    assert polled["status"] == "failed" and polled["study"] is None
    assert any("missing 'outputs'" in e for e in polled["errors"])
    assert not Study.objects.exists() and leftovers(dirs) == []


def test_a_job_that_crashes_leaves_no_file(researcher, dirs, monkeypatch):
    def crash(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(services, "study_import", crash)
    client = client_of(researcher)
    response = client.post(
        "/api/studies/import/", {"file": upload(pairwise_bundle(n_inputs=40))}, format="multipart"
    )
    assert response.status_code == 202
    polled = client.get(response.json()["url"]).json()
    assert polled["status"] == "failed"
    assert polled["errors"] == ["the import failed on the server"]  # no traceback to the client
    assert leftovers(dirs) == []


def test_an_import_job_reports_progress_through_checking_and_storing(researcher, dirs, monkeypatch):
    from annotator import jobs

    monkeypatch.setattr(jobs, "PROGRESS_SECONDS", 0)
    seen = []
    real = jobs._Progress.__call__

    def record(self, value, force=False):
        real(self, value, force)
        seen.append(value)

    monkeypatch.setattr(jobs._Progress, "__call__", record)
    stored = []  # the progress when each batch of inputs is written
    create = Input.objects.bulk_create

    def bulk_create(objs, *args, **kwargs):
        stored.append(seen[-1])
        return create(objs, *args, **kwargs)

    monkeypatch.setattr(Input.objects, "bulk_create", bulk_create)
    monkeypatch.setattr(services.studies, "BULK", 100)
    data = pairwise_bundle(n_inputs=1000)
    client = client_of(researcher)
    response = client.post("/api/studies/import/", {"file": upload(data)}, format="multipart")
    polled = client.get(response.json()["url"]).json()
    assert polled["operation"] == "import" and polled["status"] == "done"
    size = len(data)
    assert polled["size"] == size and polled["progress"] == polled["total"] == 2 * size
    assert seen == sorted(seen) and all(0 <= v <= 2 * size for v in seen)  # never back
    # checked whole before the first batch is written; then each batch stored moves it on
    assert len(stored) == 10 and stored[0] == size
    assert stored == sorted(set(stored)) and stored[-1] == size + size * 9 // 10
    assert polled["download"] is None
