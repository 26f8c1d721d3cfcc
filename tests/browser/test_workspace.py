"""A researcher's first study in real Chromium: log into the admin, create a study by pasting
rows, read the launch checklist, preview an item (both responses, nothing recorded) and
read the cost estimate after entering a pay rate."""

import json

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from annotator.models import Annotation, Assignment, Participation, Study
from tests.conftest import PASSWORD, make_superuser
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
    make_superuser("researcher")
    page.goto(f"{base_url}/admin/login/")
    page.fill("#id_username", "researcher")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")

    page.goto(f"{base_url}/admin/annotator/study/")
    page.click("text=Add study")  # leads to the create page, never to an empty shell
    page.wait_for_selector("text=Or paste rows")
    page.fill("#id_rows", ROWS)
    page.click("input[value='Create study']")
    page.wait_for_selector("#workspace")
    page.wait_for_load_state("domcontentloaded")  # the whole workspace parsed
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
    expect(left).to_be_visible()
    expect(right).to_be_visible()
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


def _login(page, base_url) -> None:
    make_superuser("researcher")
    page.goto(f"{base_url}/admin/login/")
    page.fill("#id_username", "researcher")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#user-tools")


@pytest.mark.parametrize("width", [1280, 390])
@pytest.mark.django_db(transaction=True)
def test_copied_prolific_link_is_prolifics_placeholder_form(base_url, browser, width):
    """The workspace shows and copies the Prolific URL with ``{{%PROLIFIC_PID%}}`` as
    Prolific's docs write it (was: percent-encoded braces, an 'Incomplete link')."""

    from annotator import services
    from tests.browser.conftest import close_settled
    from tests.conftest import pairwise_bundle

    require_postgres_and_redis()
    study = services.study_import(pairwise_bundle(n_inputs=3), filename="s.jsonl")
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base_url)
    page = context.new_page()
    try:
        _login(page, base_url)
        page.goto(f"{base_url}/admin/annotator/study/{study.pk}/change/")
        wanted = (
            f"{base_url}/w/{study.public_id}/prolific/?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}"
            "&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
        )
        shown = page.locator("#entry-link-1")
        expect(shown).to_have_text(wanted)
        copy = page.locator("button[data-copy='entry-link-1']")
        copy.scroll_into_view_if_needed()
        copy.click()
        expect(copy).to_have_text("Copied")
        assert page.evaluate("() => navigator.clipboard.readText()") == wanted
        assert page.evaluate("() => document.documentElement.scrollWidth") <= width

        # invitation links: from the workspace, shown to copy
        page.click("#workspace-invites")
        page.fill("#id_count", "2")
        page.fill("#id_prefix", "lab")
        page.click("input[name=show]")
        expect(page.locator("#invite-links h2")).to_have_text("2 invitation links")
        page.wait_for_load_state("domcontentloaded")  # workspace.js listens for the copy
        page.click("button[data-copy='invite-all']")
        expect(page.locator("button[data-copy='invite-all']")).to_have_text("Copied")
        wide = page.evaluate(
            """(w) => [...document.querySelectorAll('body *')]
                .filter((e) => e.getBoundingClientRect().right > w + 1)
                .map((e) => e.tagName + '#' + e.id + '.' + e.className)""",
            width,
        )
        assert page.evaluate("() => document.documentElement.scrollWidth") <= width, wide
        copied = page.evaluate("() => navigator.clipboard.readText()").strip().splitlines()
        assert [line.split("\t")[0] for line in copied] == ["lab-001", "lab-002"]
        assert all(f"/w/{study.public_id}/i/" in line for line in copied)
        # the copied link lets the worker in
        page.goto(copied[0].split("\t")[1])
        expect(page.locator("body")).not_to_contain_text("Incomplete link")
        assert Participation.objects.get().annotator.external_id == "lab-001"
    finally:
        close_settled(context)


@pytest.mark.parametrize("width", [1280, 390])
@pytest.mark.django_db(transaction=True)
def test_estimate_shows_both_times_which_is_used_and_the_fee(base_url, browser, width):
    """A fast measured median (0.1 s, e.g. a script's answers) does not silently replace
    the researcher's expected time; the platform fee is its own line."""
    from decimal import Decimal

    from annotator import services
    from annotator.models import Annotator, Item
    from tests.browser.conftest import close_settled
    from tests.conftest import pairwise_bundle

    require_postgres_and_redis()
    study = services.study_import(pairwise_bundle(n_inputs=12), filename="s.jsonl")
    gold = Item.objects.filter(study=study).order_by("pk").first()
    Item.objects.filter(pk=gold.pk).update(is_gold=True)
    Study.objects.filter(pk=study.pk).update(
        pay_per_hour=Decimal("12.00"), expected_seconds_per_item=60, platform_fee_percent=30
    )
    worker = Annotator.objects.create(pseudonym="p1", platform="link", external_id="w1")
    items = Item.objects.filter(study=study, is_gold=False).order_by("pk")
    for item in items:
        Annotation.objects.create(
            study=study,
            item=item,
            annotator=worker,
            source="platform",
            time_spent_ms=100,
            value="A",
            config_version=1,
            submitted_at=timezone.now(),
        )
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    try:
        _login(page, base_url)
        page.goto(f"{base_url}/admin/annotator/study/{study.pk}/change/")
        # 11 work items × redundancy 2 = 22 in both cards (the gold item apart)
        expect(page.locator("#progress-annotations")).to_contain_text("of 22 submitted")
        expect(page.locator("#estimate-annotations")).to_contain_text("22 (work items")
        expect(page.locator("#estimate-expected")).to_have_text("60.0 s per item (used)")
        expect(page.locator("#estimate-measured")).to_have_text(
            "0.1 s per item over 11 labels (not used: under 2 s per item is too fast for a person)"
        )
        # 22 × 60 s = 0.37 h × 12.00 = 4.40; fee 30 % = 1.32; total 5.72
        expect(page.locator("#estimate-cost")).to_have_text("4.40 GBP")
        expect(page.locator("#estimate-fee")).to_have_text("1.32 GBP (30% of the pay)")
        expect(page.locator("#estimate-total")).to_have_text("5.72 GBP")
        assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    finally:
        close_settled(context)
