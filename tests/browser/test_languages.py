"""Worker pages in the study's language, in real Chromium at 1280 and 390 px
(docs/languages.md): an Arabic pairwise study (right to left, an English code block inside
an Arabic output), a Hebrew error-span study (spans marked by mouse and keyboard on
right-to-left text, their exported offsets in code points), a Japanese ranking study and a
German Likert study. On every page: the page's lang and dir, no English left in the chrome
(model texts aside), no sideways scroll. Screenshots go to $HUMEVAL_SCREENSHOTS when set."""

from __future__ import annotations

import functools
import json
import os
import re
import urllib.request
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect
from rest_framework.authtoken.models import Token

from annotator.models import Annotation
from tests.browser.test_error_spans_widget import drag_over
from tests.conftest import bundle
from tests.services import require_postgres_and_redis

WIDTHS = [(1280, 900), (390, 844)]
#: Words the chrome may show in Latin letters in any language: key names on the keyboard.
KEY_NAMES = {"Enter", "Shift", "Ctrl", "Alt", "Tab", "Delete", "Esc"}

ENGLISH_IN_CHROME = """() => {
  const words = [];
  const add = text => words.push(...((text || '').match(/[A-Za-z]{2,}/g) || []));
  // model texts carry dir="auto"; kbd holds key names; hidden parts are not seen
  const skip = el => el.closest('[dir="auto"], kbd, script, style, [hidden]');
  const seen = el => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden';
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const el = walker.currentNode.parentElement;
    if (el && !skip(el) && seen(el)) add(walker.currentNode.data);
  }
  document.querySelectorAll('[aria-label], [title], [placeholder]').forEach(el => {
    if (skip(el) || !seen(el)) return;
    ['aria-label', 'title', 'placeholder'].forEach(a => add(el.getAttribute(a)));
  });
  add(document.title);
  return words;
}"""


LATIN_SCRIPT = {"de", "fr", "es", "cs"}


@functools.cache
def vocabulary(language: str, *, translated: bool = False) -> frozenset[str]:
    """The words of a catalog's English messages, or of its translations (lower case)."""
    from babel.messages.pofile import read_po
    from django.conf import settings
    from django.utils.translation import to_locale

    words: set[str] = set()
    for domain in ("django", "djangojs"):
        path = Path(settings.BASE_DIR, "locale", to_locale(language), "LC_MESSAGES", f"{domain}.po")
        with path.open("rb") as po:
            for message in read_po(po):
                texts = message.string if translated else message.id
                for text in texts if isinstance(texts, tuple | list) else [texts]:
                    words |= {w.lower() for w in re.findall(r"[A-Za-z]{2,}", text or "")}
    return frozenset(words)


def shoot(page, name: str) -> None:
    folder = os.environ.get("HUMEVAL_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def check_page(page, language: str, direction: str, width: int, name: str) -> None:
    """The page speaks ``language`` in ``direction``: no English chrome, no sideways scroll."""
    assert page.evaluate("[document.documentElement.lang, document.documentElement.dir]") == [
        language,
        direction,
    ]
    words = [w for w in page.evaluate(ENGLISH_IN_CHROME) if w not in KEY_NAMES]
    if language in LATIN_SCRIPT:  # an English word of the chrome that the language lacks
        own = vocabulary(language, translated=True)
        words = [w for w in words if w.lower() in vocabulary("en") and w.lower() not in own]
    assert words == [], (name, words)
    scroll, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert inner == width and scroll <= inner, (name, scroll, inner)
    shoot(page, f"{name}-{width}")


def open_worker(browser, base_url, study, width, height, worker):
    context = browser.new_context(viewport={"width": width, "height": height}, has_touch=True)
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on(
        "response",
        lambda r: (
            r.status >= 400
            and not r.url.endswith("/favicon.ico")
            and problems.append(f"{r.status} {r.url}")
        ),
    )
    page.goto(f"{base_url}/w/{study.public_id}/?worker={worker}")
    page.wait_for_selector(".instructions-body")
    return context, page, problems


def start(page) -> None:
    page.click("a.button-primary")
    page.wait_for_selector("#task-form")
    # the whole task parsed and its scripts run, the script catalog (in the head) too
    page.wait_for_load_state("domcontentloaded")
    assert page.evaluate("() => typeof window.gettext") == "function"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("width", "height"), WIDTHS)
def test_arabic_pairwise(browser, base_url, make_study, width, height):
    require_postgres_and_redis()
    outputs = {
        "sys-a": "الجواب الأول: استخدم الدالة التالية.\n\n```python\nprint('hello')\n```\n",
        "sys-b": "الجواب الثاني أقصر، لكنه صحيح أيضًا.",
    }
    study = make_study(
        bundle(
            [{"id": "ar-1", "input": "كيف أطبع نصًا في بايثون؟", "outputs": outputs}],
            {"kind": "pairwise", "redundancy": 1, "language": "ar", "allow_tie": True},
        )
    )
    context, page, problems = open_worker(browser, base_url, study, width, height, "ar-w")
    check_page(page, "ar", "rtl", width, "ar-instructions")
    start(page)
    check_page(page, "ar", "rtl", width, "ar-pairwise")
    # each output reads right to left, its code block left to right, isolated from the page
    directions = page.evaluate(
        """() => [...document.querySelectorAll('.output .content')].map(c =>
             [getComputedStyle(c).direction, getComputedStyle(c).unicodeBidi])"""
    )
    assert directions == [["rtl", "isolate"], ["rtl", "isolate"]]
    assert page.evaluate("getComputedStyle(document.querySelector('.output pre')).direction") == (
        "ltr"
    )
    # "left" stays on the left on a right-to-left page (the labels and arrow keys say so)
    left, right = (page.locator(f"#output-{side}").bounding_box() for side in ("left", "right"))
    assert left["x"] < right["x"] if width > 700 else left["y"] < right["y"]
    button_left = page.locator("button.answer-left").bounding_box()
    button_right = page.locator("button.answer-right").bounding_box()
    assert button_left["x"] < button_right["x"] or button_left["y"] < button_right["y"]
    page.locator("button.answer-tie").click()
    page.wait_for_selector("#outcome")
    check_page(page, "ar", "rtl", width, "ar-end")
    assert "لقد انتهيت" in page.text_content("#outcome")
    assert Annotation.objects.get().raw_answer == "tie"
    assert problems == []
    context.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("width", "height"), WIDTHS)
def test_hebrew_error_spans_offsets_are_code_points_in_the_export(
    browser, base_url, make_study, width, height
):
    require_postgres_and_redis()
    # an emoji (two UTF-16 units, one code point) before the marked words: offsets differ
    text = "🙂 החתול ישב על השטיח ואז עף לירח."
    study = make_study(
        bundle(
            [{"id": "he-1", "input": "תאר את התמונה.", "outputs": {"sys": text}}],
            {"kind": "error_spans", "redundancy": 1, "language": "he"},
        )
    )
    researcher = User.objects.create_user("r", password="x" * 12)
    study.researchers.add(researcher)
    token = Token.objects.create(user=researcher)
    context, page, problems = open_worker(browser, base_url, study, width, height, "he-w")
    check_page(page, "he", "rtl", width, "he-instructions")
    start(page)
    assert page.evaluate("getComputedStyle(document.getElementById('esa-text')).direction") == (
        "rtl"
    )
    # the mouse: a drag over "השטיח", then Major
    drag_over(page, "השטיח")
    page.wait_for_selector("#esa-bar:not([hidden])")
    assert page.text_content("#esa-quote") == "השטיח"
    check_page(page, "he", "rtl", width, "he-selected")
    page.click("button.esa-add-major")
    # the keyboard: Home takes the first word (the emoji), the left arrow goes forward in
    # right-to-left text, to "החתול"; m marks it minor
    page.focus("#esa-text")
    page.keyboard.press("Home")
    page.keyboard.press("ArrowLeft")
    assert page.text_content("#esa-quote") == "החתול"
    page.keyboard.press("m")
    page.fill("#esa-score", "40")
    check_page(page, "he", "rtl", width, "he-marked")  # the list and its buttons, translated
    page.click("button.submit")
    page.wait_for_selector("#outcome")
    check_page(page, "he", "rtl", width, "he-end")
    assert problems == []
    context.close()

    request = urllib.request.Request(
        f"{base_url}/api/studies/{study.pk}/annotations/?format=json",
        headers={"Authorization": f"Token {token.key}"},
    )
    with urllib.request.urlopen(request) as response:  # noqa: S310 - the live test server
        rows = json.loads(response.read().decode())
    rows = rows["results"] if isinstance(rows, dict) else rows
    spans = {s["text"]: (s["start"], s["end"], s["severity"]) for s in rows[0]["spans"]}
    assert spans == {
        "החתול": (text.index("החתול"), text.index("החתול") + 5, "minor"),
        "השטיח": (text.index("השטיח"), text.index("השטיח") + 5, "major"),
    }
    assert text.index("החתול") == 2  # code points: the emoji counts one


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("width", "height"), WIDTHS)
def test_japanese_ranking(browser, base_url, make_study, width, height):
    require_postgres_and_redis()
    long_line = "これは句読点のない非常に長い日本語の文で" * 12  # CJK wraps without spaces
    outputs = {"a": "東京は日本の首都です。", "b": long_line, "c": "首都は京都です。"}
    study = make_study(
        bundle(
            [{"id": "ja-1", "input": "日本の首都はどこですか？", "outputs": outputs}],
            {"kind": "ranking", "redundancy": 1, "language": "ja", "allow_tie": True},
        )
    )
    context, page, problems = open_worker(browser, base_url, study, width, height, "ja-w")
    check_page(page, "ja", "ltr", width, "ja-instructions")
    start(page)
    check_page(page, "ja", "ltr", width, "ja-ranking")
    page.locator(".rank-card").nth(1).locator("button.rank-move[data-move='-1']").click()
    expect(page.locator(".rank-live")).to_contain_text("位")  # the live region speaks Japanese
    page.click("button.submit")
    page.wait_for_selector("#outcome")
    check_page(page, "ja", "ltr", width, "ja-end")
    assert Annotation.objects.count() == 1
    assert problems == []
    context.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("width", "height"), WIDTHS)
def test_german_likert(browser, base_url, make_study, width, height):
    require_postgres_and_redis()
    study = make_study(
        bundle(
            [
                {
                    "id": "de-1",
                    "input": "Fasse den Text zusammen.",
                    "outputs": {"sys": "Der Text handelt von einer Katze auf einer Matte."},
                }
            ],
            {"kind": "likert", "redundancy": 1, "language": "de"},
        )
    )
    context, page, problems = open_worker(browser, base_url, study, width, height, "de-w")
    check_page(page, "de", "ltr", width, "de-instructions")
    start(page)
    check_page(page, "de", "ltr", width, "de-likert")
    assert "Gesamtqualität" in page.text_content("fieldset.criterion legend")
    page.locator("label.point").nth(3).click()
    page.click("button.submit")
    page.wait_for_selector("#outcome")
    check_page(page, "de", "ltr", width, "de-end")
    assert "Vielen Dank" in page.text_content("#outcome")
    assert Annotation.objects.get().scores == {"overall": 4}
    assert problems == []
    context.close()
