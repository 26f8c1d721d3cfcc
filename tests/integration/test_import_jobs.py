"""A large API import handed to a real Celery worker process: 202 at once, the job polled
to its study, no file left in the job directory (``annotator/jobs.py``)."""

import io

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotator.models import Study
from tests.conftest import pairwise_bundle
from tests.services import wait_for


@pytest.mark.django_db(transaction=True)
def test_a_large_api_import_is_done_by_the_worker_and_leaves_no_file(job_worker, settings):
    jobs, worker = settings.HUMEVAL_JOB_DIR, job_worker
    settings.HUMEVAL_IMPORT_JOB_BYTES = 10_000
    user = User.objects.create_user("res", password="x" * 12)
    user.user_permissions.add(Permission.objects.get(codename="add_study"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    data = io.BytesIO(pairwise_bundle(n_inputs=300))
    data.name = "large.jsonl"
    response = client.post("/api/studies/import/", {"file": data}, format="multipart")
    assert response.status_code == 202
    url = response.json()["url"]
    wait_for(lambda: client.get(url).json()["status"] in ("done", "failed"), timeout=120)
    job = client.get(url).json()
    assert job["status"] == "done", (job, worker.log.read_text()[-3000:])
    assert Study.objects.get(pk=job["study"]["id"]).inputs.count() == 300
    assert "annotator.import_study_job" in worker.log.read_text()
    assert list(jobs.iterdir()) == []
