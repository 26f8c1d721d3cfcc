"""Both responses stay on screen in real Chromium, on a desktop and on a phone.

One output holds a fenced code block with a 200-character line, the other a Markdown table
of twelve columns of long words. On every page that shows them (the qualification test, the
task, the MTurk preview) each response's panel lies inside the viewport and the document
never scrolls sideways; the code block and the table scroll inside their panel. A Likert
page with the same code block fits too. Screenshots go to ``HUMEVAL_SCREENSHOTS`` when set.
"""

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from annotator import services
from annotator.models import QualificationQuestion, QualificationTest
from tests.conftest import bundle
from tests.services import require_postgres_and_redis

LONG_LINE = "result = compute(" + ", ".join(f"argument_{i:02d}" for i in range(16)) + ")"
LONG_LINE = (LONG_LINE + " # " + "x" * 200)[:200]
CODE = f"Here is the code:\n\n```python\n{LONG_LINE}\nprint(result)\n```\n\nIt runs as is."
WORDS = [f"Incomprehensibilities{i}" for i in range(12)]
TABLE = (
    "The comparison:\n\n"
    + "| "
    + " | ".join(WORDS)
    + " |\n|"
    + "---|" * len(WORDS)
    + "\n"
    + "".join("| " + " | ".join(f"{w}-{r}" for w in WORDS) + " |\n" for r in range(3))
)
VIEWPORTS = [(1280, 900), (390, 844)]


@pytest.fixture
def wide_study(db):
    require_postgres_and_redis()
    records = [
        {"id": f"q{i}", "input": f"Write code for task {i}.", "outputs": {"m1": CODE, "m2": TABLE}}
        for i in range(3)
    ]
    study = services.study_import(
        bundle(records, {"name": "wide", "kind": "pairwise", "redundancy": 1}),
        filename="wide.jsonl",
        overrides={
            "open_links": True,
            "items_per_worker": 2,
            "gold_rate_start": 0.0,
            "gold_rate_end": 0.0,
        },
    )
    test = QualificationTest.objects.create(name="wide test", pass_threshold=1)
    QualificationQuestion.objects.create(
        test=test, prompt="Which is better?", outputs=[CODE, TABLE], expected={"value": "A"}
    )
    study.qualification = test
    study.save(update_fields=["qualification"])
    return study


@pytest.fixture
def likert_study(db):
    require_postgres_and_redis()
    return services.study_import(
        bundle(
            [{"id": "1", "input": "Write code.", "outputs": {"m": CODE + "\n\n" + TABLE}}],
            {
                "kind": "likert",
                "criteria": [{"name": "quality", "label": "How good?", "scale": [1, 5]}],
            },
        ),
        filename="likert.jsonl",
        overrides={"open_links": True, "gold_rate_start": 0.0, "gold_rate_end": 0.0},
    )


def shoot(page, name: str) -> None:
    folder = os.environ.get("HUMEVAL_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def assert_fits(page, width: int, panels: list[str]) -> list[dict]:
    """Every panel inside the viewport horizontally; no sideways scroll of the document."""
    boxes = []
    for selector in panels:
        box = page.locator(selector).bounding_box()
        assert box is not None, selector
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, (selector, box)
        boxes.append(box)
    scroll_width, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert inner == width and scroll_width <= inner, (scroll_width, inner)
    return boxes


def assert_pair_layout(page, width: int) -> None:
    left, right = assert_fits(page, width, ["#output-left", "#output-right"])
    # the wide content scrolls inside its panel instead of widening it
    for block in ("pre", "table"):
        inner = page.locator(f".outputs {block}").first
        size = inner.evaluate("e => [e.scrollWidth, e.clientWidth]")
        assert size[0] > size[1], (block, size)
        box = inner.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width
    labels = [page.inner_text("#left-label"), page.inner_text("#right-label")]
    buttons = [
        page.inner_text('button[value="left"]').strip(),
        page.inner_text('button[value="right"]').strip(),
    ]
    if width >= 1000:
        assert left["y"] == right["y"] and right["x"] >= left["x"] + left["width"]
        assert labels == ["LEFT RESPONSE", "RIGHT RESPONSE"]  # h2 is upper-cased by CSS
        assert buttons == ["Left is better 1", "Right is better 2"]
        expect(page.locator(".keys")).to_be_visible()
    else:
        assert right["y"] >= left["y"] + left["height"] and left["x"] == right["x"]
        assert labels == ["RESPONSE 1", "RESPONSE 2"]
        assert buttons == ["Response 1 is better", "Response 2 is better"]
        assert page.locator("kbd:visible").count() == 0
        assert not page.locator(".keys").is_visible()
        assert "left" not in page.inner_text(".task").lower()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width,height", VIEWPORTS)
def test_both_responses_fit_on_every_pairwise_page(browser, base_url, wide_study, width, height):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    try:
        study = wide_study
        page.goto(
            f"{base_url}/w/{study.public_id}/mturk/?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=h"
        )
        page.wait_for_selector("#output-left")
        assert_pair_layout(page, width)
        shoot(page, f"preview-{width}")

        page.goto(f"{base_url}/w/{study.public_id}/?worker=wide-{width}")
        page.click("text=Start the test")
        page.wait_for_selector("text=Test question 1 of 1")
        assert_pair_layout(page, width)
        shoot(page, f"qualify-{width}")
        code_side = "left" if "print(result)" in page.inner_text("#output-left") else "right"
        page.click(f'button[value="{code_side}"]')

        for step in (1, 2):
            page.wait_for_selector(f"text=Task {step} of 2")  # the per-worker cap
            assert page.inner_text("#progress-text") == f"Task {step} of 2"
            assert_pair_layout(page, width)
            shoot(page, f"task{step}-{width}")
            page.click('button[value="right"]')
            page.wait_for_load_state("load")
    finally:
        context.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width,height", VIEWPORTS)
def test_likert_response_fits(browser, base_url, likert_study, width, height):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    try:
        page.goto(f"{base_url}/w/{likert_study.public_id}/?worker=likert-{width}")
        page.click("text=Start")
        page.wait_for_selector(".output.single")
        page.wait_for_load_state("domcontentloaded")  # the whole task parsed
        assert page.inner_text("#progress-text") == "Task 1"  # no cap: no total
        assert_fits(page, width, [".output.single", ".input", "fieldset.criterion"])
        shoot(page, f"likert-{width}")
        assert page.locator(".keys").is_visible() == (width >= 1000)
    finally:
        context.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width,height", VIEWPORTS)
@pytest.mark.parametrize("kind", ["ranking", "error_spans"])
def test_ranking_and_error_span_pages_fit(browser, base_url, make_study, kind, width, height):
    """The code line and the wide table stay inside the page of the two other kinds: ranking
    cards (Markdown, scrolled inside the card) and the error-span text (plain, wrapped)."""
    require_postgres_and_redis()
    outputs = {"m1": CODE, "m2": TABLE, "m3": CODE + "\n\n" + TABLE}
    if kind == "error_spans":
        outputs = {"m1": CODE + "\n\n" + TABLE}
    study = make_study(
        bundle([{"id": "1", "input": "Write code.", "outputs": outputs}], {"kind": kind})
    )
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    try:
        page.goto(f"{base_url}/w/{study.public_id}/?worker={kind}-{width}")
        page.click("text=Start")
        panel = ".rank-card" if kind == "ranking" else "#esa-text"
        page.wait_for_selector(panel)
        cards = page.locator(panel)
        assert_fits(page, width, [f"{panel} >> nth={k}" for k in range(cards.count())])
        shoot(page, f"{kind}-{width}")
    finally:
        context.close()
