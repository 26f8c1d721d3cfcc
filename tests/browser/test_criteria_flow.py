"""A pairwise study with two criteria, strength and a required reason, end to end in Chromium:
import from JSONL, annotate by keyboard and by mouse on a phone-sized page, reload, double
submit, display order recorded, export (JSON and CSV) in system order, the report."""

import csv
import io

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from playwright.sync_api import expect

from analysis.selectors import study_dataset
from annotator.models import Annotation, Assignment, Output
from tests.conftest import bundle
from tests.services import require_postgres_and_redis

SYSTEMS = ("system-north", "system-south")
STUDY = {
    "kind": "pairwise",
    "redundancy": 1,
    "criteria": [
        {"name": "helpful", "label": "Which response is more helpful?"},
        {"name": "safe", "label": "Which response is safer?"},
    ],
    "strength": True,
    "rationale": "required",
}
#: Five-point answer in display order → strength in system order when the left output is A.
STRENGTH = {"left>>": 2, "left>": 1, "=": 0, "right>": -1, "right>>": -2}


def system_of(page, side: str) -> str:
    return Output.objects.get(text=page.inner_text(f"#output-{side} .text").strip()).system.name


@pytest.mark.django_db(transaction=True)
def test_criteria_study_from_import_to_report(base_url, page, make_study):
    require_postgres_and_redis()
    study = make_study(
        bundle(
            [
                {
                    "id": f"q{i}",
                    "input": f"Question {i}?",
                    "outputs": {s: f"{s.split('-')[1].title()} answers {i}." for s in SYSTEMS},
                }
                for i in range(2)
            ],
            STUDY,
        )
    )
    assert study.options["criteria"] == STUDY["criteria"]
    assert study.kind_impl.overall_criterion(study.kind_options()) == "helpful"
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{base_url}/w/{study.public_id}/?worker=prolific-7")
    assert "Which response is more helpful?" in page.content()  # the instructions name them
    page.click("text=Start")

    # item 1: keyboard only — 1 (left much better) for helpful, 4 (right better) for safe
    page.wait_for_selector("fieldset.pair-criterion")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    html = page.content()
    assert not any(s in html for s in SYSTEMS)
    left_1 = system_of(page, "left")
    page.reload()  # the same task comes back
    page.wait_for_selector("fieldset.pair-criterion")
    assert system_of(page, "left") == left_1
    assert Assignment.objects.filter(item__study=study).count() == 1
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("1")
    page.keyboard.press("4")
    assert page.evaluate("() => document.activeElement.name") == "rationale"
    page.keyboard.type("North cites a source.")
    page.locator("button[type=submit]").focus()
    page.keyboard.press("Enter")

    # item 2: mouse only, and a double click on submit
    expect(page.locator("#progress-text")).to_have_text("Task 2")
    page.wait_for_selector("fieldset.pair-criterion")
    left_2 = system_of(page, "left")
    page.locator('fieldset[data-criterion="helpful"] label.choice').nth(2).click()  # =
    page.locator('fieldset[data-criterion="safe"] label.choice').nth(4).click()  # right>>
    page.locator("textarea[name=rationale]").click()
    page.keyboard.type("Both help; the right one is much safer.")
    page.locator("button[type=submit]").dblclick()
    page.wait_for_selector("text=You have finished: 2 items")

    annotations = list(Annotation.objects.filter(study=study).order_by("id"))
    assert len(annotations) == 2  # the double submit stored once
    for ann, left in zip(annotations, (left_1, left_2), strict=True):
        systems = [o.system.name for o in ann.item.output_list()]
        assert systems[ann.assignment.display_order[0]] == left  # display order recorded
    first, second = annotations
    a_left_1 = first.item.output_list()[0].system.name == left_1
    a_left_2 = second.item.output_list()[0].system.name == left_2
    sign_1, sign_2 = (1 if a_left_1 else -1), (1 if a_left_2 else -1)
    assert first.answer["criteria"]["helpful"] == {
        "raw": "left>>",
        "value": "A" if a_left_1 else "B",
        "strength": 2 * sign_1,
    }
    assert first.answer["criteria"]["safe"]["strength"] == STRENGTH["right>"] * sign_1
    assert (first.raw_answer, first.value) == ("left>>", "A" if a_left_1 else "B")
    assert second.answer["criteria"]["helpful"] == {"raw": "=", "value": "tie", "strength": 0}
    assert second.answer["criteria"]["safe"]["strength"] == -2 * sign_2

    researcher = User.objects.create_user("r", password="x" * 12)
    study.researchers.add(researcher)
    client = Client()
    client.force_login(researcher)
    url = f"/api/studies/{study.pk}/annotations/"
    rows = client.get(url, {"format": "json"}).json()["results"]
    assert [r["helpful_strength"] for r in rows] == [2 * sign_1, 0]
    assert [r["safe_strength"] for r in rows] == [-1 * sign_1, -2 * sign_2]
    assert [r["helpful"] for r in rows] == [first.value, "tie"]
    assert [r["safe"] for r in rows] == ["B" if a_left_1 else "A", "B" if a_left_2 else "A"]
    assert [r["rationale"] for r in rows] == [
        "North cites a source.",
        "Both help; the right one is much safer.",
    ]
    table = list(csv.DictReader(io.StringIO(client.get(url, {"format": "csv"}).content.decode())))
    columns = list(table[0])
    assert columns[-5:] == ["helpful", "helpful_strength", "safe", "safe_strength", "rationale"]
    assert [int(r["safe_strength"]) for r in table] == [-1 * sign_1, -2 * sign_2]

    report = client.get(reverse("analysis:report", args=[study.pk]))
    assert report.status_code == 200
    text = report.content.decode()
    for title in ("Which response is more helpful?", "Which response is safer?"):
        assert title in text and f"{title} (strength: +2 A much better" in text
    dataset = study_dataset(study)
    assert [p.name for p in dataset.properties] == [
        "helpful",
        "helpful_strength",
        "safe",
        "safe_strength",
    ]
    safe = dataset.annotations[dataset.annotations["property"] == "safe"]
    assert list(safe["raw"]) == ["right>", "right>>"]  # its own side, for the position bias
