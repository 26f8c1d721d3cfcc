"""A worker ranks conversation replies in real Chromium, by keyboard and by drag: the task
survives a reload, a second submit of the same task stores nothing, the display order drawn
for the assignment is the one shown and is exported, no system name reaches the page, and
the page fits a 390 px phone."""

import json
import urllib.request

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect
from rest_framework.authtoken.models import Token

from annotator.models import Annotation, Assignment
from tests.conftest import bundle
from tests.services import require_postgres_and_redis

SYSTEMS = ("sys-north", "sys-south", "sys-east", "sys-west")
CHAT = [
    {"role": "system", "content": "Answer in one sentence."},
    {"role": "user", "content": "What is *rain*?"},
]


def _bundle() -> bytes:
    records = [
        {
            "id": f"chat{i}",
            "input": CHAT,
            "outputs": {
                s: [{"role": "assistant", "content": f"Reply {i} of {s[4:]} side."}]
                for s in SYSTEMS
            },
        }
        for i in range(2)
    ]
    study = {"name": "rank flow", "kind": "ranking", "per_item": 3, "redundancy": 1}
    return bundle(records, study)


def _cards(page) -> list[str]:
    cards = page.locator(".rank-card .turn-assistant .text")
    expect(cards).to_have_count(3)  # the first card can be parsed before the last
    return [t.strip() for t in cards.all_inner_texts()]


def _shown_by_the_assignment(lease: Assignment) -> list[str]:
    outputs = lease.item.output_list()
    return [outputs[p].messages[0]["content"] for p in lease.display_order]


def _no_system_names(page) -> None:
    html = page.content()
    assert not [s for s in SYSTEMS if s in html]


@pytest.mark.django_db(transaction=True)
def test_worker_ranks_by_keyboard_and_drag_and_the_export_has_the_order(
    base_url, browser, make_study
):
    require_postgres_and_redis()
    study = make_study(_bundle())
    researcher = User.objects.create_user("r", password="x" * 12)
    study.researchers.add(researcher)
    token = Token.objects.create(user=researcher)
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True
    )
    page = context.new_page()
    requests_seen: list[str] = []
    page.on("request", lambda r: requests_seen.append(r.url + (r.post_data or "")))
    page.goto(f"{base_url}/w/{study.public_id}/?worker=prolific-9")
    page.click("text=Start")

    # --- task 1: the keyboard -----------------------------------------------------------
    page.wait_for_selector(".rank-card")
    lease = Assignment.objects.get()
    shown = _shown_by_the_assignment(lease)
    assert _cards(page) == shown  # the cards stand in the order drawn for the assignment
    assert page.locator(".input .turn-user .role").text_content() == "user"
    assert page.locator(".input .turn-system .role").text_content() == "system"
    assert page.locator(".input .turn-user em").inner_text() == "rain"  # Markdown, sanitised
    _no_system_names(page)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.reload()  # the same task, in the same order
    page.wait_for_selector(".rank-card")
    assert Assignment.objects.count() == 1 and _cards(page) == shown
    page.locator('.rank-card[data-label="Response 3"]').focus()
    page.keyboard.press("Home")  # Response 3 to the top
    assert json.loads(page.locator('input[name="ranking"]').input_value()) == [[2], [0], [1]]
    form = page.evaluate(
        "() => Object.fromEntries(new FormData(document.getElementById('task-form')))"
    )
    task_url = page.url
    # two submits in a row: the page sends one
    page.evaluate(
        "() => { const f = document.getElementById('task-form');"
        " f.requestSubmit(); f.requestSubmit(); }"
    )
    page.wait_for_load_state("load")
    # retried by Playwright outside the page: a string predicate polled in the page is eval,
    # which the CSP (script-src 'self') refuses
    expect(page.locator("body")).not_to_contain_text(shown[0], use_inner_text=True)
    first = Annotation.objects.get()
    outputs = lease.item.output_list()
    systems = [o.system.name for o in outputs]
    best_first = [lease.display_order[d] for d in (2, 0, 1)]
    assert first.answer["ranking"] == [[p] for p in best_first]
    # the same task posted again (a resent form, another order): stored once, unchanged
    form["ranking"] = json.dumps([[0], [1], [2]])
    again = page.request.post(task_url, form=form, headers={"Referer": task_url})
    assert again.status == 200, again.status  # handled (not refused by CSRF)
    assert Annotation.objects.count() == 1
    assert Annotation.objects.get().answer == first.answer
    page.goto(f"{base_url}/w/{study.public_id}/task/")

    # --- task 2: drag and drop -----------------------------------------------------------
    page.wait_for_selector(".rank-card")
    lease2 = Assignment.objects.exclude(pk=lease.pk).get()
    shown2 = _shown_by_the_assignment(lease2)
    assert _cards(page) == shown2
    _no_system_names(page)
    page.set_viewport_size({"width": 1280, "height": 900})  # a mouse on a desktop screen
    page.locator(".rank-list").scroll_into_view_if_needed()
    grip = page.locator('.rank-card[data-label="Response 3"] .rank-grip').bounding_box()
    page.mouse.move(grip["x"] + grip["width"] / 2, grip["y"] + grip["height"] / 2)
    page.mouse.down()
    target = page.locator(".rank-card").first.bounding_box()
    page.mouse.move(grip["x"] + 10, target["y"] + 5, steps=12)
    page.mouse.up()
    assert json.loads(page.locator('input[name="ranking"]').input_value()) == [[2], [0], [1]]
    page.get_by_role("button", name="Submit").click()
    page.wait_for_selector("text=You have finished")
    assert Annotation.objects.count() == 2
    assert not any(s in url for url in requests_seen for s in SYSTEMS)

    # --- the export: the ranking by system name and the display order ---------------------
    request = urllib.request.Request(
        f"{base_url}/api/studies/{study.pk}/annotations/",
        headers={"Authorization": f"Token {token.key}", "Accept": "application/json"},
    )
    with urllib.request.urlopen(request) as response:  # noqa: S310 - the live test server
        rows = json.load(response)["results"]
    assert len(rows) == 2
    for row, done in zip(rows, (lease, lease2), strict=True):
        names = [o.system.name for o in done.item.output_list()]
        assert row["display_order"] == [names[p] for p in done.display_order]
        assert row["ranking"] == [[row["display_order"][d]] for d in (2, 0, 1)]
    assert rows[0]["ranking"][0] == [systems[best_first[0]]]
    context.close()
