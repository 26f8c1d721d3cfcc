"""A study's kind settings in the admin, in real Chromium at a phone's width (390 px): the
options field and the kind's switch boxes lie inside the page for every kind; a hostile key
is refused with its name shown as text (no markup, no script), the study unchanged; a
Likert criterion labelled with markup is stored and shown back as the text it is."""

import json

import pytest
from playwright.sync_api import expect

import kinds
from annotator import services
from annotator.models import Study
from tests.conftest import PASSWORD, bundle, make_superuser
from tests.services import require_postgres_and_redis

SYSTEMS = {"pairwise": 2, "likert": 2, "ranking": 3, "error_spans": 2}
HOSTILE = '<img src=x onerror="window.__owned=1">'


def study_of(kind: str) -> Study:
    records = [
        {"id": f"in{i}", "input": f"q {i}", "outputs": {f"s{k}": f"a {i}" for k in range(n)}}
        for i, n in enumerate([SYSTEMS[kind]] * 2)
    ]
    return services.study_import(bundle(records, {"kind": kind}), filename=f"{kind}.jsonl")


def fits(page) -> None:
    """The options field inside the viewport; the document does not scroll sideways."""
    box = page.locator("#id_options").bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, box
    wide = page.evaluate("document.documentElement.scrollWidth")
    assert wide <= 390, f"the page is {wide} px wide"


@pytest.mark.django_db(transaction=True)
def test_kind_settings_fit_a_phone_and_hostile_text_stays_text(browser, base_url):
    require_postgres_and_redis()
    studies = {kind: study_of(kind) for kind in kinds.NAMES}
    make_superuser("researcher")
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    try:
        page.goto(f"{base_url}/admin/login/")
        page.fill("#id_username", "researcher")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        for kind, study in studies.items():
            before = Study.objects.get(pk=study.pk).options
            page.goto(f"{base_url}/admin/annotator/study/{study.pk}/change/")
            fits(page)
            boxes = {n for n in kinds.ANSWER_SWITCHES if page.locator(f"#id_{n}").count()}
            assert boxes == set(kinds.get(kind).answer_switches), kind
            page.fill("#id_options", json.dumps({HOSTILE: 1}))
            page.click("input[name=_continue]")
            refused = page.locator(".errorlist", has_text=f"take no '{HOSTILE}' option")
            expect(refused).to_be_visible()  # the answer to the post, once it has loaded
            assert page.locator("img[onerror]").count() == 0
            assert page.evaluate("window.__owned") is None
            fits(page)
            assert Study.objects.get(pk=study.pk).options == before

        study = studies["likert"]
        page.goto(f"{base_url}/admin/annotator/study/{study.pk}/change/")
        criteria = [{"name": "clarity", "label": HOSTILE, "scale": [1, 5]}]
        page.fill("#id_options", json.dumps({"criteria": criteria}))
        page.click("input[name=_continue]")
        page.wait_for_selector(".messagelist .success")
        (criterion,) = Study.objects.get(pk=study.pk).options["criteria"]
        assert (criterion["label"], criterion["scale_max"]) == (HOSTILE, 5)
        shown = json.loads(page.input_value("#id_options"))
        assert shown["criteria"][0]["label"] == HOSTILE
        assert page.locator("img[onerror]").count() == 0
        assert page.evaluate("window.__owned") is None
    finally:
        context.close()
