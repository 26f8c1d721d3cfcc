"""A study screens its workers on its own task kind, in real Chromium, for every kind: the
test's questions are shown with the kind's template and answered with its widget (Likert: a
scale per criterion, by mouse and keyboard; pairwise: the answer buttons; ranking: the cards,
by keyboard; error spans: marks and a score), scored against the known answer; a worker who
passes then gets the study's items, and one who fails twice is refused work (at 390 px)."""

import json

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
        page.wait_for_load_state("domcontentloaded")  # the whole question parsed, scripts run
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


# --- every other kind: pairwise, ranking, error spans ---------------------------------------
#: The outputs of each kind's study (system → text); an error-span output begins with a
#: misspelt word, the known major error every question of that test carries.
KIND_SYSTEMS = {
    "pairwise": ("s1", "s2"),
    "ranking": ("s1", "s2", "s3"),
    "error_spans": ("s1", "s2"),
}


def known_of(kind: str, k: int):
    """The known answer of the k-th item, as written in an import (system names)."""
    if kind == "pairwise":
        return ("s1", "s2")[k % 2]  # the better output: A, then B
    if kind == "ranking":
        return ("s2", "s3", "s1")[k % 3]  # the best of three
    return {
        "spans": [{"start": 0, "end": 3, "severity": "major", "text": "Teh"}],
        "score": 70,
    }


def kind_study(kind: str):
    require_postgres_and_redis()
    records = [
        {
            "id": f"i{k}",
            "input": f"question {k}",
            "outputs": {s: f"Teh answer {k} of {s} to the question." for s in KIND_SYSTEMS[kind]},
        }
        for k in range(5)
    ]
    options = {
        "name": f"{kind} screened",
        "kind": kind,
        "redundancy": 1,
        "items_per_worker": 1,
        "gold_rate_start": 0.0,
        "gold_rate_end": 0.0,
        "open_links": True,
        "fail_code": "FAILED",
    }
    study = services.study_import(bundle(records, options), filename=f"{kind}.jsonl")
    kind_impl, opts = study.kind_impl, study.kind_options()
    for k, item in enumerate(Item.objects.filter(study=study).order_by("pk")[:3]):
        outputs = item.output_list()
        item.expected = kind_impl.parse_expected(
            opts,
            known_of(kind, k),
            systems=[o.system.name for o in outputs],
            outputs=[o.text for o in outputs],
        )
        item.save(update_fields=["expected"])
    test = services.study_prepare_checks(study, n_qualification=3, seed=7)
    test.pass_threshold = 3
    test.save()
    return study


def answer_question(page, kind: str, right: bool) -> None:
    """Answer the question on the page as a worker does, right or wrong: the known answer
    is read from the attempt (which question, in which display order) and given through
    the kind's own widget."""
    from playwright.sync_api import expect

    attempt = QualificationAttempt.objects.order_by("-pk").first()
    slot = attempt.order[len(attempt.answers)]
    question = QualificationQuestion.objects.get(pk=slot["question"])
    order, expected = slot["display_order"], question.expected
    if kind == "pairwise":
        shown = [question.outputs[p] for p in order]
        assert page.inner_text("#output-left .text").strip() == shown[0]
        a_on_left = order == [0, 1]
        better_left = (expected["value"] == "A") == a_on_left
        side = "left" if better_left == right else "right"
        page.click(f'button[name="answer"][value="{side}"]')
    elif kind == "ranking":
        cards = page.locator(".rank-card .text")
        expect(cards).to_have_count(len(order))  # the heading can be parsed before the list
        assert [t.strip() for t in cards.all_inner_texts()] == [question.outputs[p] for p in order]
        best = order.index(expected["top"])  # its display position
        top = best if right else (best + 1) % len(order)
        page.locator(f'.rank-card[data-display="{top}"]').focus()
        page.keyboard.press("Home")
        assert json.loads(page.input_value('input[name="ranking"]'))[0] == [top]
        submit = page.get_by_role("button", name="Submit")
        submit.click()
        if top == 0:  # the order as shown, unmoved: the page asks once before sending it
            expect(page.locator(".rank-note")).to_contain_text("You have not moved any")
            submit.click()
    else:
        assert page.inner_text("#esa-text") == question.outputs[0]
        if right:  # the misspelt first word, marked major by keyboard and button
            page.focus("#esa-text")
            page.keyboard.press("Home")
            assert page.text_content("#esa-quote") == "Teh"
            page.click("button.esa-add-major")
            assert len(json.loads(page.input_value("#esa-spans"))) == 1
        page.fill("#esa-score", "72")
        page.click("button.submit")


def take_test(page, kind: str, right: bool) -> None:
    for k in range(3):
        page.wait_for_selector(f"text=Test question {k + 1} of 3")
        page.wait_for_load_state("domcontentloaded")  # the whole question parsed, scripts run
        answer_question(page, kind, right)
        page.wait_for_load_state("load")


def watch_for_server_errors(page) -> list[str]:
    errors: list[str] = []
    page.on("response", lambda r: r.status >= 500 and errors.append(f"{r.status} {r.url}"))
    return errors


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", sorted(KIND_SYSTEMS))
def test_a_worker_passes_the_test_of_each_kind_then_gets_work(base_url, page, kind):
    study = kind_study(kind)
    errors = watch_for_server_errors(page)
    page.goto(f"{base_url}/w/{study.public_id}/?worker=expert")
    page.click("text=Start the test")
    take_test(page, kind, right=True)
    page.wait_for_url("**/task/**")
    page.wait_for_selector('input[name="token"]', state="attached")  # a task: work
    attempt = QualificationAttempt.objects.get()
    assert (attempt.n_correct, attempt.passed) == (3, True)
    assert [a["correct"] for a in attempt.answers] == [True] * 3
    assert Participation.objects.get().status == "active"
    assert errors == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", sorted(KIND_SYSTEMS))
def test_a_worker_who_gets_the_test_of_each_kind_wrong_fails_on_a_phone(base_url, browser, kind):
    study = kind_study(kind)
    context = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True)
    page = context.new_page()
    errors = watch_for_server_errors(page)
    try:
        page.goto(f"{base_url}/w/{study.public_id}/?worker=guesser")
        page.click("text=Start the test")
        take_test(page, kind, right=False)
        page.wait_for_selector("#retry-notice")
        assert "0 of 3 correct, 3 needed" in page.inner_text("#retry-notice")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        take_test(page, kind, right=False)
        page.wait_for_url("**/end/**")
        assert Participation.objects.get().status == "failed"
        assert list(QualificationAttempt.objects.values_list("passed", flat=True)) == [
            False,
            False,
        ]
        assert not Annotation.objects.exists()
        assert "FAILED" in page.content()
        assert errors == []
    finally:
        context.close()
