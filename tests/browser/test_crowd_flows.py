"""Crowd paths in real Chromium: Prolific entry and codes, the qualification test, gold
checks until blocked, and an expired lease whose item goes to another worker."""

from datetime import timedelta

import pytest
from django.utils import timezone

from annotator import services
from annotator.models import (
    Annotation,
    Assignment,
    Item,
    Output,
    Participation,
    QualificationAttempt,
    QualificationQuestion,
)
from tests.conftest import LLMBAR, bundle
from tests.services import require_postgres_and_redis


def texts(page) -> tuple[str, str]:
    return (
        page.inner_text("#output-left .text").strip(),
        page.inner_text("#output-right .text").strip(),
    )


def answer_test(page, n_right: int) -> None:
    """Answer the ten test questions, the first ``n_right`` correctly."""
    for k in range(10):
        page.wait_for_selector(f"text=Test question {k + 1} of 10")
        page.wait_for_load_state("domcontentloaded")  # the whole question parsed, scripts run
        left, _ = texts(page)
        question = QualificationQuestion.objects.get(prompt=page.inner_text(".input .text").strip())
        left_is_a = left == question.outputs[0].strip()
        right_side = "left" if (question.expected["value"] == "A") == left_is_a else "right"
        wrong_side = "right" if right_side == "left" else "left"
        page.click(f'button[value="{right_side if k < n_right else wrong_side}"]')


@pytest.fixture
def llmbar_study(db):
    require_postgres_and_redis()
    study = services.study_import(
        LLMBAR.read_bytes(),
        filename=LLMBAR.name,
        overrides={
            "completion_code": "PASSCODE",
            "fail_code": "FAILCODE",
            "items_per_worker": 3,
            "gold_rate_start": 0.0,
            "gold_rate_end": 0.0,
            "render_markdown": False,
        },
    )
    services.study_prepare_checks(study, n_qualification=10, seed=7)
    return study


@pytest.mark.django_db(transaction=True)
def test_prolific_worker_passes_test_annotates_and_gets_completion_code(
    base_url, prolific_url, page, llmbar_study
):
    page.goto(
        f"{base_url}/w/{llmbar_study.public_id}/prolific/"
        "?PROLIFIC_PID=pp-pass&STUDY_ID=st&SESSION_ID=se"
    )
    page.click("text=Start the test")
    answer_test(page, n_right=9)
    for step in range(3):
        page.wait_for_selector(f"text=Task {step + 1} of 3")
        page.wait_for_load_state("domcontentloaded")  # task.js listens for the keys
        with page.expect_navigation():
            page.keyboard.press("1" if step % 2 else "ArrowRight")
    page.wait_for_url(f"{prolific_url}**")
    assert page.url == f"{prolific_url}?cc=PASSCODE"
    part = Participation.objects.get()
    assert (part.status, part.annotator.external_id) == ("finished", "pp-pass")
    assert Annotation.objects.filter(source="platform").count() == 3


@pytest.mark.django_db(transaction=True)
def test_worker_who_fails_the_test_twice_gets_the_fail_code_and_cannot_return(
    base_url, prolific_url, page, llmbar_study
):
    entry = f"{base_url}/w/{llmbar_study.public_id}/prolific/?PROLIFIC_PID=pp-fail"
    page.goto(entry)
    assert "2 attempts in all" in page.inner_text("body")
    page.click("text=Start the test")
    answer_test(page, n_right=8)
    # the first failure: told so, and the test again in a new order
    notice = page.wait_for_selector("#retry-notice")
    assert "You did not pass the test: 8 of 10 correct, 9 needed." in notice.inner_text()
    assert "once more (attempt 2 of 2)" in notice.inner_text()
    answer_test(page, n_right=8)
    page.wait_for_url(f"{prolific_url}**")
    assert page.url == f"{prolific_url}?cc=FAILCODE"
    page.goto(entry)  # coming back changes nothing
    page.goto(f"{base_url}/w/{llmbar_study.public_id}/task/")
    page.wait_for_url(f"{prolific_url}**")
    assert page.url.endswith("cc=FAILCODE")
    assert list(QualificationAttempt.objects.values_list("number", "passed")) == [
        (1, False),
        (2, False),
    ]
    assert Annotation.objects.filter(source="platform").count() == 0
    assert not Assignment.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_worker_missing_gold_checks_is_blocked(base_url, prolific_url, page, make_study):
    require_postgres_and_redis()
    records = [
        {"id": f"r{i}", "input": f"real {i}", "outputs": {"m1": f"first {i}", "m2": f"second {i}"}}
        for i in range(6)
    ]
    records += [
        {
            "id": f"g{i}",
            "input": f"check {i}",
            "gold": "m1",
            "outputs": {"m1": f"correct {i}", "m2": f"incorrect {i}"},
        }
        for i in range(4)
    ]
    study = make_study(
        bundle(records, {"kind": "pairwise", "allow_tie": False}),
        gold_rate_start=1.0,
        gold_rate_end=1.0,
        max_strikes=2,
        fail_code="BLOCKED1",
    )
    page.goto(f"{base_url}/w/{study.public_id}/prolific/?PROLIFIC_PID=careless")
    page.click("text=Start")
    for _ in range(3):  # gold, real, gold: both gold checks missed
        page.wait_for_selector("#output-left")
        left, right = texts(page)
        item = Item.objects.filter(item_outputs__output__text=left).get(
            item_outputs__output__text=right
        )
        wrong = "right" if Output.objects.get(text=left) == item.output_list()[0] else "left"
        page.click(f'button[value="{wrong if item.is_gold else "left"}"]')
        page.wait_for_load_state("load")
    page.wait_for_url(f"{prolific_url}**")
    assert page.url.endswith("cc=BLOCKED1")
    part = Participation.objects.get()
    assert (part.status, part.strikes) == ("blocked", 2)
    assert set(Annotation.objects.values_list("is_flagged", flat=True)) == {True}
    # a blocked worker's further requests change nothing
    page.goto(f"{base_url}/w/{study.public_id}/task/")
    page.wait_for_url(f"{prolific_url}**")
    assert Annotation.objects.count() == 3 and not Assignment.objects.filter(state="issued")


@pytest.mark.django_db(transaction=True)
def test_expired_lease_goes_to_another_worker(base_url, browser, make_study):
    require_postgres_and_redis()
    study = make_study(
        bundle(
            [{"id": "only", "input": "q", "outputs": {"a": "x", "b": "y"}}],
            {"kind": "pairwise", "redundancy": 1},
        )
    )
    first = browser.new_context().new_page()
    first.goto(f"{base_url}/w/{study.public_id}/?worker=slow")
    first.click("text=Start")
    first.wait_for_selector("#output-left")
    second = browser.new_context().new_page()
    second.goto(f"{base_url}/w/{study.public_id}/?worker=fast")  # told before instructions
    second.wait_for_selector("text=There is no work left for you")
    # time passes: the first worker's lease runs out
    Assignment.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    second.goto(f"{base_url}/w/{study.public_id}/?worker=fast")
    second.goto(f"{base_url}/w/{study.public_id}/task/")
    second.wait_for_selector("#output-left")
    first.click('button[value="left"]')  # too late
    first.wait_for_selector("text=The time for this task ran out")
    assert Annotation.objects.count() == 0
    second.click('button[value="right"]')
    second.wait_for_selector("text=You have finished: 1 item.")
    annotation = Annotation.objects.get()
    assert annotation.annotator.external_id == "fast"
    assert Assignment.objects.get(annotator__external_id="slow").state == "expired"
