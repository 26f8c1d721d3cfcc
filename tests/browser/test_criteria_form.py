"""The pairwise criteria form (kinds/_criteria.html, kinds/criteria.js|css) in real Chromium,
on a static page served under a strict CSP (the partial brings its own stylesheet and
script): keyboard answers move through the criteria, the
reason box counts characters and refuses blanks when required, the five points stack on a
phone, and what the browser posts parses (kinds.criteria.parse_answer) to the expected answer
in system order. The full worker flow is tested with the pairwise kind's page."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl

import pytest
from django.template import Context, Engine
from playwright.sync_api import expect

from kinds import criteria as crit

ROOT = Path(__file__).resolve().parents[2]
ORIGIN = "http://fixture.test"
STATIC = {
    "/static/humeval/humeval.css": ROOT / "static/humeval/humeval.css",
    "/static/humeval/task.js": ROOT / "static/humeval/task.js",
    "/static/kinds/criteria.css": ROOT / "kinds/static/kinds/criteria.css",
    "/static/kinds/criteria.js": ROOT / "kinds/static/kinds/criteria.js",
}
CSP = "default-src 'self'; script-src 'self'; style-src 'self'; form-action 'self'"
THREE = [
    {"name": "helpful", "label": "Which response is more helpful?"},
    {"name": "correct", "label": "Which response is more correct?"},
    {"name": "concise", "label": "Which response is more concise?"},
]
PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>fixture</title>
<link rel="stylesheet" href="/static/humeval/humeval.css"></head>
<body><main class="page"><form method="post" action="/submit" id="task-form" class="task pairwise">
<input type="hidden" name="time_ms" id="time_ms" value="">
<div class="outputs two"><section class="output"><h2>Left</h2><div class="text">one</div></section>
<section class="output"><h2>Right</h2><div class="text">two</div></section></div>
{form}</form></main>
<script src="/static/humeval/task.js"></script>
</body></html>"""


def render(opts: dict, question: str = "Which response is better?", disabled: bool = False) -> str:
    engine = Engine(
        dirs=[str(ROOT / "kinds/templates")],
        autoescape=True,
        libraries={"static": "django.templatetags.static", "i18n": "django.templatetags.i18n"},
    )
    form = engine.get_template("kinds/_criteria.html").render(
        Context(crit.template_context(opts, question, disabled))
    )
    return PAGE.replace("{form}", form)


@pytest.fixture
def serve(page):
    """Serve a rendered page at ORIGIN with a strict CSP; collect posts and CSP reports."""
    posts: list[dict[str, str]] = []
    problems: list[str] = []
    page.on(
        "console",
        lambda m: problems.append(m.text) if m.type == "error" else None,
    )
    page.on("pageerror", lambda e: problems.append(str(e)))

    def load(html: str, width: int = 1280, height: int = 900) -> None:
        def handle(route):
            req = route.request
            path = req.url[len(ORIGIN) :].split("?")[0]
            if path == "/submit" and req.method == "POST":
                posts.append(dict(parse_qsl(req.post_data or "", keep_blank_values=True)))
                return route.fulfill(status=200, body="ok", content_type="text/plain")
            if path in STATIC:
                kind = "text/css" if path.endswith(".css") else "text/javascript"
                return route.fulfill(status=200, body=STATIC[path].read_text(), content_type=kind)
            if path == "/task":
                return route.fulfill(
                    status=200,
                    body=html,
                    content_type="text/html",
                    headers={"Content-Security-Policy": CSP},
                )
            return route.fulfill(status=404, body="")

        page.set_viewport_size({"width": width, "height": height})
        page.route(f"{ORIGIN}/**", handle)
        page.goto(f"{ORIGIN}/task")

    load.posts, load.problems = posts, problems
    return load


def focused(page) -> str:
    return page.evaluate(
        "() => { const e = document.activeElement;"
        " return e.type === 'radio' ? e.name + '=' + e.value : e.tagName; }"
    )


@pytest.mark.browser
def test_keyboard_answers_every_criterion_then_the_reason_and_submits(page, serve):
    opts = crit.validate_options({"criteria": THREE, "strength": True, "rationale": "required"})
    serve(render(opts))
    assert page.locator("fieldset.pair-criterion").count() == 3
    assert page.locator("fieldset.pair-criterion").first.evaluate(
        "e => e.classList.contains('current')"
    )

    page.keyboard.press("1")  # helpful: left much better
    assert focused(page) == "answer-correct=left>>"
    page.keyboard.press("4")  # correct: right better
    assert focused(page) == "answer-concise=left>>"
    page.keyboard.press("3")  # concise: about the same
    assert focused(page) == "TEXTAREA"
    # digits typed in the reason are text, not answers
    page.keyboard.type("  ")
    assert page.locator("[data-count]").text_content() == "2"
    page.locator("button[type=submit]").click()  # only spaces: the browser refuses
    page.wait_for_timeout(200)
    assert serve.posts == []
    page.keyboard.type("Answer 2 is wrong.")
    assert page.locator("[data-count]").text_content() == str(len("  Answer 2 is wrong."))
    # focus back on a criterion: a number key re-answers that one, Enter submits
    page.locator("input[name=answer-correct][value='right>']").focus()
    page.keyboard.press("5")
    page.keyboard.press("Enter")
    expect(page.locator("body")).to_contain_text("ok")
    assert len(serve.posts) == 1
    posted = serve.posts[0]
    assert posted["time_ms"].isdigit()
    # display order [1, 0]: the left response is the item's B
    answer = crit.parse_answer(opts, [1, 0], posted)
    assert answer["criteria"] == {
        "helpful": {"raw": "left>>", "value": "B", "strength": -2},
        "correct": {"raw": "right>>", "value": "A", "strength": 2},
        "concise": {"raw": "=", "value": "tie", "strength": 0},
    }
    assert answer["rationale"] == "Answer 2 is wrong."
    assert serve.problems == []


@pytest.mark.browser
def test_three_way_criteria_take_number_keys_and_a_missing_answer_blocks_submit(page, serve):
    opts = crit.validate_options({"criteria": THREE[:2]}) | {"allow_tie": True}
    serve(render(opts))
    assert page.locator("textarea").count() == 0
    page.keyboard.press("2")  # helpful: right
    page.keyboard.press("Enter")  # correct unanswered: the browser refuses
    page.wait_for_timeout(200)
    assert serve.posts == []
    page.keyboard.press("3")  # correct: tie
    assert focused(page) == "BUTTON"
    page.keyboard.press("Enter")
    expect(page.locator("body")).to_contain_text("ok")
    answer = crit.parse_answer(opts, [0, 1], serve.posts[0])
    assert answer["criteria"] == {
        "helpful": {"raw": "right", "value": "B"},
        "correct": {"raw": "tie", "value": "tie"},
    }
    assert serve.problems == []


@pytest.mark.browser
def test_five_points_stack_readably_on_a_phone_and_post_the_implicit_answer(page, serve):
    opts = crit.validate_options({"strength": True, "rationale": "optional"}) | {"allow_tie": True}
    serve(render(opts), width=390, height=844)
    choices = page.locator("label.choice")
    assert choices.count() == 5
    boxes = [choices.nth(k).bounding_box() for k in range(5)]
    texts = [choices.nth(k).inner_text().strip() for k in range(5)]
    assert texts == [
        "Response 1 is much better",
        "Response 1 is better",
        "About the same",
        "Response 2 is better",
        "Response 2 is much better",
    ]
    for box in boxes:  # one per line, top to bottom, inside the viewport, tall enough to tap
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390
        assert box["height"] >= 44
    assert all(b["y"] > a["y"] + a["height"] - 1 for a, b in zip(boxes, boxes[1:], strict=False))
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    page.get_by_text("Response 2 is much better").click()
    page.locator("button[type=submit]").dblclick()  # an optional reason may stay empty
    expect(page.locator("body")).to_contain_text("ok")
    assert len(serve.posts) == 1  # task.js lets one submit through
    answer = crit.parse_answer(opts, [0, 1], serve.posts[0])
    assert answer == {
        "criteria": {"preference": {"raw": "right>>", "value": "B", "strength": -2}},
        "raw": "right>>",
        "value": "B",
        "rationale": "",
    }
    assert serve.problems == []


@pytest.mark.browser
def test_the_preview_form_is_inert(page, serve):
    opts = crit.validate_options({"criteria": THREE, "strength": True, "rationale": "required"})
    serve(render(opts, disabled=True))
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    page.locator("label.choice").first.click(force=True)
    page.wait_for_timeout(200)
    assert page.locator("input:checked").count() == 0
    assert page.locator("textarea").is_disabled()
    assert page.url.endswith("/task") and serve.posts == []
    assert serve.problems == []
