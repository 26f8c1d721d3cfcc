"""The judge-prefill block of an error-span study's report page (issue 28), as a researcher
sees it in Chromium at 1280 px: acceptance/edit/delete rates, judge-vs-final F1, the effect
with vs without suggestions and the items skipped as error-free with their controls. The
study is served on PostgreSQL first: the worker cycle never leases a skipped item."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotator import prefill_skip, services
from annotator.models import Assignment, Item, Output
from tests.browser.test_report_page import _login
from tests.conftest import bundle
from tests.services import require_postgres_and_redis
from tests.unit.test_prefill_skip import judge, work_all

WIDTH = 1280
ERROR = [{"start": 0, "end": 4, "severity": "minor", "text": "Text"}]


def _study():
    records = [
        {"id": f"d{i:02d}", "input": f"doc {i}", "outputs": {"sys": f"Text number {i}."}}
        for i in range(30)
    ]
    options = {
        "name": "skip",
        "kind": "error_spans",
        "redundancy": 1,
        "open_links": True,
        "gold_rate_start": 0.0,
        "gold_rate_end": 0.0,
        "prefill_spans": "on",
        "prefill_control_share": 0.3,
        "prefill_skip_clean": True,
        "prefill_skip_control_share": 0.3,
    }
    study = services.study_import(bundle(records, options), filename="s.jsonl")
    for o in Output.objects.filter(input__study=study).select_related("input"):
        n = int(o.input.external_id[1:])
        judge(study, o.input_id, o.system_id, [] if n < 20 else ERROR)
    return study


@pytest.mark.django_db(transaction=True)
def test_report_page_shows_the_prefill_block_and_the_skipped_items(base_url, page):
    require_postgres_and_redis()
    study = _study()
    controls = [
        i.input.external_id
        for i in Item.objects.filter(study=study).select_related("input")
        if int(i.input.external_id[1:]) < 20 and prefill_skip.in_control(study.pk, i.pk, 0.3)
    ]
    served = work_all(study, "w1", errors_in=set(controls[:1]))
    n_skipped = 20 - len(controls)
    assert len(served) == 10 + len(controls) and n_skipped > 0
    assert not Assignment.objects.filter(item__prefill_skip="skipped").exists()
    assert Item.objects.filter(prefill_skip="skipped", is_active=False).count() == n_skipped

    errors = _login(page, base_url)
    page.set_viewport_size({"width": WIDTH, "height": 900})
    page.goto(f"{base_url}/studies/{study.pk}/report/?n_boot=20", timeout=180_000)
    block = page.locator("section.prefill")
    expect(block.locator("h3")).to_have_text("Judge-prefilled spans")
    expect(block).to_contain_text("Judge-vs-final span F1")
    rates = block.locator("table").first
    expect(rates.locator("tbody tr td:first-child")).to_have_text(
        [
            "accepted as they were",
            "edited",
            "edited: boundaries moved",
            "edited: severity only",
            "deleted",
        ]
    )
    expect(block.locator("h4", has_text="With vs without suggestions")).to_be_visible()
    expect(block.locator("table").nth(1).locator("tbody tr")).to_have_count(2)
    expect(block.locator("h4", has_text="Items skipped as error-free")).to_be_visible()
    expect(block).to_contain_text(
        f"{n_skipped} items skipped: {n_skipped} of 30 planned annotations saved"
    )
    expect(block).to_contain_text(f"humans found errors in 1 of the {len(controls)} controls")
    notes = page.locator("section.kind-section ul.notes")
    expect(notes).to_contain_text(f"{n_skipped} item(s) the judge found error-free were skipped")
    box = block.bounding_box()
    assert box is not None and box["x"] + box["width"] <= WIDTH + 1, box
    assert errors == [], errors
