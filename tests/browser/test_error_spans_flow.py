"""An error-span (ESA) study in real Chromium, end to end on a phone-sized screen: imported
from JSONL, a worker marks one span with the mouse and one with the keyboard, sets the score,
reloads (the task and the marks stay), submits, and the same form posted again stores
nothing; the display order [0] is recorded; the export (JSON and CSV) carries the spans with
their offsets and quoted text; no system name reaches the page."""

import csv
import io
import json
import urllib.request

import pytest
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token

from annotator.models import Annotation, Assignment
from tests.browser.test_error_spans_widget import drag_over
from tests.conftest import bundle
from tests.services import require_postgres_and_redis

OUTPUTS = {
    "system-north": "The cat sat on the mat and then it flew away.",
    "system-south": "A dog barked at the moon all night long.",
}


def export(base_url, study, token, fmt):
    request = urllib.request.Request(
        f"{base_url}/api/studies/{study.pk}/annotations/?format={fmt}",
        headers={"Authorization": f"Token {token.key}"},
    )
    with urllib.request.urlopen(request) as response:  # noqa: S310 - the live test server
        return response.read().decode()


def no_overflow(page) -> bool:
    return page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")


@pytest.mark.django_db(transaction=True)
def test_worker_marks_spans_reloads_submits_twice_and_the_export_has_them(
    base_url, browser, make_study
):
    require_postgres_and_redis()
    study = make_study(
        bundle(
            [{"id": "doc-1", "input": "Describe the scene.", "outputs": OUTPUTS}],
            {"kind": "error_spans", "redundancy": 1, "categories": ["Accuracy", "Fluency"]},
        )
    )
    researcher = User.objects.create_user("r", password="x" * 12)
    study.researchers.add(researcher)
    token = Token.objects.create(user=researcher)

    context = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True)
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on(
        "console",
        lambda m: (
            m.type == "error"
            and not m.text.startswith("Failed to load resource")  # seen below, by address
            and problems.append(m.text)
        ),
    )
    page.on(
        "response",
        lambda r: (
            r.status >= 400
            and not r.url.endswith("/favicon.ico")
            and problems.append(f"{r.status} {r.url}")
        ),
    )
    requests_seen: list[str] = []
    page.on("request", lambda r: requests_seen.append(r.url + (r.post_data or "")))
    page.goto(f"{base_url}/w/{study.public_id}/?worker=prolific-esa")
    page.click("text=Start")

    page.wait_for_selector("#esa-text")
    page.wait_for_load_state("domcontentloaded")  # error_spans.js listens before the drag
    assert "system-north" not in page.content() and "system-south" not in page.content()
    assert no_overflow(page)
    text = page.inner_text("#esa-text")
    system = next(name for name, out in OUTPUTS.items() if out == text)
    first_word = text.split()[0]
    # the mouse: a drag over "sat"/"barked" (the third word), category, Major
    word = text.split()[2]
    drag_over(page, word)
    page.wait_for_selector("#esa-bar:not([hidden])")
    assert page.text_content("#esa-quote") == word
    page.select_option("#esa-category", "Accuracy")
    page.click("button.esa-add-major")
    # the keyboard: Home selects the first word, m marks it minor
    page.focus("#esa-text")
    page.keyboard.press("Home")
    assert page.text_content("#esa-quote") == first_word
    page.keyboard.press("m")
    page.fill("#esa-score", "35")

    page.reload()  # the same task, its marks and score kept
    page.wait_for_selector("#esa-text")
    assert page.inner_text("#esa-text") == text
    assert page.input_value("#esa-score") == "35"
    assert len(json.loads(page.input_value("#esa-spans"))) == 2
    # the form as it will post, to send it a second time
    form = page.evaluate(
        "() => new URLSearchParams(new FormData(document.getElementById('task-form'))).toString()"
    )
    page.click("button.submit")
    page.wait_for_load_state("load")
    assert Annotation.objects.count() == 1
    status = page.evaluate(
        """body => fetch(location.href, {method: 'POST', body, headers:
             {'Content-Type': 'application/x-www-form-urlencoded'}}).then(r => r.status)""",
        form,
    )
    assert status < 500
    assert Annotation.objects.count() == 1  # the second post stored nothing

    annotation = Annotation.objects.get()
    start = text.index(word)
    assert annotation.answer == {
        "spans": [
            {"start": 0, "end": len(first_word), "severity": "minor", "category": None,
             "text": first_word},
            {"start": start, "end": start + len(word), "severity": "major",
             "category": "Accuracy", "text": word},
        ],
        "score": 35,
    }  # fmt: skip
    assert Assignment.objects.get(annotation=annotation).display_order == [0]
    assert annotation.item.output_list()[0].system.name == system

    # the second task: keyboard only, the score typed, Enter submits
    page.wait_for_selector("#esa-text")
    assert page.inner_text("#esa-text") != text
    assert no_overflow(page)
    page.fill("#esa-score", "90")
    page.keyboard.press("Enter")
    page.wait_for_selector("text=You have finished")
    assert Annotation.objects.count() == 2
    assert not any("system-" in url for url in requests_seen)
    assert problems == []
    context.close()

    rows = json.loads(export(base_url, study, token, "json"))["results"]
    by_system = {r["system_a"]: r for r in rows}
    assert by_system[system]["spans"] == annotation.answer["spans"]
    assert by_system[system]["score"] == 35
    assert (by_system[system]["minor_errors"], by_system[system]["major_errors"]) == (1, 1)
    assert by_system[system]["mqm_errors"] == 6
    other = next(r for r in rows if r["system_a"] != system)
    assert other["spans"] == [] and other["score"] == 90
    table = list(csv.DictReader(io.StringIO(export(base_url, study, token, "csv"))))
    cells = {r["system_a"]: r for r in table}
    assert json.loads(cells[system]["spans"]) == annotation.answer["spans"]
    assert cells[system]["mqm_errors"] == "6.0"
