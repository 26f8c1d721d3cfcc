"""The admin's "Rate with an LLM judge" in real Chromium: one heading, the kind's prompt in
an editable field, the listed endpoints each saying which key they send, a run queued for
the judge workers with the key it will send named, listed on the form page, then cancelled."""

import uuid

import pytest

from annotator import judging
from annotator.models import JudgeRun
from tests.conftest import PASSWORD, make_superuser, pairwise_bundle
from tests.services import require_postgres_and_redis

LISTED = "http://judge.invalid:8080/v1"


@pytest.mark.django_db(transaction=True)
def test_researcher_queues_a_judge_run_and_cancels_it(base_url, page, settings, monkeypatch):
    require_postgres_and_redis()
    from annotator import services, tasks

    # the run goes to the broker on a queue no worker reads: a Celery worker another test
    # of this process started would otherwise take it (and fail it) before it is read here
    held = f"judge-held-{uuid.uuid4().hex}"
    monkeypatch.setattr(
        tasks.run_judge, "delay", lambda pk: tasks.run_judge.apply_async((pk,), queue=held)
    )

    settings.HUMEVAL_JUDGE_ENDPOINTS = [(LISTED, "LAB_JUDGE_KEY")]
    study = services.study_import(pairwise_bundle(), filename="s.jsonl")
    make_superuser("researcher")
    page.goto(f"{base_url}/admin/login/")
    page.fill("#id_username", "researcher")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")

    def choose(action: str) -> None:
        page.goto(f"{base_url}/admin/annotator/study/")
        page.check(f"input[name=_selected_action][value='{study.pk}']")
        page.select_option("select[name=action]", action)
        page.click("button[name=index]")

    choose("run_judge")
    page.wait_for_selector("#id_prompt")
    headings = page.locator("h1", has_text="Rate with an LLM judge")
    assert headings.count() == 1
    default = judging.PromptTemplate.default(study).text
    assert page.input_value("#id_prompt") == default
    labels = page.inner_text("#id_endpoint")
    assert f"{LISTED} (sends the operator's key LAB_JUDGE_KEY)" in labels
    assert "Your own endpoint" in labels

    page.check(f"input[name=endpoint][value='{LISTED}']")
    page.fill("#id_model", "lab-model")
    page.fill("#id_prompt", default.replace("You are comparing", "Compare"))
    page.click("input[name=apply]")
    message = page.locator(".messagelist li").first.inner_text()
    assert "the judge run is queued; it will send the operator's key LAB_JUDGE_KEY" in message
    assert "not set" not in message
    run = JudgeRun.objects.get()
    assert run.state == "queued" and run.prompt.startswith("Compare two responses")
    with tasks.run_judge.app.connection_for_read() as conn:  # sent, waiting on the broker
        assert conn.default_channel.queue_declare(held, passive=True).message_count == 1

    choose("run_judge")
    row = page.locator("table.judge-runs tbody tr").first.inner_text()
    assert "lab-model" in row and "Queued" in row

    choose("cancel_judge_runs")
    assert "1 judge run(s) asked to stop" in page.locator(".messagelist li").first.inner_text()
    assert JudgeRun.objects.get().state == "cancelled"
