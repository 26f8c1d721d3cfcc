"""The admin's Crowd panel in real Chromium at 1280 px, against the stand-in Prolific
server: publish (places from the released work), read the submissions and confirm the
proposed reviews in bulk, preview and pay the bonuses once."""

import random
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from annotator import services as annotator_services
from crowd.models import CrowdStudy
from tests.leasing import next_lease
from tests.prolific_server import StandIn
from tests.protocol_sim import adaptive_bundle, answer
from tests.services import require_postgres_and_redis

TOKEN = "panel-token"


def work(study, pid: str, ms: int) -> None:
    part = annotator_services.participation_enter(
        study=study, platform="prolific", external_id=pid, session=f"sub-{pid}"
    )
    rng = random.Random(pid)
    for _ in range(3):
        a = next_lease(participation=part)
        annotator_services.annotation_submit(
            annotator=part.annotator,
            token=a.token,
            data={"answer": answer(a, rng)},
            time_spent_ms=ms,
            now=a.issued_at + timedelta(milliseconds=ms),
        )
    annotator_services.participation_finish(part)


@pytest.mark.django_db(transaction=True)
def test_researcher_publishes_reviews_and_pays_from_the_crowd_panel(base_url, page, monkeypatch):
    require_postgres_and_redis()
    server = StandIn(TOKEN, "hook-secret")
    monkeypatch.setenv("HUMEVAL_PROLIFIC_API_URL", server.url)
    monkeypatch.setenv("HUMEVAL_PROLIFIC_TOKEN", TOKEN)
    try:
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
        crowd = CrowdStudy.objects.create(
            study=study,
            reward_cents=150,
            estimated_minutes=5,
            money_budget_cents=10_000,
            bonus_per_item_cents=10,
        )
        User.objects.create_superuser("researcher", "r@example.org", "pw-" + "x" * 10)
        page.goto(f"{base_url}/admin/login/")
        page.fill("#id_username", "researcher")
        page.fill("#id_password", "pw-" + "x" * 10)
        page.click("input[type=submit]")
        page.goto(f"{base_url}/admin/crowd/crowdstudy/")
        page.click("text=Crowd panel")
        expect(page.locator("#remote-status")).to_have_text("not created")

        page.click("button[value=publish]")
        expect(page.locator(".messagelist")).to_contain_text("Published with 4 places")
        expect(page.locator("#remote-status")).to_contain_text("ACTIVE")
        expect(page.locator("#places")).to_have_text("4")
        crowd.refresh_from_db()
        assert server.state()["studies"][crowd.remote_id]["total_available_places"] == 4

        work(study, "good", 20_000)
        work(study, "fast", 300)
        for pid in ("good", "fast"):
            server.submission(crowd.remote_id, f"sub-{pid}", pid, "AWAITING REVIEW")
        page.click("button[value=review]")
        rows = page.locator("#review tbody tr")
        expect(rows).to_have_count(2)
        expect(rows.filter(has_text="good").locator(".proposal")).to_have_text("Approve")
        expect(rows.filter(has_text="fast").locator(".proposal")).to_have_text("Reject")
        expect(rows.filter(has_text="fast")).to_contain_text("TOO_QUICKLY")
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= 1280, f"the panel is {wide} px wide at 1280 px"

        page.click("text=Confirm the checked proposals")
        expect(page.locator(".messagelist")).to_contain_text("1 approve, 1 reject, 0 return")
        expect(page.locator("#awaiting")).to_have_text("0")
        subs = server.state()["submissions"]
        assert subs["sub-good"]["status"] == "APPROVED"
        assert subs["sub-fast"]["status"] == "REJECTED"

        # 3 items × 10 cents = 30, no fee set
        expect(page.locator("#bonus-preview")).to_contain_text("1 participants due 30 cents")
        page.click("button[value=bonus]")
        expect(page.locator(".messagelist")).to_contain_text("Bonuses: Done.")
        expect(page.locator("#bonuses")).to_have_text("30 cents")
        expect(page.locator("button[value=bonus]")).to_be_disabled()
        assert [p["participant_id"] for p in server.state()["paid"]] == ["good"]
    finally:
        server.stop()
