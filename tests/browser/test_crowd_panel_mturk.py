"""The Crowd panel of a study run on MTurk, in real Chromium at 1280 px, against the
stand-in MTurk (tests/mturk_standin.py): publish creates the HIT, what MTurk lacks is
greyed out with its reason, a proposed return starts unchecked and, checked, is refused
and sends nothing, approve / reject go through, and the bonus is paid once."""

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from annotator import services as annotator_services
from crowd import platforms
from crowd.models import CrowdStudy
from tests.mturk_standin import HIT, StandIn
from tests.protocol_sim import adaptive_bundle, crowd_visit
from tests.services import require_postgres_and_redis


def work(study, worker: str, items: int, ms: int, finish: bool = True) -> None:
    crowd_visit(study, "mturk", worker, f"A-{worker}", items, ms, finish)


@pytest.mark.django_db(transaction=True)
def test_researcher_runs_an_mturk_hit_from_the_crowd_panel(base_url, page, monkeypatch):
    require_postgres_and_redis()
    turk = StandIn()
    monkeypatch.setattr(platforms, "mturk_client_factory", lambda crowd: turk)
    study = annotator_services.study_import(
        adaptive_bundle(
            n_inputs=12,
            systems=("s1", "s2"),
            collection="all",
            items_per_worker=3,
            completion_code="DONE1",
        ),
        filename="s.jsonl",
    )
    CrowdStudy.objects.create(
        study=study,
        platform="mturk",
        reward_cents=150,
        estimated_minutes=5,
        money_budget_cents=10_000,
        bonus_per_item_cents=10,
    )
    User.objects.create_superuser("researcher", "r@example.org", "pw-" + "x" * 10)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{base_url}/admin/login/")
    page.fill("#id_username", "researcher")
    page.fill("#id_password", "pw-" + "x" * 10)
    page.click("input[type=submit]")
    page.goto(f"{base_url}/admin/crowd/crowdstudy/")
    page.click("text=Crowd panel")
    expect(page.locator("#remote-status")).to_have_text("not created")
    expect(page.locator("button[value=pause]")).to_be_disabled()
    expect(page.locator("button[value=resume]")).to_be_disabled()
    expect(page.locator("#platform-lacks")).to_contain_text("MTurk has no pause")

    page.click("button[value=publish]")
    expect(page.locator(".messagelist")).to_contain_text("Published with 4 places")
    expect(page.locator("#remote-status")).to_contain_text(f"ACTIVE ({HIT})")
    assert turk.hits[HIT]["MaxAssignments"] == 4
    assert f"/w/{study.public_id}/mturk/" in turk.hits[HIT]["Question"]

    work(study, "good", 3, 20_000)
    work(study, "fast", 3, 300)
    work(study, "quit", 1, 20_000, finish=False)
    for worker in ("good", "fast", "quit"):
        turk.assignments.append(
            {"AssignmentId": f"A-{worker}", "WorkerId": worker, "AssignmentStatus": "Submitted"}
        )
    page.click("button[value=review]")
    rows = page.locator("#review tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.filter(has_text="A-good").locator(".proposal")).to_have_text("Approve")
    expect(rows.filter(has_text="A-fast").locator(".proposal")).to_have_text("Reject")
    expect(rows.filter(has_text="A-quit").locator(".proposal")).to_have_text("Ask to return")
    wide = page.evaluate("document.documentElement.scrollWidth")
    assert wide <= 1280, f"the panel is {wide} px wide at 1280 px"

    # MTurk cannot carry out a return: that row starts unchecked, and checked it is refused
    expect(page.locator("input[aria-label='confirm A-quit']")).not_to_be_checked()
    expect(page.locator("input[aria-label='confirm A-good']")).to_be_checked()
    page.check("input[aria-label='confirm A-quit']")
    page.click("text=Confirm the checked proposals")
    expect(page.locator(".messagelist")).to_contain_text("MTurk has no return")
    expect(page.locator("#awaiting")).to_have_text("3")
    assert "approve_assignment" not in turk.calls  # refused: nothing sent

    page.uncheck("input[aria-label='confirm A-quit']")
    page.click("text=Confirm the checked proposals")
    expect(page.locator(".messagelist")).to_contain_text("1 approve, 1 reject")
    expect(page.locator("#awaiting")).to_have_text("1")
    statuses = {a["AssignmentId"]: a["AssignmentStatus"] for a in turk.assignments}
    assert statuses == {"A-good": "Approved", "A-fast": "Rejected", "A-quit": "Submitted"}

    # 3 items × 10 cents = 30, no fee set
    expect(page.locator("#bonus-preview")).to_contain_text("1 participants due 30 cents")
    page.click("button[value=bonus]")
    expect(page.locator(".messagelist")).to_contain_text("Bonuses: Done.")
    expect(page.locator("#bonuses")).to_have_text("30 cents")
    expect(page.locator("button[value=bonus]")).to_be_disabled()
    assert turk.bonuses == [("good", "0.30")]
