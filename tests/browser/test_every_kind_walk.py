"""Every kind, the whole path, in real Chromium as its researcher and a worker meet it: the
study imported through the API, a qualification test passed, the work annotated with a
reload and a stale page on the way, the labels exported (CSV, JSON, Judge-Bench where the
kind has a form, a Hugging Face dataset read back with ``datasets.load_dataset``), the
report and the dashboard opened — with no console error and no 5xx on any page."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.test import Client
from rest_framework.authtoken.models import Token

from annotator import services
from annotator.models import Annotation, Item, QualificationQuestion, Study
from tests.browser.conftest import close_settled, watch
from tests.conftest import bundle
from tests.services import require_postgres_and_redis

SYSTEMS = ("sys-amber", "sys-basil", "sys-coral")


def _records(n: int, systems: tuple[str, ...], chat: bool) -> list[dict]:
    records = []
    for i in range(n):
        text = f"Question {i}: name a colour & a <b>shape</b>."
        records.append(
            {
                "id": f"in{i}",
                "input": [{"role": "user", "content": text}] if chat else text,
                "outputs": {
                    s: f"Reply {i} from the {s[4:]} side, with a < and an &." for s in systems
                },
            }
        )
    return records


# --- how a worker answers each kind on the page -------------------------------------------


def _shown_texts(page) -> list[str]:
    page.wait_for_load_state("domcontentloaded")  # the whole task parsed, not its first part
    shown = page.locator("section.output .text, .rank-card .text, #esa-text")
    return [t.strip() for t in shown.all_inner_texts()]


def answer_pairwise(page, better: str | None) -> None:
    """Click the side showing ``better`` (a shown text), or the left one."""
    texts = [
        page.inner_text("#output-left .text").strip(),
        page.inner_text("#output-right .text").strip(),
    ]
    side = "right" if better is not None and texts[1] == better else "left"
    page.click(f"button.answer-{side}")


def answer_likert(page, better: str | None) -> None:
    page.click('label.point:has(input[name="score-quality"][value="4"])')
    page.click("button.submit")


def answer_ranking(page, better: str | None) -> None:
    """Move the card showing ``better`` (or the last card) to the top with the keyboard."""
    cards = page.locator(".rank-card")
    target = cards.last
    if better is not None:
        for k in range(cards.count()):
            if cards.nth(k).locator(".text").inner_text().strip() == better:
                target = cards.nth(k)
    target.focus()
    page.keyboard.press("ArrowDown")  # a moved order: no "you have not moved any" question
    page.keyboard.press("Home")
    page.click("button.submit")


def answer_error_spans(page, better: str | None) -> None:
    page.fill("#esa-score", "80")
    page.click("button.submit")


@dataclass
class Kind:
    study: dict
    systems: tuple[str, ...]
    gold: Callable[[dict], object]  # a record -> its known answer as the import writes it
    answer: Callable[..., None]
    ready: str  # a selector present once the kind's task is on the page
    judgebench: bool
    chat: bool = False
    expect: dict = field(default_factory=dict)


KINDS = {
    "pairwise": Kind(
        study={"kind": "pairwise"},
        systems=SYSTEMS[:2],
        gold=lambda r: SYSTEMS[0],
        answer=answer_pairwise,
        ready="#output-left",
        judgebench=True,
    ),
    "likert": Kind(
        study={
            "kind": "likert",
            "criteria": [{"name": "quality", "label": "How good?", "scale_min": 1, "scale_max": 5}],
        },
        systems=SYSTEMS[:2],
        gold=lambda r: {"scores": {"quality": 4}, "tolerance": 1},
        answer=answer_likert,
        ready="fieldset.criterion",
        judgebench=True,
    ),
    "ranking": Kind(
        study={"kind": "ranking", "per_item": 3},
        systems=SYSTEMS,
        gold=lambda r: SYSTEMS[0],
        answer=answer_ranking,
        ready=".rank-card",
        judgebench=False,
        chat=True,
    ),
    "error_spans": Kind(
        study={"kind": "error_spans", "categories": ["Accuracy", "Fluency"]},
        systems=SYSTEMS[:2],
        gold=lambda r: {"spans": [], "score": 80, "score_tolerance": 20},
        answer=answer_error_spans,
        ready="#esa-text",
        judgebench=False,
    ),
}


def _known_answer_shown(question: QualificationQuestion) -> str | None:
    """The text of the output a question's known answer names best (pairwise, ranking)."""
    expected = question.expected
    if "value" in expected and expected["value"] in ("A", "B"):
        return question.outputs["AB".index(expected["value"])]
    if "ranking" in expected:
        return question.outputs[expected["ranking"][0][0]]
    if "top" in expected:
        return question.outputs[expected["top"]]
    return None


def _question_shown(page) -> QualificationQuestion:
    shown = set(_shown_texts(page))
    return next(q for q in QualificationQuestion.objects.all() if set(q.outputs) <= shown)


def submit(page, kind: Kind, better: str | None) -> None:
    """Answer the task on the page and wait for the page the answer leads to."""
    with page.expect_navigation(wait_until="load"):
        kind.answer(page, better)


@pytest.mark.parametrize("name", list(KINDS))
@pytest.mark.django_db(transaction=True)
def test_a_kind_walks_from_import_to_report(name, base_url, browser, tmp_path):
    require_postgres_and_redis()
    kind = KINDS[name]
    researcher = User.objects.create_user("researcher", password="r" * 16, is_staff=True)
    researcher.user_permissions.add(Permission.objects.get(codename="add_study"))
    token = Token.objects.create(user=researcher)
    auth = {"Authorization": f"Token {token.key}"}

    # --- import through the API: 2 work inputs, 2 with a known answer for the test -------
    records = _records(4, kind.systems, kind.chat)
    study_line = {
        "name": f"walk {name}",
        "redundancy": 1,
        "items_per_worker": 2,
        "open_links": True,
        "gold_rate_start": 0.0,
        "gold_rate_end": 0.0,
        **kind.study,
    }
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    problems = watch(page)
    created = page.request.post(
        f"{base_url}/api/studies/import/",
        headers=auth,
        multipart={
            "file": {
                "name": "walk.jsonl",
                "mimeType": "application/jsonl",
                "buffer": bundle(records, study_line),
            }
        },
    )
    assert created.status == 201, created.text()
    study = Study.objects.get(pk=created.json()["id"])
    assert list(study.researchers.all()) == [researcher]

    # known answers on two items, made a qualification test of two questions
    opts, impl = study.kind_options(), study.kind_impl
    for item in Item.objects.filter(study=study, input__external_id__in=["in2", "in3"]):
        outputs = item.output_list()
        item.expected = impl.parse_expected(
            opts,
            kind.gold(records[0]),
            systems=[o.system.name for o in outputs],
            outputs=[o.text for o in outputs],
        )
        item.save(update_fields=["expected"])
    test = services.study_prepare_checks(study, n_qualification=2, seed=3)
    assert test is not None and test.questions.count() == 2
    test.pass_threshold = 2
    test.save()

    # --- the worker: instructions, the test, two tasks with a reload and a stale page ----
    page.goto(f"{base_url}/w/{study.public_id}/?worker=walker-{name}")
    page.click("text=Start the test")
    for _ in range(2):
        page.wait_for_selector(kind.ready)
        submit(page, kind, _known_answer_shown(_question_shown(page)))

    page.wait_for_selector(kind.ready)
    assert "Task 1" in page.inner_text("#progress-text")
    page.reload()  # the same task after a reload
    page.wait_for_selector(kind.ready)
    first_page = _shown_texts(page)
    # a second tab on the same task goes stale once the first answers it
    stale = context.new_page()
    watch(stale, problems)
    stale.goto(page.url)
    stale.wait_for_selector(kind.ready)
    assert _shown_texts(stale) == first_page
    submit(page, kind, None)
    assert Annotation.objects.filter(source="platform").count() == 1
    assert _shown_texts(page) != first_page  # the next task

    # the stale tab answers too: told so, shown the current task, nothing stored
    submit(stale, kind, None)
    assert "already answered" in stale.inner_text("body")
    assert _shown_texts(stale) == _shown_texts(page)
    assert Annotation.objects.filter(source="platform").count() == 1
    stale.close()
    submit(page, kind, None)
    page.wait_for_url("**/end/**")
    assert Annotation.objects.filter(source="platform").count() == 2
    html = page.content()
    assert not [s for s in kind.systems if s in html]

    # --- exports: CSV and JSON with one row per label, Judge-Bench, HF read back -----------
    api = f"{base_url}/api/studies/{study.pk}"
    as_csv = page.request.get(f"{api}/annotations/?format=csv", headers=auth)
    assert as_csv.status == 200
    rows = list(csv.DictReader(io.StringIO(as_csv.text())))
    as_json = page.request.get(f"{api}/annotations/?format=json", headers=auth)
    assert as_json.status == 200
    labels = as_json.json()["results"]
    assert len(rows) == len(labels) == 2
    assert {r["annotator"] for r in rows} == {labels[0]["annotator"]}
    judgebench = page.request.get(f"{api}/judgebench/", headers=auth)
    if kind.judgebench:
        assert judgebench.status == 200
        assert len(judgebench.json()["instances"]) >= 1
    else:
        assert 400 <= judgebench.status < 500
        assert name.replace("_", " ") in judgebench.text().replace("_", " ")
    out = tmp_path / "hf"
    call_command("export_labels", str(study.pk), "--format", "hf", str(out))
    import datasets

    loaded = datasets.load_dataset(str(out))
    split = next(iter(loaded.values()))
    assert len(split) == 2

    # --- the researcher's report and dashboard ---------------------------------------------
    client = Client()
    client.force_login(researcher)
    session = client.cookies["sessionid"].value
    host = base_url.split("//")[1].split(":")[0]
    context.add_cookies([{"name": "sessionid", "value": session, "domain": host, "path": "/"}])
    report = page.goto(f"{base_url}/studies/{study.pk}/report/")
    assert report.status == 200
    assert study.name in page.inner_text("h1")
    dashboard = page.goto(f"{base_url}/studies/{study.pk}/protocol/")
    assert dashboard.status == 200
    assert problems == []
    close_settled(context)
