"""The admin's job page in real Chromium, with a real Celery worker doing the jobs: a
running job shows its progress and refreshes itself, a cancel stops it; a large upload
lands on its job page, which ends with a link to the study; a label export lands on its
job page, which ends with a download link that downloads the file."""

import csv
import io

import pytest
from django.contrib.auth.models import User
from django.db import connection
from playwright.sync_api import expect

from annotator import jobs
from annotator.models import ImportJob, Study
from tests.conftest import pairwise_bundle
from tests.services import CeleryWorker, require_postgres_and_redis
from tests.unit.test_report import annotate


@pytest.mark.django_db(transaction=True)
def test_job_pages_show_progress_and_end_with_the_study_or_a_download(
    base_url, page, settings, tmp_path
):
    require_postgres_and_redis()
    job_dir = tmp_path / "jobs"
    settings.HUMEVAL_JOB_DIR = job_dir
    settings.HUMEVAL_IMPORT_JOB_BYTES = 2_000
    owner = User.objects.create_superuser("researcher", "r@example.org", "pw-" + "x" * 10)
    page.goto(f"{base_url}/admin/login/")
    page.fill("#id_username", "researcher")
    page.fill("#id_password", "pw-" + "x" * 10)
    page.click("input[type=submit]")

    # a running export, 40 % written: shown, refreshed, then cancelled
    running = ImportJob.objects.create(
        owner=owner,
        operation="export",
        filename="s.csv",
        total=1000,
        progress=400,
        status="running",
        overrides={"format": "csv"},
    )
    page.goto(f"{base_url}/admin/annotator/study/jobs/{running.public_id}/")
    expect(page.locator("#job-status")).to_have_text("Running")
    expect(page.locator("#job-percent")).to_have_text("40%")
    expect(page.locator("#job-progress")).to_have_attribute("value", "40")
    ImportJob.objects.filter(pk=running.pk).update(progress=700)
    expect(page.locator("#job-percent")).to_have_text("70%")  # the page refreshed itself
    page.click("#job-cancel input[type=submit]")
    expect(page.locator("#job-status")).to_have_text("Failed")
    expect(page.locator("#job-errors")).to_contain_text(jobs.CANCELLED)
    expect(page.locator("#job-cancel")).to_have_count(0)

    worker = CeleryWorker(
        connection.settings_dict["NAME"],
        tmp_path / "celery.log",
        env={"HUMEVAL_JOB_DIR": str(job_dir)},
    )
    worker.start()
    try:
        big = tmp_path / "big.jsonl"
        big.write_bytes(pairwise_bundle(n_inputs=40))
        page.goto(f"{base_url}/admin/annotator/study/import/")
        page.set_input_files("#id_file", str(big))
        page.click("#study-create-form input[type=submit]")
        expect(page.locator("#job-progress")).to_be_visible()
        expect(page.locator("#job-study")).to_be_visible(timeout=60_000)
        expect(page.locator("#job-percent")).to_have_text("100%")
        study = Study.objects.get()
        annotate(study, workers=("w1", "w2"))
        page.click("#job-study")
        page.click("#study-export button[value=csv]")
        expect(page.locator("#job-progress")).to_be_visible()
        expect(page.locator("#job-download")).to_be_visible(timeout=60_000)
        expect(page.locator("#job-percent")).to_have_text("100%")
        with page.expect_download() as info:
            page.click("#job-download")
        rows = list(csv.DictReader(io.StringIO(open(info.value.path(), encoding="utf-8").read())))
    finally:
        worker.stop()
    assert len(rows) == study.annotations.count() == 80
    assert {r["input_id"] for r in rows} == {f"in{i}" for i in range(40)}
