"""The judge-assisted (PPI++) block and the style-controlled ranking on the report page, as a
researcher sees them in Chromium at 1280 and 390 px: humans labelled half of a pairwise
study's items, an imported judge rated all of them."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from annotator import services
from tests.browser.test_report_page import _login
from tests.conftest import bundle
from tests.leasing import next_lease

HOSTILE = "<b>s3</b>"
SYSTEMS = ("s1", "s2", HOSTILE)
STRENGTH = {"s1": 3, "s2": 2, HOSTILE: 1}


def _study():
    records = [
        {
            "id": f"in{i}",
            "input": f"question {i}",
            "outputs": {s: "word " * (3 + (i * 7 + k * 5) % 23) for k, s in enumerate(SYSTEMS)},
        }
        for i in range(16)
    ]
    options = {"name": "assisted", "kind": "pairwise", "redundancy": 1, "open_links": True}
    study = services.study_import(bundle(records, options), filename="a.jsonl")
    part = services.participation_enter(study=study, platform="link", external_id="w1")
    for n in range(24):  # half of the 48 items, the stronger system mostly preferred
        a = next_lease(participation=part)
        sa, sb = (o.system.name for o in a.item.output_list())
        a_wins = (STRENGTH[sa] > STRENGTH[sb]) != (n % 5 == 0)
        answer = "left" if a_wins == (a.display_order == [0, 1]) else "right"
        services.annotation_submit(annotator=part.annotator, token=a.token, data={"answer": answer})
    ratings = [
        {
            "judge": "llm",
            "input_id": f"in{i}",
            "system": s,
            "system_b": t,
            "label": "A" if (STRENGTH[s] > STRENGTH[t]) != (i % 4 == 0) else "B",
        }
        for i in range(16)
        for s, t in (("s1", "s2"), ("s1", HOSTILE), ("s2", HOSTILE))
    ]
    data = "\n".join(json.dumps(r) for r in ratings).encode()
    services.judge_ratings_import(study, data, filename="judge.jsonl")
    return study


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width", [1280, 390])
def test_report_page_shows_assisted_estimates_and_style_control(base_url, page, width):
    study = _study()
    errors = _login(page, base_url)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{base_url}/studies/{study.pk}/report/?n_boot=20", timeout=180_000)
    block = page.locator("section.assisted")
    expect(block.locator("h3")).to_have_text("Judge-assisted estimates (PPI++)")
    expect(block).to_contain_text("judge llm: 24 items with human labels and 24 rated")
    expect(block.locator("svg")).to_have_count(1)
    expect(block.locator("svg")).to_contain_text(HOSTILE)  # escaped, shown as text
    block.locator("summary", has_text="Scores and rank-sets").click()
    table = block.locator("table").first
    expect(table).to_be_visible()
    expect(table.locator("tbody tr")).to_have_count(3)
    style = page.locator("section.style-control")
    expect(style.locator("h3")).to_contain_text("Style-controlled ranking")
    expect(style.locator("h4").first).to_have_text("humans")
    assert page.locator("b", has_text="s3").count() == 0  # never markup
    for section in (block, style):
        box = section.bounding_box()
        assert box is not None and box["x"] + box["width"] <= width + 1, (width, box)
    assert errors == [], errors
