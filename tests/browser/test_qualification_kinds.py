"""A Likert study screens its workers on its own Likert task, in real Chromium: the test's
questions are shown with the Likert template (one output, a scale per criterion), answered
by mouse and by keyboard, scored within the known answer's tolerance; a worker who passes
then rates the study's items, and one who fails twice is refused work."""

import pytest

from annotator import services
from annotator.models import (
    Annotation,
    Item,
    Participation,
    QualificationAttempt,
    QualificationQuestion,
)
from tests.conftest import bundle
from tests.services import require_postgres_and_redis

STUDY = {
    "name": "rated answers",
    "kind": "likert",
    "redundancy": 1,
    "items_per_worker": 2,
    "criteria": [{"name": "fluency", "label": "How fluent is it?", "scale_min": 1, "scale_max": 5}],
    "gold_rate_start": 0.0,
    "gold_rate_end": 0.0,
    "open_links": True,
    "fail_code": "FAILED",
}


@pytest.fixture
def likert_study(db):
    require_postgres_and_redis()
    records = [
        {
            "id": f"i{k}",
            "input": f"question {k}",
            "outputs": {"s1": f"first {k}", "s2": f"second {k}"},
        }
        for k in range(5)
    ]
    study = services.study_import(bundle(records, STUDY), filename="rated.jsonl")
    opts = study.kind_options()
    kind = study.kind_impl
    for k, item in enumerate(Item.objects.filter(study=study).order_by("pk")[:3]):
        item.expected = kind.parse_expected(
            opts, {"scores": {"fluency": 2 + k}, "tolerance": 1}, systems=["s"], outputs=["x"]
        )
        item.save(update_fields=["expected"])
    test = services.study_prepare_checks(study, n_qualification=3, seed=5)
    test.pass_threshold = 3
    test.save()
    return study


def answer_test(page, right: bool) -> None:
    """Answer the three questions: by mouse (a click on the scale point), the last by
    keyboard (a digit, then Enter); ``right``: within the tolerance, else far off."""
    for k in range(3):
        page.wait_for_selector(f"text=Test question {k + 1} of 3")
        if k == 1:  # a reload shows the same question and stores nothing
            page.reload()
            page.wait_for_selector("text=Test question 2 of 3")
        assert page.locator("section.output.single").count() == 1  # the Likert template
        assert page.locator("#output-left").count() == 0
        shown = page.inner_text("section.output.single .text").strip()
        question = QualificationQuestion.objects.get(outputs=[shown])
        known = question.expected["scores"]["fluency"]
        given = known + 1 if right else (5 if known <= 2 else 1)
        if k < 2:
            page.click(f'label.point:has(input[name="score-fluency"][value="{given}"])')
            page.click("button.submit")
        else:
            page.keyboard.press(str(given))
            page.keyboard.press("Enter")
        page.wait_for_load_state("load")


@pytest.mark.django_db(transaction=True)
def test_a_worker_passes_a_likert_test_then_rates_items(base_url, page, likert_study):
    page.goto(f"{base_url}/w/{likert_study.public_id}/?worker=rater")
    page.click("text=Start the test")
    answer_test(page, right=True)
    page.wait_for_selector("text=Task 1 of 2")
    attempt = QualificationAttempt.objects.get()
    assert (attempt.n_correct, attempt.passed) == (3, True)
    assert [a["display_order"] for a in attempt.answers] == [[0], [0], [0]]
    assert all(a["answer"]["scores"]["fluency"] in range(1, 6) for a in attempt.answers)
    # then the study's own items, rated in the same template
    for step in range(2):
        page.wait_for_selector(f"text=Task {step + 1} of 2")
        page.click('label.point:has(input[name="score-fluency"][value="4"])')
        page.click("button.submit")
        page.wait_for_load_state("load")
    page.wait_for_url("**/end/**")
    labels = Annotation.objects.filter(source="platform")
    assert [a.answer for a in labels] == [{"scores": {"fluency": 4}}] * 2
    assert not labels.filter(item__is_active=False).exists()  # no test question as work
    assert Participation.objects.get().status in ("active", "finished")
    assert QualificationAttempt.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_worker_far_off_the_known_ratings_fails_on_a_phone(base_url, browser, likert_study):
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    try:
        page.goto(f"{base_url}/w/{likert_study.public_id}/?worker=guesser")
        page.click("text=Start the test")
        answer_test(page, right=False)
        page.wait_for_selector("#retry-notice")
        assert "0 of 3 correct, 3 needed" in page.inner_text("#retry-notice")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390  # the scale fits the phone's width
        answer_test(page, right=False)
        page.wait_for_url("**/end/**")
        part = Participation.objects.get()
        assert part.status == "failed"
        assert list(QualificationAttempt.objects.values_list("passed", flat=True)) == [
            False,
            False,
        ]
        assert not Annotation.objects.exists()
        assert "FAILED" in page.content()
    finally:
        context.close()
