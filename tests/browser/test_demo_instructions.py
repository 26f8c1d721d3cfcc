"""The demo as a newcomer meets it in Chromium: instructions written for people, a Start
button that looks like one, and a task with the instruction and the two responses."""

import pytest
from django.core.management import call_command

from annotator.models import Study
from tests.services import require_postgres_and_redis


@pytest.mark.django_db(transaction=True)
def test_demo_pairwise_instructions_and_start_button(base_url, page):
    require_postgres_and_redis()
    call_command("demo", addr=base_url.removeprefix("http://"))
    study = Study.objects.get(kind="pairwise", collection="all")
    page.goto(f"{base_url}/w/{study.public_id}/?worker=newcomer")
    page.wait_for_selector("text=How to judge")
    body = page.inner_text("main, body")
    assert "model_a" not in body and "Do NOT output" not in body
    assert "follows the instruction better" in body and "Left is better" in body
    start = page.locator("a.button-primary", has_text="Start")
    style = start.evaluate(
        "e => { const s = getComputedStyle(e); const r = e.getBoundingClientRect();"
        " return [s.backgroundColor, s.color, s.textDecorationLine, r.height, r.width]; }"
    )
    background, color, decoration, height, width = style
    assert background == "rgb(26, 95, 180)" and color == "rgb(255, 255, 255)"
    assert decoration == "none" and height >= 44 and width >= 80
    start.click()
    page.wait_for_selector("#output-right")
    task = page.inner_text("body")
    assert "Which response follows the instruction better?" in task
    assert "Instruction:" not in task and "model_a" not in task
    for side in ("#output-left", "#output-right"):
        assert page.inner_text(f"{side} .text").strip()
