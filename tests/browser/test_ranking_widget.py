"""The ranking widget (kinds/templates/kinds/ranking.html + kinds/static/kinds/ranking.js) in
real Chromium, on a page built from the real templates and static files under the site's
Content-Security-Policy (no server or database: Playwright answers the page's requests).
What the widget posts is read back through ``kinds.ranking`` as the server will.

The whole worker flow (import, serve, reload, double submit, display order stored) is
tested with the views once the ranking kind is wired into them."""

import json
from pathlib import Path
from urllib.parse import parse_qs

import pytest
from django.template import Context, Engine

from formats.conversation import for_display
from kinds.ranking import KIND as RANKING
from tests.browser.conftest import close_settled

ROOT = Path(__file__).resolve().parents[2]
ORIGIN = "http://widget.test"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'"
)
STATIC = {
    "/static/humeval/humeval.css": ROOT / "static/humeval/humeval.css",
    "/static/humeval/task.js": ROOT / "static/humeval/task.js",
    "/static/kinds/ranking.css": ROOT / "kinds/static/kinds/ranking.css",
    "/static/kinds/draft.js": ROOT / "kinds/static/kinds/draft.js",
    "/static/kinds/ranking.js": ROOT / "kinds/static/kinds/ranking.js",
}
LONG_LINE = "x = [" + ", ".join(str(i) for i in range(400)) + "]"
OUTPUTS = [
    "First answer: **bold** and a list\n\n- one\n- two",
    f"Second answer with code\n\n```python\n{LONG_LINE}\n```",
    "Third <script>window.__pwned = 1</script><img src=x onerror='window.__pwned=2'> answer",
    "Fourth answer " + "word " * 200,
]


def task_page(outputs, allow_tie: bool) -> str:
    """The task page's form around the ranking kind's template, as task.html includes it."""
    # The kinds app's templates directory by path: the test needs it whether or not the
    # settings list the app.
    engine = Engine(
        dirs=[str(ROOT / "kinds/templates")],
        app_dirs=True,
        libraries={
            "static": "django.templatetags.static",
            "humeval": "annotator.templatetags.humeval",
            "i18n": "django.templatetags.i18n",
        },
    )
    body = engine.get_template("kinds/ranking.html").render(
        Context(
            {
                "study": {"render_markdown": True},
                "outputs": outputs,
                "preview": False,
                **RANKING.context({"allow_tie": allow_tie}),
            }
        )
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="stylesheet" href="/static/humeval/humeval.css"></head><body><main class="page">'
        '<form method="post" id="task-form" class="task ranking" action="/submit">'
        '<input type="hidden" name="time_ms" id="time_ms" value="">'
        f"{body}</form></main>"
        '<script src="/static/humeval/task.js"></script></body></html>'
    )


@pytest.fixture
def serve():
    """Open the widget in a page; returns (page, posted bodies, CSP violations)."""
    opened = []

    def open_page(browser, outputs=OUTPUTS, allow_tie=False, phone=False):
        size = {"width": 390, "height": 844} if phone else {"width": 1280, "height": 900}
        context = browser.new_context(viewport=size, has_touch=phone, is_mobile=phone)
        opened.append(context)
        page = context.new_page()
        html = task_page(outputs, allow_tie)
        posted: list[dict] = []
        violations: list[str] = []
        page.on(
            "console",
            lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None,
        )

        def answer(route):
            url = route.request.url[len(ORIGIN) :]
            if route.request.method == "POST":
                posted.append(parse_qs(route.request.post_data or ""))
                return route.fulfill(body="posted", content_type="text/plain")
            if url in STATIC:
                kind = "text/css" if url.endswith(".css") else "text/javascript"
                return route.fulfill(body=STATIC[url].read_text(), content_type=kind)
            return route.fulfill(
                body=html,
                content_type="text/html; charset=utf-8",
                headers={"Content-Security-Policy": CSP},
            )

        page.route(f"{ORIGIN}/**", answer)
        page.goto(f"{ORIGIN}/task")
        return page, posted, violations

    yield open_page
    for context in opened:
        close_settled(context)


def value(page) -> list[list[int]]:
    return json.loads(page.locator('input[name="ranking"]').input_value())


def order(page) -> list[str]:
    return page.locator(".rank-card h2").all_text_contents()


def card(page, n: int):
    return page.locator(f'.rank-card[data-label="Response {n}"]')


def test_cards_are_labelled_by_display_position_and_the_answer_starts_as_shown(browser, serve):
    page, _, violations = serve(browser)
    assert order(page) == ["Response 1", "Response 2", "Response 3", "Response 4"]
    assert value(page) == [[0], [1], [2], [3]]
    assert page.locator(".rank-place").all_inner_texts() == ["1", "2", "3", "4"]
    assert page.locator(".rank-tie-box").count() == 0  # no ties in this study
    # Hostile output text is inert; the CSP let the widget's own files run and nothing else.
    assert page.evaluate("window.__pwned") is None
    assert violations == []


def test_keyboard_moves_the_focused_card(browser, serve):
    page, _, _ = serve(browser)
    card(page, 3).focus()
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowUp")
    assert order(page)[0] == "Response 3"
    assert value(page) == [[2], [0], [1], [3]]
    assert page.evaluate("document.activeElement.dataset.label") == "Response 3"
    page.keyboard.press("End")
    assert value(page) == [[0], [1], [3], [2]]
    assert "Response 3: place 4 of 4." in page.locator(".rank-live").inner_text()
    # Inside a card's text plain arrows scroll it; Alt+arrow moves the card.
    card(page, 1).locator(".text").focus()
    page.keyboard.press("ArrowDown")
    assert value(page) == [[0], [1], [3], [2]]
    page.keyboard.press("Alt+ArrowDown")
    assert value(page) == [[1], [0], [3], [2]]


def test_buttons_move_a_card_and_stop_at_the_ends(browser, serve):
    page, _, _ = serve(browser)
    down = card(page, 1).locator('[data-move="1"]')
    for _ in range(3):
        down.click()
    assert value(page) == [[1], [2], [3], [0]]
    assert down.is_disabled() and card(page, 1).locator('[data-move="-1"]').is_enabled()
    assert page.locator(".rank-card").first.locator('[data-move="-1"]').is_disabled()


def test_mouse_drag_and_drop(browser, serve):
    page, _, _ = serve(browser)
    grip = card(page, 4).locator(".rank-grip").bounding_box()
    page.mouse.move(grip["x"] + grip["width"] / 2, grip["y"] + grip["height"] / 2)
    page.mouse.down()
    assert page.locator(".rank-list.rank-dragging").count() == 1
    target = page.locator(".rank-card").first.bounding_box()
    page.mouse.move(grip["x"] + 10, target["y"] + 5, steps=12)
    page.mouse.up()
    assert page.locator(".rank-list.rank-dragging").count() == 0
    assert value(page) == [[3], [0], [1], [2]]


def test_touch_drag_on_a_phone_without_horizontal_scrolling(browser, serve):
    page, posted, _ = serve(browser, phone=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    for n in range(1, 5):
        box = card(page, n).bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390
    # The long code line scrolls inside its card instead of widening the page.
    code = card(page, 2).locator("pre")
    assert code.evaluate("e => e.scrollWidth > e.clientWidth")
    # Drag Response 1 below Response 2 with a finger (touch events → pointer events).
    grip = card(page, 1).locator(".rank-grip").bounding_box()
    x, y = grip["x"] + grip["width"] / 2, grip["y"] + grip["height"] / 2
    cdp = page.context.new_cdp_session(page)
    cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": x, "y": y}]})
    below = card(page, 2).bounding_box()
    goal = below["y"] + below["height"] * 0.75
    for i in range(1, 11):
        step = {"x": x, "y": y + (goal - y) * i / 10}
        cdp.send("Input.dispatchTouchEvent", {"type": "touchMove", "touchPoints": [step]})
    cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
    assert value(page) == [[1], [0], [2], [3]]
    # Buttons are big enough to tap.
    tap = card(page, 3).locator('[data-move="-1"]').bounding_box()
    assert tap["width"] >= 44 and tap["height"] >= 44


def test_ties_join_a_card_to_the_one_above(browser, serve):
    page, _, _ = serve(browser, allow_tie=True)
    assert not card(page, 1).locator(".rank-tie").is_visible()  # nothing above the first
    card(page, 2).get_by_label("Tie with the one above").check()
    assert value(page) == [[0, 1], [2], [3]]
    assert page.locator(".rank-place").all_inner_texts() == ["1", "1", "3", "4"]
    card(page, 4).get_by_label("Tie with the one above").check()
    assert value(page) == [[0, 1], [2, 3]]
    # Moved to the top, a card cannot be tied with the one above.
    card(page, 4).focus()
    page.keyboard.press("Home")
    assert value(page) == [[3], [0, 1], [2]]
    assert not card(page, 4).locator(".rank-tie-box").is_checked()
    # A tie is with one card: once another comes between them, it is undone.
    card(page, 3).locator('[data-move="-1"]').click()  # 4, 1, 3, 2
    assert value(page) == [[3], [0], [2], [1]]
    assert not card(page, 2).locator(".rank-tie-box").is_checked()
    assert page.locator(".rank-card.tied").count() == 0


def test_submit_sends_what_the_server_reads_and_asks_once_about_an_untouched_order(browser, serve):
    page, posted, _ = serve(browser, allow_tie=True)
    submit = page.get_by_role("button", name="Submit")
    submit.click()
    note = page.locator(".rank-note")
    assert note.is_visible() and "You have not moved any response" in note.inner_text()
    assert posted == []
    card(page, 3).locator('[data-move="-1"]').click()  # 3 above 2
    card(page, 4).get_by_label("Tie with the one above").check()  # 4 tied with 2
    assert not note.is_visible()
    with page.expect_response(f"{ORIGIN}/submit"):
        submit.click()
    assert len(posted) == 1
    submitted = posted[0]["ranking"][0]
    assert json.loads(submitted) == [[0], [2], [1, 3]]
    # The server's reading: shown order [2, 0, 3, 1] means Response 1 is system position 2.
    answer = RANKING.parse_answer({"allow_tie": True}, [2, 0, 3, 1], {"ranking": submitted})
    assert answer["ranking"] == [[2], [3], [0, 1]]


def test_conversation_outputs_show_each_role_apart(browser, serve):
    turns = [
        {"role": "assistant", "content": "Sure — which city?"},
        {"role": "user", "content": "Paris <script>window.__pwned = 3</script>"},
        {"role": "assistant", "content": f"```\n{LONG_LINE}\n```"},
    ]
    page, _, violations = serve(browser, outputs=[for_display(turns), "Plain", "Other"])
    first = card(page, 1)
    assert first.locator(".turn-assistant").count() == 2
    # Markdown off for raw HTML: the tag is shown as text, never run.
    assert first.locator(".turn-user .text").inner_text() == turns[1]["content"]
    assert first.locator("script").count() == 0
    assert first.locator(".turn .role").all_text_contents() == ["assistant", "user", "assistant"]
    colours = first.locator(".turn").evaluate_all(
        "turns => turns.map(t => getComputedStyle(t).backgroundColor)"
    )
    assert colours[0] != colours[1] and colours[0] == colours[2]
    code = first.locator(".turn-assistant pre")
    assert code.evaluate("e => e.scrollWidth > e.clientWidth")
    assert page.evaluate("window.__pwned") is None and violations == []


def test_a_card_dragged_past_a_tie_leaves_it_standing(browser, serve):
    page, _, _ = serve(browser, allow_tie=True)
    card(page, 2).get_by_label("Tie with the one above").check()
    assert value(page) == [[0, 1], [2], [3]]
    grip = card(page, 4).locator(".rank-grip").bounding_box()
    page.mouse.move(grip["x"] + grip["width"] / 2, grip["y"] + grip["height"] / 2)
    page.mouse.down()
    target = page.locator(".rank-card").first.bounding_box()
    page.mouse.move(grip["x"] + 10, target["y"] + 5, steps=20)  # between 2 and 1 on the way
    page.mouse.up()
    assert value(page) == [[3], [0, 1], [2]]
    assert card(page, 2).locator(".rank-tie-box").is_checked()
