"""The worker's pages as a person meets them, in real Chromium at 1280 and 390 px (issue 25,
items 8-12 and 19).

* every kind's pages (entry, instructions, qualification test, task, end) log no console
  error and answer no 5xx; the qualification page records the time on a question;
* all outputs of one item are shown in the same form (a text beside conversations is one
  assistant turn), so no system is recognisable by its form;
* a stale page (a second tab, Back) says so, and an answer sent from it is reported, not
  dropped in silence; a reloaded ranking keeps its order and ties;
* on a phone a long response is shown whole in the page's scroll, not in a short box;
* the progress says what is known without a per-worker number; a worker arriving at a
  finished study learns it first; a Prolific worker sees their code on the way back;
* error spans: mouse selections snap to whole words, the score is visibly unset until
  touched and a missing score is named; Likert: the chosen point is filled, a 5-point scale
  keeps one row on a phone, digits rate the focused scale.
"""

import json
import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from annotator import services
from annotator.models import Annotation, QualificationQuestion, QualificationTest
from tests.browser.conftest import close_settled, watch
from tests.browser.test_error_spans_widget import drag_over
from tests.conftest import bundle
from tests.leasing import next_lease
from tests.services import require_postgres_and_redis

VIEWPORTS = [(1280, 900), (390, 844)]
LONG = "\n\n".join(
    f"Paragraph {k}: " + " ".join(f"word{k}x{j}" for j in range(40)) for k in range(12)
)
SCALES = [
    {"name": "fluency", "label": "How fluent is it?", "scale_min": 1, "scale_max": 5},
    {
        "name": "helpful",
        "label": "How helpful is it?",
        "scale_min": 1,
        "scale_max": 5,
        "anchors": {"1": "Not at all helpful", "3": "Somewhat helpful", "5": "Extremely helpful"},
    },
]


def shoot(page, name: str) -> None:
    folder = os.environ.get("HUMEVAL_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def navigate(page, selector: str) -> None:
    """Click and wait for the page it leads to."""
    with page.expect_navigation(wait_until="load"):
        page.click(selector)


def new_page(browser, width: int, height: int):
    context = browser.new_context(viewport={"width": width, "height": height})
    return context, context.new_page()


def make(kind: str, records: list[dict], **study) -> object:
    require_postgres_and_redis()
    return services.study_import(
        bundle(records, {"name": f"{kind} pages", "kind": kind, "redundancy": 1, **study}),
        filename="pages.jsonl",
        overrides={"open_links": True, "gold_rate_start": 0.0, "gold_rate_end": 0.0},
    )


# --- every kind's pages, no console error ---------------------------------------------------

KINDS = {
    "pairwise": {
        "study": {},
        "systems": ["a", "b"],
        "expected": {"value": "A"},
    },
    "likert": {"study": {"criteria": SCALES}, "systems": ["a"], "expected": None},
    "ranking": {"study": {"per_item": 3}, "systems": ["a", "b", "c"], "expected": {"top": 0}},
    "error_spans": {  # its qualification answer is issue 25 item 2 (see ``KIND_PARAMS``)
        "study": {},
        "systems": ["a"],
        "expected": {"spans": [], "score": 50, "score_tolerance": 100},
    },
}


KIND_PARAMS = list(KINDS)


def answer_any(page, kind: str) -> None:
    """Answer the task or question shown, as a worker would, and wait for the next page."""
    if kind == "pairwise":
        navigate(page, 'button[name="answer"][value="left"]')
        return
    if kind == "likert":
        for scale in page.locator("fieldset.criterion").all():
            scale.locator("label.point").nth(2).click()
    elif kind == "ranking":
        page.locator(".rank-card").first.locator('[data-move="1"]').click()
    else:
        page.fill("#esa-score", "70")
    navigate(page, "button.submit")


def sweep_study(kind: str):
    spec = KINDS[kind]
    records = [
        {
            "id": f"in{i}",
            "input": f"Question {i}?",
            "outputs": {s: f"Answer {i} of {s}." for s in spec["systems"]},
        }
        for i in range(3)
    ]
    study = make(kind, records, items_per_worker=2, completion_code="DONE", **spec["study"])
    kind_impl, opts = study.kind_impl, study.kind_options()
    outputs = [f"Known answer by {s}." for s in spec["systems"]]
    expected = spec["expected"] or {"scores": {"fluency": 3}, "tolerance": 4}
    test = QualificationTest.objects.create(
        name="test",
        kind=study.kind,
        options={k: v for k, v in opts.items() if k != "collection" and v not in ([], None)},
        pass_threshold=0,  # any answer passes: the test walks the pages, not the scoring
    )
    QualificationQuestion.objects.create(
        test=test,
        prompt="A known question?",
        outputs=outputs,
        expected=kind_impl.parse_expected(opts, expected, systems=spec["systems"], outputs=outputs),
    )
    study.qualification = test
    study.save(update_fields=["qualification"])
    return study


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width,height", VIEWPORTS)
@pytest.mark.parametrize("kind", KIND_PARAMS)
def test_every_kinds_pages_log_no_console_error(browser, base_url, kind, width, height):
    study = sweep_study(kind)
    context, page = new_page(browser, width, height)
    problems = watch(page)
    try:
        page.goto(f"{base_url}/w/{study.public_id}/?worker=sweep-{kind}-{width}")
        expect(page.locator("h1")).to_have_text("Instructions")
        page.click("text=Start the test")
        expect(page.locator("#progress-text")).to_have_text("Test question 1 of 1")
        page.wait_for_load_state("domcontentloaded")  # the whole question parsed, scripts run
        shoot(page, f"sweep-{kind}-qualify-{width}")
        with page.expect_request(lambda r: r.method == "POST") as posted:
            answer_any(page, kind)
        # the time on the question is sent (task.js found its field)
        assert re.search(r"(^|&)time_ms=\d+", posted.value.post_data or ""), posted.value.post_data
        for step in (1, 2):
            expect(page.locator("#progress-text")).to_have_text(f"Task {step} of 2")
            shoot(page, f"sweep-{kind}-task{step}-{width}")
            answer_any(page, kind)
        expect(page.locator("h1")).to_have_text("Finished")
        expect(page.locator("#completion-code")).to_have_text("DONE")
        page.goto(f"{base_url}/w/{study.public_id}/instructions/")
        expect(page.locator("h1")).to_have_text("Instructions")
        page.wait_for_load_state("networkidle")
        assert Annotation.objects.filter(study=study).count() == 2
        assert problems == []
    finally:
        close_settled(context)


# --- item 8: one form for every output of an item -------------------------------------------


def turns(*texts: str) -> list[dict]:
    return [{"role": "assistant", "content": t} for t in texts]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "kind,study,systems",
    [
        ("pairwise", {}, 2),
        (
            "pairwise",
            {
                "criteria": [
                    {"name": "helpful", "label": "More helpful?"},
                    {"name": "safe", "label": "Safer?"},
                ]
            },
            2,
        ),
        ("ranking", {"per_item": 3}, 3),
    ],
)
def test_all_outputs_of_an_item_share_one_form(browser, base_url, kind, study, systems):
    # system s0 answers with messages, the others with plain text
    outputs = {"s0": turns("From the chat system.")} | {
        f"s{k}": f"From text system {k}." for k in range(1, systems)
    }
    made = make(kind, [{"id": "x", "input": "Hello?", "outputs": outputs}], **study)
    context, page = new_page(browser, 1280, 900)
    problems = watch(page)
    try:
        page.goto(f"{base_url}/w/{made.public_id}/?worker=blind")
        page.click("text=Start")
        page.wait_for_selector("#task-form")
        page.wait_for_load_state("domcontentloaded")  # the whole task parsed, its scripts run
        panel = ".rank-card" if kind == "ranking" else "section.output"
        expect(page.locator(panel)).to_have_count(systems)
        for k in range(systems):
            one = page.locator(panel).nth(k)
            expect(one.locator("ol.conversation li.turn-assistant")).to_have_count(1)
            expect(one.locator(".role")).to_have_text("assistant")
        shoot(page, f"blind-{kind}-{len(study)}")
        assert problems == []
    finally:
        close_settled(context)


# --- item 9: stale pages; a ranking draft survives a reload ---------------------------------


@pytest.mark.django_db(transaction=True)
def test_an_answer_from_a_stale_tab_is_reported(browser, base_url, settings):
    settings.HUMEVAL_LEASE_HEARTBEAT_SECONDS = 3600  # the tab will not notice by itself
    records = [
        {"id": f"in{i}", "input": f"Q{i}", "outputs": {"a": f"A{i}", "b": f"B{i}"}}
        for i in range(3)
    ]
    study = make("pairwise", records)
    context, first = new_page(browser, 1280, 900)
    problems = watch(first)
    try:
        first.goto(f"{base_url}/w/{study.public_id}/?worker=two-tabs")
        first.click("text=Start")
        first.wait_for_selector("#task-form")
        first.wait_for_load_state("domcontentloaded")  # the whole task parsed, its scripts run
        old = first.get_attribute('input[name="token"]', "value")
        second = context.new_page()
        watch(second, problems)
        second.goto(f"{base_url}/w/{study.public_id}/task/")
        assert second.get_attribute('input[name="token"]', "value") == old
        navigate(second, 'button[value="left"]')
        current = second.get_attribute('input[name="token"]', "value")
        assert current != old

        navigate(first, 'button[value="right"]')  # from the stale tab
        expect(first.locator(".messages")).to_contain_text("already answered that task")
        assert first.get_attribute('input[name="token"]', "value") == current
        assert Annotation.objects.get().raw_answer == "left"  # the first answer stands
        assert problems == []
    finally:
        close_settled(context)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width,height", VIEWPORTS)
def test_a_stale_tab_says_so_and_takes_no_answer(browser, base_url, settings, width, height):
    settings.HUMEVAL_LEASE_HEARTBEAT_SECONDS = 1
    records = [
        {"id": f"in{i}", "input": f"Q{i}", "outputs": {"a": f"A{i}", "b": f"B{i}"}}
        for i in range(3)
    ]
    study = make("pairwise", records)
    context, first = new_page(browser, width, height)
    problems = watch(first)
    try:
        first.goto(f"{base_url}/w/{study.public_id}/?worker=stale-{width}")
        first.click("text=Start")
        first.wait_for_selector("#task-form")
        first.wait_for_load_state("domcontentloaded")  # the whole task parsed, its scripts run
        second = context.new_page()
        watch(second, problems)
        second.goto(f"{base_url}/w/{study.public_id}/task/")
        navigate(second, 'button[value="left"]')

        notice = first.locator("#stale-notice")
        expect(notice).to_contain_text("This page is out of date")
        expect(first.locator('button[value="left"]')).to_be_disabled()
        shoot(first, f"stale-{width}")
        navigate(first, "#stale-notice a")
        assert first.get_attribute('input[name="token"]', "value") == second.get_attribute(
            'input[name="token"]', "value"
        )
        expect(first.locator("#stale-notice")).to_have_count(0)
        assert problems == []
    finally:
        close_settled(context)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width,height", VIEWPORTS)
def test_a_reloaded_ranking_keeps_its_order_and_ties(browser, base_url, width, height):
    records = [{"id": "x", "input": "Rank these.", "outputs": {s: f"Reply of {s}." for s in "pqr"}}]
    study = make("ranking", records, allow_tie=True)
    context, page = new_page(browser, width, height)
    problems = watch(page)
    try:
        page.goto(f"{base_url}/w/{study.public_id}/?worker=rank-{width}")
        page.click("text=Start")
        page.wait_for_selector("#task-form")
        page.wait_for_load_state("domcontentloaded")  # the whole task parsed, its scripts run
        page.locator(".rank-card").nth(2).locator('[data-move="-1"]').click()
        page.locator(".rank-card").nth(2).locator("input.rank-tie-box").check()
        order = page.eval_on_selector_all(".rank-card", "cs => cs.map(c => c.dataset.display)")
        tiers = page.input_value('input[name="ranking"]')
        assert len(json.loads(tiers)) == 2
        page.reload()
        page.wait_for_selector(".rank-card")
        assert (
            page.eval_on_selector_all(".rank-card", "cs => cs.map(c => c.dataset.display)") == order
        )
        assert page.input_value('input[name="ranking"]') == tiers
        expect(page.locator(".rank-card").nth(2).locator("input.rank-tie-box")).to_be_checked()
        expect(page.locator(".rank-card.tied")).to_have_count(1)
        navigate(page, "button.submit")  # the order was moved: no "not moved" question
        assert Annotation.objects.count() == 1
        assert problems == []
    finally:
        close_settled(context)


# --- item 10: a long response on a phone ----------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "kind,study,systems",
    [("pairwise", {}, 2), ("likert", {"criteria": SCALES[:1]}, 1), ("ranking", {"per_item": 3}, 3)],
)
def test_a_long_response_is_shown_whole_on_a_phone(browser, base_url, kind, study, systems):
    outputs = {f"s{k}": LONG for k in range(systems)}
    made = make(kind, [{"id": "x", "input": "Write a lot.", "outputs": outputs}], **study)
    context, page = new_page(browser, 390, 844)
    try:
        page.goto(f"{base_url}/w/{made.public_id}/?worker=phone")
        page.click("text=Start")
        page.wait_for_selector("#task-form")
        page.wait_for_load_state("domcontentloaded")  # the whole task parsed, its scripts run
        page.wait_for_selector(".text.scroll")
        shoot(page, f"long-{kind}-390")
        for box in page.locator(".text.scroll").all():
            inner, shown = box.evaluate("e => [e.scrollHeight, e.clientHeight]")
            assert inner <= shown + 1, (inner, shown)  # nothing hidden inside the box
        # the submit is reached only by scrolling past every response
        last = page.locator(".text.scroll").last.bounding_box()
        submit = page.locator("button.answer").last.bounding_box()
        assert submit["y"] >= last["y"] + last["height"]
    finally:
        close_settled(context)


# --- item 12: orientation -------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width,height", VIEWPORTS)
def test_progress_without_a_number_says_how_many_are_done(browser, base_url, width, height):
    records = [
        {"id": f"in{i}", "input": f"Q{i}", "outputs": {"a": f"A{i}", "b": f"B{i}"}}
        for i in range(3)
    ]
    study = make("pairwise", records)
    context, page = new_page(browser, width, height)
    try:
        page.goto(f"{base_url}/w/{study.public_id}/?worker=count-{width}")
        page.click("text=Start")
        page.wait_for_selector("#task-form")
        page.wait_for_load_state("domcontentloaded")  # the whole task parsed, its scripts run
        expect(page.locator("#progress-done")).to_have_text("· 0 done")
        expect(page.locator("#finish-link")).to_have_count(0)
        page.click('button[value="left"]')
        expect(page.locator("#progress-done")).to_have_text("· 1 done")
        assert page.title() == "Task 2 · 1 done"
        shoot(page, f"progress-{width}")
        page.click("#finish-link")
        expect(page.locator("h1")).to_have_text("Finished")
    finally:
        close_settled(context)


@pytest.mark.django_db(transaction=True)
def test_a_worker_at_a_finished_study_learns_it_before_the_instructions(browser, base_url):
    study = make("pairwise", [{"id": "x", "input": "Q", "outputs": {"a": "A", "b": "B"}}])
    test = QualificationTest.objects.create(name="t", kind="pairwise", pass_threshold=1)
    QualificationQuestion.objects.create(
        test=test, prompt="Q?", outputs=["x", "y"], expected={"value": "A"}
    )
    study.qualification = test
    study.no_work_code = "NOWORK"
    study.save(update_fields=["qualification", "no_work_code"])
    done = services.participation_enter(study=study, platform="link", external_id="early")
    done.status = "active"
    done.save(update_fields=["status"])
    lease = next_lease(participation=done)
    services.annotation_submit(annotator=done.annotator, token=lease.token, data={"answer": "left"})

    context, page = new_page(browser, 390, 844)
    problems = watch(page)
    try:
        page.goto(f"{base_url}/w/{study.public_id}/?worker=late")
        expect(page.locator("h1")).to_have_text("No work left")
        expect(page.locator("#completion-code")).to_have_text("NOWORK")
        assert "/end/" in page.url
        assert problems == []
    finally:
        close_settled(context)


@pytest.mark.django_db(transaction=True)
def test_a_prolific_worker_sees_the_code_on_the_way_back(browser, base_url, prolific_url):
    records = [{"id": "x", "input": "Q", "outputs": {"a": "A", "b": "B"}}]
    study = make("pairwise", records, items_per_worker=1, completion_code="C0DE")
    context, page = new_page(browser, 390, 844)
    try:
        page.goto(f"{base_url}/w/{study.public_id}/prolific/?PROLIFIC_PID=p1&SESSION_ID=s")
        page.click("text=Start")
        page.wait_for_selector("#task-form")
        page.wait_for_load_state("domcontentloaded")  # the whole task parsed, its scripts run
        page.click('button[value="left"]')
        expect(page.locator("#completion-code")).to_have_text("C0DE")
        expect(page.locator("#prolific-return")).to_have_attribute(
            "href", f"{prolific_url}?cc=C0DE"
        )
        shoot(page, "prolific-end-390")
        page.wait_for_url(f"{prolific_url}?cc=C0DE")  # and it goes back by itself
    finally:
        close_settled(context)


# --- item 19: error spans and Likert --------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width,height", VIEWPORTS)
def test_error_spans_snap_to_words_and_the_score_starts_unset(browser, base_url, width, height):
    text = "The quick brown foxes jumped over the lazy dog."
    study = make("error_spans", [{"id": "x", "input": "Describe.", "outputs": {"a": text}}])
    context, page = new_page(browser, width, height)
    problems = watch(page)
    try:
        page.goto(f"{base_url}/w/{study.public_id}/?worker=esa-{width}")
        page.click("text=Start")
        page.wait_for_selector("#task-form")
        page.wait_for_load_state("domcontentloaded")  # the whole task parsed, its scripts run
        drag_over(page, "ick brown fo")  # from inside "quick" to inside "foxes"
        expect(page.locator("#esa-quote")).to_have_text("quick brown foxes")
        page.click("button.esa-add-minor")
        spans = json.loads(page.input_value("#esa-spans"))
        assert [s["text"] for s in spans] == ["quick brown foxes"]

        expect(page.locator("#esa-score-range")).to_have_class(re.compile(r"\bunset\b"))
        expect(page.locator("#esa-score-state")).to_have_text("Not scored yet")
        page.click("button.submit")
        error = page.locator("#esa-score-error")
        expect(error).to_be_visible()
        expect(error).to_contain_text("Give the response an overall score from 0 to 100")
        assert "score from 0 to 100" in page.eval_on_selector(
            "#esa-score", "e => e.validationMessage"
        )
        shoot(page, f"esa-unset-{width}")
        assert Annotation.objects.count() == 0
        range_box = page.locator("#esa-score-range").bounding_box()
        page.mouse.click(
            range_box["x"] + range_box["width"] * 0.8, range_box["y"] + range_box["height"] / 2
        )
        expect(page.locator("#esa-score-range")).not_to_have_class(re.compile(r"\bunset\b"))
        expect(page.locator("#esa-score-state")).to_have_text(re.compile(r"Score: \d+"))
        expect(error).to_be_hidden()
        navigate(page, "button.submit")
        assert Annotation.objects.count() == 1
        assert problems == []
    finally:
        close_settled(context)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width,height", VIEWPORTS)
def test_likert_scales_show_the_choice_keep_one_row_and_follow_the_focus(
    browser, base_url, width, height
):
    records = [{"id": f"in{i}", "input": f"Q{i}", "outputs": {"a": f"A{i}"}} for i in range(2)]
    study = make("likert", records, criteria=SCALES)
    context, page = new_page(browser, width, height)
    problems = watch(page)
    try:
        page.goto(f"{base_url}/w/{study.public_id}/?worker=likert-{width}")
        page.click("text=Start")
        page.wait_for_selector("#task-form")
        page.wait_for_load_state("domcontentloaded")  # the whole task parsed, its scripts run
        scales = page.locator("fieldset.criterion")
        for k in range(2):  # every point of a scale on one row
            tops = (
                scales.nth(k)
                .locator("label.point")
                .evaluate_all("ps => ps.map(p => Math.round(p.getBoundingClientRect().top))")
            )
            assert len(set(tops)) == 1, (k, tops)
        page.keyboard.press("3")
        page.keyboard.press("4")
        checked = 'input[type="radio"]:checked'
        assert scales.nth(0).locator(checked).input_value() == "3"
        assert scales.nth(1).locator(checked).input_value() == "4"
        # the chosen point is filled, the others are not
        chosen = scales.nth(0).locator("label.point").nth(2)
        other = scales.nth(0).locator("label.point").nth(1)
        background = "e => getComputedStyle(e).backgroundColor"
        assert chosen.evaluate(background) != other.evaluate(background)
        # all answered: Shift+Tab goes back to the first scale, whose digit changes it alone
        page.keyboard.press("Shift+Tab")
        page.keyboard.press("5")
        assert scales.nth(0).locator(checked).input_value() == "5"
        assert scales.nth(1).locator(checked).input_value() == "4"
        shoot(page, f"likert-scales-{width}")
        with page.expect_navigation(wait_until="load"):
            page.keyboard.press("Enter")
        assert Annotation.objects.get().answer["scores"] == {"fluency": 5, "helpful": 4}
        assert problems == []
    finally:
        close_settled(context)


@pytest.mark.django_db(transaction=True)
def test_back_to_an_answered_task_never_takes_an_answer_silently(browser, base_url):
    records = [
        {"id": f"in{i}", "input": f"Q{i}", "outputs": {"a": f"A{i}", "b": f"B{i}"}}
        for i in range(3)
    ]
    study = make("pairwise", records)
    context, page = new_page(browser, 390, 844)
    problems = watch(page)
    try:
        page.goto(f"{base_url}/w/{study.public_id}/?worker=back")
        page.click("text=Start")
        page.wait_for_selector("#task-form")
        page.wait_for_load_state("domcontentloaded")  # the whole task parsed, its scripts run
        old = page.get_attribute('input[name="token"]', "value")
        navigate(page, 'button[value="left"]')
        current = page.get_attribute('input[name="token"]', "value")
        page.go_back()
        page.wait_for_selector("#task-form")
        page.wait_for_load_state("domcontentloaded")  # the whole task parsed, its scripts run
        if page.get_attribute('input[name="token"]', "value") == old:
            # the browser kept the answered page: it says so and takes no answer
            expect(page.locator("#stale-notice")).to_be_visible()
            expect(page.locator('button[value="right"]')).to_be_disabled()
        else:  # the browser asked again: the current task
            assert page.get_attribute('input[name="token"]', "value") == current
        assert Annotation.objects.get().raw_answer == "left"
        assert problems == []
    finally:
        close_settled(context)


@pytest.mark.django_db(transaction=True)
def test_a_long_response_on_a_desktop_says_more_follows(browser, base_url):
    made = make("pairwise", [{"id": "x", "input": "Long?", "outputs": {"a": LONG, "b": "Short."}}])
    context, page = new_page(browser, 1280, 900)
    problems = watch(page)
    try:
        page.goto(f"{base_url}/w/{made.public_id}/?worker=desk")
        page.click("text=Start")
        page.wait_for_selector("#task-form")
        page.wait_for_load_state("domcontentloaded")  # the whole task parsed, its scripts run
        long_side = (
            "#output-left" if "Paragraph 11" in page.inner_text("#output-left") else "#output-right"
        )
        short_side = "#output-right" if long_side == "#output-left" else "#output-left"
        cue = page.locator(f"{long_side} .more-below")
        expect(cue).to_be_visible()
        expect(cue).to_have_text("More below: scroll inside the response to read it all.")
        expect(page.locator(f"{short_side} .more-below")).to_have_count(0)
        shoot(page, "more-below-1280")
        page.locator(f"{long_side} .text.scroll").evaluate("e => { e.scrollTop = e.scrollHeight; }")
        expect(cue).to_be_hidden()
        assert problems == []
    finally:
        close_settled(context)
