"""The error-span widget (kinds/templates/kinds/error_spans.html + kinds/static/kinds/) in real
Chromium, on a fixture page: the kind's template rendered by Django's template engine inside a
task form with the worker pages' CSP, served by a small HTTP server whose submit endpoint runs
``kinds.error_spans`` on the posted form, as the server will. No database: the full worker
flow (lease, reload, double submit) is tested with the task page itself.

The output mixes an emoji (two UTF-16 units, one code point), CJK and a second line, so every
offset the page sends must be converted from JavaScript's UTF-16 to Python's code points.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

import pytest

from kinds.base import AnswerError
from kinds.error_spans import KIND

ROOT = Path(__file__).resolve().parents[2]
STATIC_DIRS = [ROOT / "kinds" / "static", ROOT / "static"]
OUTPUT = "Hi 😀 the cat 猫がいる sat.\nSecond line 🎉 has 中文 errors here."
OPTS = {"categories": ["Accuracy", "Fluency"], "max_spans": 100}
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'"
)


def page_html() -> str:
    from django.template import Context, Engine

    engine = Engine(
        dirs=[str(ROOT / "kinds" / "templates")],
        libraries={"static": "django.templatetags.static", "i18n": "django.templatetags.i18n"},
    )
    body = engine.get_template("kinds/error_spans.html").render(
        Context({"outputs": [OUTPUT], "preview": False, **KIND.context(OPTS)})
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="stylesheet" href="/static/humeval/humeval.css"><title>fixture</title></head>'
        '<body><main class="page"><form method="post" action="/submit" id="task-form" '
        'class="task error_spans"><input type="hidden" name="token" value="tok-1">'
        '<input type="hidden" name="time_ms" id="time_ms" value="">'
        f"{body}</form></main>"
        '<script src="/static/humeval/task.js"></script></body></html>'
    )


class Fixture(BaseHTTPRequestHandler):
    posts: list = []

    def log_message(self, *args):  # quiet
        pass

    def send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/favicon.ico":
            return self.send(204, b"", "image/x-icon")
        if self.path == "/":
            return self.send(200, page_html().encode(), "text/html; charset=utf-8")
        if self.path.startswith("/static/"):
            rel = self.path.removeprefix("/static/")
            for d in STATIC_DIRS:
                f = (d / rel).resolve()
                if f.is_file() and d.resolve() in f.parents:
                    ctype = "text/css" if f.suffix == ".css" else "text/javascript"
                    return self.send(200, f.read_bytes(), ctype)
        self.send(404, b"not found", "text/plain")

    def do_POST(self):
        length = int(self.headers["Content-Length"])
        form = {k: v[-1] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
        try:
            answer = KIND.parse_answer(OPTS, [0], form, outputs=[OUTPUT])
        except AnswerError as exc:
            Fixture.posts.append({"error": str(exc)})
            return self.send(400, str(exc).encode(), "text/plain; charset=utf-8")
        Fixture.posts.append(answer)
        self.send(200, b"<!doctype html><p id=done>stored</p>", "text/html")


@pytest.fixture(scope="module")
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Fixture)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def open_page(browser, server):
    contexts = []

    def open_(width=1280, height=900, **kw):
        context = browser.new_context(viewport={"width": width, "height": height}, **kw)
        contexts.append(context)
        page = context.new_page()
        page.problems = []
        page.on("console", lambda m: m.type == "error" and page.problems.append(m.text))
        page.on("pageerror", lambda e: page.problems.append(str(e)))
        page.on(
            "response", lambda r: r.status >= 400 and page.problems.append(f"{r.status} {r.url}")
        )
        page.goto(server + "/")
        Fixture.posts.clear()
        return page

    yield open_
    for c in contexts:
        c.close()


def cp(sub: str, nth: int = 0) -> tuple[int, int]:
    """Code-point offsets of ``sub`` in OUTPUT (Python's indexes)."""
    at = -1
    for _ in range(nth + 1):
        at = OUTPUT.index(sub, at + 1)
    return at, at + len(sub)


def select_utf16(page, sub: str) -> None:
    """A DOM selection over ``sub`` (UTF-16 offsets in the page), as a mouse or a finger makes."""
    page.evaluate(
        """sub => {
          const box = document.getElementById('esa-text');
          const i = box.textContent.indexOf(sub);
          if (i < 0) throw new Error('not found: ' + sub);
          const at = u => { const w = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
            let n, seen = 0; while ((n = w.nextNode())) {
              if (u <= seen + n.length) return [n, u - seen]; seen += n.length; } };
          const [a, ao] = at(i), [b, bo] = at(i + sub.length);
          getSelection().setBaseAndExtent(a, ao, b, bo);
        }""",
        sub,
    )
    page.dispatch_event("#esa-text", "mouseup")


def drag_over(page, sub: str) -> None:
    """A real mouse drag from the first to the last character of ``sub`` (in the first text
    node of the response that holds it: marks split the text into several)."""
    box = page.evaluate(
        """sub => {
          const box = document.getElementById('esa-text');
          const w = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
          let n = w.nextNode();
          while (n && !n.data.includes(sub)) n = w.nextNode();
          const i = n.data.indexOf(sub), r = document.createRange();
          r.setStart(n, i); r.setEnd(n, i + 1); const a = r.getBoundingClientRect();
          r.setStart(n, i + sub.length - 1); r.setEnd(n, i + sub.length);
          const b = r.getBoundingClientRect();
          return [a.left + 1, a.top + a.height / 2, b.right - 1, b.top + b.height / 2];
        }""",
        sub,
    )
    page.mouse.move(box[0], box[1])
    page.mouse.down()
    page.mouse.move(box[2], box[3], steps=5)
    page.mouse.up()


def posted_spans(page) -> list:
    return json.loads(page.input_value("#esa-spans"))


def test_mouse_keyboard_and_submit_with_code_point_offsets(open_page):
    page = open_page()
    # A real drag over "cat" (after the emoji: UTF-16 offset 10, code point 9).
    drag_over(page, "cat")
    page.wait_for_selector("#esa-bar:not([hidden])")
    assert page.text_content("#esa-quote") == "cat"
    page.select_option("#esa-category", "Accuracy")
    page.click("button.esa-add-major")
    assert page.locator("#esa-bar").is_hidden()
    assert posted_spans(page) == [
        {"start": 9, "end": 12, "severity": "major", "category": "Accuracy", "text": "cat"}
    ]
    assert cp("cat") == (9, 12)

    # CJK after an emoji on the second line, selected as a finger or mouse leaves it; "m".
    select_utf16(page, "中文")
    page.wait_for_selector("#esa-bar:not([hidden])")
    page.keyboard.press("m")
    spans = posted_spans(page)
    assert spans[1] == {"start": cp("中文")[0], "end": cp("中文")[1], "severity": "minor",
                        "category": None, "text": "中文"}  # fmt: skip

    # Keyboard: in the text, Home selects the first word, Shift+→ adds the next, M = major.
    page.focus("#esa-text")
    page.keyboard.press("Home")
    assert page.text_content("#esa-quote") == "Hi"
    page.keyboard.press("Shift+ArrowRight")
    assert page.text_content("#esa-quote") == "Hi 😀"
    page.keyboard.press("Control+Shift+ArrowLeft")  # one character less: the emoji's space
    assert page.text_content("#esa-quote") == "Hi "
    page.keyboard.press("Control+Shift+ArrowRight")
    page.keyboard.press("Shift+M")
    spans = posted_spans(page)
    assert spans[0] == {"start": 0, "end": 4, "severity": "major", "category": None,
                        "text": "Hi 😀"}  # fmt: skip
    assert OUTPUT[0:4] == "Hi 😀"
    # Going on from the mark: the next word, whole (not the space before it).
    page.keyboard.press("Shift+ArrowRight")
    assert page.text_content("#esa-quote") == "the"
    page.keyboard.press("ArrowRight")  # "cat" is marked already
    assert "overlaps" in page.text_content("#esa-problem")
    page.keyboard.press("Escape")

    # Overlap refused: selecting "the cat" (over the marked "cat") disables the buttons.
    select_utf16(page, "the cat")
    assert "overlaps" in page.text_content("#esa-problem")
    assert page.is_disabled("button.esa-add-minor")
    page.keyboard.press("Escape")
    assert page.locator("#esa-bar").is_hidden()

    # Marks look different without colour (underline style), and are listed in words.
    styles = page.evaluate(
        """() => [...document.querySelectorAll('mark.esa-span')].map(m =>
             [m.className, getComputedStyle(m).textDecorationStyle])"""
    )
    assert styles == [
        ["esa-span esa-major", "solid"],
        ["esa-span esa-major", "solid"],
        ["esa-span esa-minor", "dotted"],
    ]
    assert page.locator("#esa-list li").all_text_contents()[1].startswith("Major · Accuracy")

    # Delete removes the focused span: Tab from the text reaches the first mark.
    page.focus("mark.esa-span >> nth=2")
    page.keyboard.press("Delete")
    assert [s["text"] for s in posted_spans(page)] == ["Hi 😀", "cat"]
    # ... and the Remove button of the list.
    page.click("#esa-list li:nth-child(1) button.esa-remove")
    assert [s["text"] for s in posted_spans(page)] == ["cat"]

    # No score: the form does not go.
    page.click("button.submit")
    assert Fixture.posts == []
    # The slider fills the number; the server stores what Python reads at those offsets.
    page.focus("#esa-score-range")
    page.keyboard.press("End")
    assert page.input_value("#esa-score") == "100"
    page.fill("#esa-score", "35")
    assert page.input_value("#esa-score-range") == "35"
    page.click("button.submit")
    page.wait_for_selector("#done")
    assert Fixture.posts == [
        {
            "spans": [{"start": 9, "end": 12, "severity": "major", "category": "Accuracy",
                       "text": "cat"}],
            "score": 35,
        }
    ]  # fmt: skip
    assert page.problems == []  # no script error, no CSP violation


def test_whitespace_trim_and_emoji_span(open_page):
    page = open_page()
    select_utf16(page, " 😀 ")  # the spaces around a word are dropped
    assert page.text_content("#esa-quote") == "😀"
    page.keyboard.press("m")
    assert posted_spans(page) == [
        {"start": 3, "end": 4, "severity": "minor", "category": None, "text": "😀"}
    ]
    # Delete in the text removes the span under the keyboard's selection; m marks it again.
    page.focus("#esa-text")
    page.keyboard.press("Home")
    page.keyboard.press("ArrowRight")
    assert page.text_content("#esa-quote") == "😀"
    page.keyboard.press("Delete")
    assert posted_spans(page) == []
    assert page.is_enabled("button.esa-add-minor")
    page.keyboard.press("m")
    assert [s["text"] for s in posted_spans(page)] == ["😀"]
    page.keyboard.press("1")  # digits pick a category only while a passage is selected
    page.keyboard.press("End")
    assert page.text_content("#esa-quote") == "here."
    page.keyboard.press("2")
    assert page.input_value("#esa-category") == "Fluency"
    page.keyboard.press("m")
    page.fill("#esa-score", "80")
    page.keyboard.press("Enter")  # task.js submits once the form is valid
    page.wait_for_selector("#done")
    [answer] = Fixture.posts
    assert [(s["text"], s["category"]) for s in answer["spans"]] == [
        ("😀", None),
        ("here.", "Fluency"),
    ]
    assert page.problems == []


def test_a_drag_past_the_text_is_cut_at_its_end(open_page):
    page = open_page()
    start = page.evaluate(
        """() => { const n = document.getElementById('esa-text').firstChild;
          const i = n.data.indexOf('errors'), r = document.createRange();
          r.setStart(n, i); r.setEnd(n, i + 1); const a = r.getBoundingClientRect();
          return [a.left + 1, a.top + a.height / 2]; }"""
    )
    end = page.locator("#esa-keys").bounding_box()
    page.mouse.move(*start)
    page.mouse.down()
    page.mouse.move(end["x"] + 20, end["y"] + 5, steps=8)
    page.mouse.up()
    page.wait_for_selector("#esa-bar:not([hidden])")
    assert page.text_content("#esa-quote") == "errors here."
    page.click("button.esa-add-minor")
    assert posted_spans(page)[0]["end"] == len(OUTPUT)
    assert posted_spans(page)[0]["text"] == "errors here."


def test_reload_keeps_the_marks_and_the_score_of_this_task(open_page):
    page = open_page()
    select_utf16(page, "😀")
    page.select_option("#esa-category", "Fluency")
    page.keyboard.press("M")
    page.fill("#esa-score", "42")
    page.reload()
    assert posted_spans(page) == [
        {"start": 3, "end": 4, "severity": "major", "category": "Fluency", "text": "😀"}
    ]
    assert page.locator("mark.esa-major").text_content() == "😀"
    assert page.input_value("#esa-score") == "42"
    assert page.input_value("#esa-score-range") == "42"
    # Another task's page (another token) starts empty and forgets this one's marks.
    page.evaluate(
        "() => { const k = 'humeval-esa:tok-1', v = sessionStorage.getItem(k);"
        " sessionStorage.setItem('humeval-esa:tok-0', v); }"
    )
    page.reload()
    assert page.evaluate("sessionStorage.getItem('humeval-esa:tok-0')") is None
    page.click("button.submit")
    page.wait_for_selector("#done")
    assert Fixture.posts[-1]["score"] == 42
    assert page.problems == []


def test_phone_width_fits_and_the_bar_is_on_screen(open_page):
    page = open_page(390, 844, has_touch=True, is_mobile=True)
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 390
    select_utf16(page, "Second line")
    page.wait_for_selector("#esa-bar:not([hidden])")
    bar = page.locator("#esa-bar").bounding_box()
    assert bar["x"] >= 0 and bar["x"] + bar["width"] <= 390
    assert bar["y"] + bar["height"] <= 844
    page.tap("button.esa-add-major")
    assert [s["text"] for s in posted_spans(page)] == ["Second line"]
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 390
    for sel in ("#esa-score", "#esa-score-range", "button.submit"):
        box = page.locator(sel).bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390, sel
    assert page.problems == []
