"""A researcher's first study in real Chromium: log into the admin, create a study by pasting
rows, read the launch checklist, preview an item (both responses, nothing recorded) and
read the cost estimate after entering a pay rate."""

import json

import pytest
from django.contrib.auth.models import User

from annotator.models import Annotation, Assignment, Participation, Study
from tests.services import require_postgres_and_redis

ROWS = "\n".join(
    json.dumps(r)
    for r in [
        {"study": {"name": "Pasted study", "kind": "pairwise", "redundancy": 3}},
        *[
            {
                "id": f"q{i}",
                "input": f"Question number {i}",
                "outputs": {"hidden-one": f"First reply {i}", "hidden-two": f"Second reply {i}"},
            }
            for i in range(4)
        ],
    ]
)


@pytest.mark.django_db(transaction=True)
def test_researcher_pastes_rows_checks_previews_and_reads_estimate(base_url, page):
    require_postgres_and_redis()
    User.objects.create_superuser("researcher", "r@example.org", "pw-" + "x" * 10)
    page.goto(f"{base_url}/admin/login/")
    page.fill("#id_username", "researcher")
    page.fill("#id_password", "pw-" + "x" * 10)
    page.click("input[type=submit]")

    page.goto(f"{base_url}/admin/annotator/study/")
    page.click("text=Add study")  # leads to the create page, never to an empty shell
    page.wait_for_selector("text=Or paste rows")
    page.fill("#id_rows", ROWS)
    page.click("input[value='Create study']")
    page.wait_for_selector("#workspace")
    study = Study.objects.get()
    assert study.name == "Pasted study" and study.items.count() == 4

    checklist = page.inner_text("#workspace-checklist")
    assert "Completion codes (Prolific) (recommended): Missing: completion, fail, no work code" in (
        checklist
    )
    assert "Content: 2 systems, 4 items" in checklist
    fix = page.locator("#workspace-checklist a[href='#id_completion_code']")
    assert fix.inner_text() == "Set the codes Prolific gave you"

    page.click("#workspace-preview")
    page.wait_for_selector("text=Preview — nothing is recorded")
    left, right = page.locator("#output-left"), page.locator("#output-right")
    assert left.is_visible() and right.is_visible()
    shown = {page.inner_text("#output-left .text").strip(), page.inner_text("#output-right .text")}
    assert {s.strip() for s in shown} == {"First reply 0", "Second reply 0"}
    assert page.locator("button.answer-left").is_disabled()
    page.keyboard.press("1")  # the worker's shortcut does nothing here
    assert "hidden-one" not in page.content() and "hidden-two" not in page.content()
    page.click("text=Next item →")
    page.wait_for_selector("text=Task 2 of 4")
    assert (Assignment.objects.count(), Annotation.objects.count()) == (0, 0)
    assert Participation.objects.count() == 0

    page.click("text=Back to the study")
    page.wait_for_selector("#workspace")
    assert page.inner_text("#estimate-cost") == "—"
    page.fill("#id_pay_per_hour", "12.00")
    page.fill("#id_expected_seconds_per_item", "30")
    page.click("input[name=_continue]")
    page.wait_for_selector("text=was changed successfully")
    # 4 items × redundancy 3 = 12 annotations × 30 s = 0.10 h; × 12.00 GBP = 1.20 GBP
    assert page.inner_text("#estimate-hours") == "0.10 h"
    assert page.inner_text("#estimate-cost") == "1.20 GBP"
