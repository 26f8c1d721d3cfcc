"""Judge-prefilled error spans in real Chromium (issue 28), at 1280 and 390 px: the worker's
page shows the judge's proposed spans pre-marked (never the judge's name); the worker keeps
one (accepted), re-grades one (edited), removes one (deleted) and marks one of their own
(new, with the mouse); the stored answer and the export record each span's origin and action."""

import json
import urllib.request

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect
from rest_framework.authtoken.models import Token

from annotator import services
from annotator.models import Annotation, Output
from tests.browser.test_error_spans_widget import drag_over
from tests.conftest import bundle
from tests.services import require_postgres_and_redis

TEXT = "Teh cat sat on teh MAT today."
JUDGE = "secret-judge-x"
PROPOSED = [
    {"start": 0, "end": 3, "severity": "minor", "text": "Teh"},
    {"start": 15, "end": 18, "severity": "minor", "text": "teh"},
    {"start": 19, "end": 22, "severity": "major", "text": "MAT"},
]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width", [1280, 390])
def test_worker_accepts_edits_and_deletes_suggestions(base_url, browser, make_study, width):
    require_postgres_and_redis()
    study = make_study(
        bundle(
            [{"id": "doc-1", "input": "Describe the scene.", "outputs": {"sys-hidden": TEXT}}],
            {"kind": "error_spans", "redundancy": 1, "prefill_spans": "on"},
        )
    )
    output = Output.objects.get(input__study=study)
    services.judge_rating_record(
        study,
        judge=JUDGE,
        input_id=output.input_id,
        system_id=output.system_id,
        raw_answer="{}",
        label="errors",
        proposal={"spans": PROPOSED, "located": 3},
    )
    researcher = User.objects.create_user("r", password="x" * 12)
    study.researchers.add(researcher)
    token = Token.objects.create(user=researcher)

    context = browser.new_context(viewport={"width": width, "height": 900}, has_touch=True)
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(f"{base_url}/w/{study.public_id}/?worker=prolific-prefill")
    page.click("text=Start")
    page.wait_for_selector("#esa-text")
    assert JUDGE not in page.content() and "sys-hidden" not in page.content()
    marks = page.locator("#esa-text mark.esa-span")
    expect(marks).to_have_count(3)
    expect(page.locator("#esa-count")).to_have_text("3")
    expect(page.locator("#esa-list li").first).to_contain_text("(suggested)")
    # edit: the second suggestion made major (a tap on its button)
    page.locator('#esa-list button.esa-toggle[data-index="1"]').tap()
    expect(page.locator('#esa-list button.esa-toggle[data-index="1"]')).to_have_text("Make minor")
    # delete: the third suggestion, by the keyboard on its mark
    page.locator('#esa-text mark.esa-span[data-index="2"]').focus()
    page.keyboard.press("Delete")
    expect(marks).to_have_count(2)
    # new: the last word marked minor with the mouse
    drag_over(page, "today")
    expect(page.locator("#esa-quote")).to_have_text("today")
    page.click("button.esa-add-minor")
    expect(marks).to_have_count(3)
    page.fill("#esa-score", "40")
    page.click("button.submit")
    page.wait_for_selector("text=You have finished")
    assert problems == []
    context.close()

    answer = Annotation.objects.get().answer
    got = [(s["text"], s["severity"], s["origin"], s["action"]) for s in answer["spans"]]
    assert got == [
        ("Teh", "minor", "judge", "accepted"),
        ("teh", "major", "judge", "edited"),
        ("today", "minor", "worker", "new"),
    ]
    assert [(d["text"], d["suggestion"]) for d in answer["deleted"]] == [("MAT", 2)]
    assert answer["prefill"] == "shown" and answer["score"] == 40

    request = urllib.request.Request(
        f"{base_url}/api/studies/{study.pk}/annotations/?format=json",
        headers={"Authorization": f"Token {token.key}"},
    )
    with urllib.request.urlopen(request) as response:  # noqa: S310 - the live test server
        row = json.loads(response.read())["results"][0]
    assert [(s["origin"], s["action"]) for s in row["spans"]] == [
        ("judge", "accepted"),
        ("judge", "edited"),
        ("worker", "new"),
    ]
    assert row["prefill"] == "shown" and row["deleted_spans"][0]["text"] == "MAT"


#: A code point outside the BMP (two UTF-16 units) before the suggestions: the offsets the
#: page sends are code points, as Python counts them.
MOVE_TEXT = "The 🐈 cat sat on teh MAT today."
MOVE_PROPOSED = [
    {"start": 6, "end": 9, "severity": "minor", "text": "cat"},
    {"start": 17, "end": 20, "severity": "minor", "text": "teh"},
    {"start": 21, "end": 24, "severity": "major", "text": "MAT"},
]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width", [1280, 390])
def test_worker_moves_a_suggestions_boundaries(base_url, browser, make_study, width):
    """Issue 28: a suggestion's boundaries changed by keyboard (1280 px: Shift+← on the
    focused mark grows its start over the emoji) or by touch (390 px: "Move", select a new
    passage past the other suggestions, "Move here") is stored as edited with resized: true
    and the judge's offsets; accept, re-grade (1280) and delete (390) still work beside it."""
    require_postgres_and_redis()
    study = make_study(
        bundle(
            [{"id": "doc-1", "input": "Describe it.", "outputs": {"sys-hidden": MOVE_TEXT}}],
            {"kind": "error_spans", "redundancy": 1, "prefill_spans": "on"},
        )
    )
    output = Output.objects.get(input__study=study)
    services.judge_rating_record(
        study,
        judge=JUDGE,
        input_id=output.input_id,
        system_id=output.system_id,
        raw_answer="{}",
        label="errors",
        proposal={"spans": MOVE_PROPOSED, "located": 3},
    )
    context = browser.new_context(viewport={"width": width, "height": 900}, has_touch=True)
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(f"{base_url}/w/{study.public_id}/?worker=prolific-move")
    page.click("text=Start")
    page.wait_for_selector("#esa-text")
    expect(page.locator("#esa-keys")).to_contain_text("on a suggested error")
    first = page.locator('#esa-text mark.esa-span[data-index="0"]')
    expect(first).to_have_text("cat")
    if width == 1280:
        first.focus()
        page.keyboard.press("Shift+ArrowLeft")
        page.keyboard.press("Shift+ArrowLeft")
        expect(first).to_have_text("🐈 cat")
        expect(first).to_be_focused()
        page.keyboard.press("ArrowRight")  # the end one character on (the space), and back
        expect(first).to_have_text("🐈 cat ")
        page.keyboard.press("ArrowLeft")
        expect(first).to_have_text("🐈 cat")
        page.locator('#esa-list button.esa-toggle[data-index="2"]').click()  # re-grade MAT
        expect(page.locator('#esa-list button.esa-toggle[data-index="2"]')).to_have_text(
            "Make major"
        )
    else:
        page.locator('#esa-list button.esa-move[data-index="0"]').tap()
        expect(page.locator('#esa-list button.esa-move[data-index="0"]')).to_have_attribute(
            "aria-pressed", "true"
        )
        drag_over(page, "today")  # past the other suggestions: the list's order changes
        expect(page.locator("#esa-quote")).to_have_text("today")
        expect(page.locator("button.esa-add-minor")).to_be_hidden()
        page.locator("#esa-move-here").tap()
        last = page.locator('#esa-text mark.esa-span[data-index="2"]')
        expect(last).to_have_text("today")
        expect(first).to_have_text("teh")
        expect(page.locator("#esa-bar")).to_be_hidden()
        page.reload()  # the tab's draft keeps the moved suggestion
        expect(last).to_have_text("today")
        page.locator('#esa-list button.esa-remove[data-index="1"]').tap()  # delete MAT
        expect(page.locator("#esa-text mark.esa-span")).to_have_count(2)
    page.fill("#esa-score", "55")
    page.click("button.submit")
    page.wait_for_selector("text=You have finished")
    assert problems == []
    context.close()

    answer = Annotation.objects.get().answer
    got = [
        (s["start"], s["end"], s["text"], s["severity"], s["origin"], s["action"])
        + (s.get("resized"), s.get("suggested_start"), s.get("suggested_end"))
        for s in answer["spans"]
    ]
    if width == 1280:
        assert got == [
            (4, 9, "🐈 cat", "minor", "judge", "edited", True, 6, 9),
            (17, 20, "teh", "minor", "judge", "accepted", None, None, None),
            (21, 24, "MAT", "minor", "judge", "edited", False, None, None),
        ]
        assert answer["deleted"] == []
    else:
        assert got == [
            (17, 20, "teh", "minor", "judge", "accepted", None, None, None),
            (25, 30, "today", "minor", "judge", "edited", True, 6, 9),
        ]
        assert [(d["text"], d["suggestion"]) for d in answer["deleted"]] == [("MAT", 2)]


@pytest.mark.django_db(transaction=True)
def test_keys_move_a_suggestions_boundaries_in_reading_order_in_right_to_left_text(
    base_url, browser, make_study
):
    """In Hebrew (the text box resolves to right-to-left) the left arrow goes forward: on
    the first suggestion ← ×3 moves its end over " על"; Shift+← on the second moves its
    start past the article ה. Stored offsets are the code points Python counts."""
    require_postgres_and_redis()
    text = "החתול ישב על השטיח היום."
    proposed = [
        {"start": 6, "end": 9, "severity": "minor", "text": "ישב"},
        {"start": 13, "end": 18, "severity": "major", "text": "השטיח"},
    ]
    study = make_study(
        bundle(
            [{"id": "doc-1", "input": "Describe it.", "outputs": {"sys-hidden": text}}],
            {"kind": "error_spans", "redundancy": 1, "prefill_spans": "on"},
        )
    )
    output = Output.objects.get(input__study=study)
    services.judge_rating_record(
        study,
        judge=JUDGE,
        input_id=output.input_id,
        system_id=output.system_id,
        raw_answer="{}",
        label="errors",
        proposal={"spans": proposed, "located": 2},
    )
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base_url}/w/{study.public_id}/?worker=prolific-rtl")
    page.click("text=Start")
    first = page.locator('#esa-text mark.esa-span[data-index="0"]')
    second = page.locator('#esa-text mark.esa-span[data-index="1"]')
    expect(first).to_have_text("ישב")
    first.focus()
    for _ in range(3):
        page.keyboard.press("ArrowLeft")
    expect(first).to_have_text("ישב על")
    second.focus()
    page.keyboard.press("Shift+ArrowLeft")
    expect(second).to_have_text("שטיח")
    page.fill("#esa-score", "70")
    page.click("button.submit")
    page.wait_for_selector("text=You have finished")
    page.close()
    spans = Annotation.objects.get().answer["spans"]
    assert [
        (s["start"], s["end"], s["text"], s["action"], s["resized"])
        + (s["suggested_start"], s["suggested_end"])
        for s in spans
    ] == [(6, 12, "ישב על", "edited", True, 6, 9), (14, 18, "שטיח", "edited", True, 13, 18)]
