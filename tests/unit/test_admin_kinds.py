"""The study admin as a researcher meets it, for every kind (Django's test client renders the
pages): help texts read as written, each page has one heading, and the answer switches (tie,
both good, both bad) are offered only where the kind has such answers, and refused elsewhere
(the study form, a qualification test's options); an imported study line's switch the kind
lacks is ignored."""

import json
import re
from html import unescape

import pytest
from django.apps import apps
from django.test import Client

import kinds
from annotator import services
from annotator.models import QualificationTest, Study
from tests.conftest import bundle
from tests.unit.test_reconfigure import change_form

SYSTEMS = {"pairwise": 2, "likert": 2, "ranking": 3, "error_spans": 2}
SWITCHES = ("allow_tie", "allow_both_good", "allow_both_bad")
#: What each kind offers: the switches that mean something for it.
OFFERED = {
    "pairwise": ["allow_tie", "allow_both_good", "allow_both_bad"],
    "likert": [],
    "ranking": ["allow_tie"],
    "error_spans": [],
}


def study_of(kind: str, **options) -> Study:
    records = [
        {
            "id": f"in{i}",
            "input": f"question {i}",
            "outputs": {f"s{k}": f"answer {i} by s{k}" for k in range(SYSTEMS[kind])},
        }
        for i in range(2)
    ]
    study = {"name": f"{kind} study", "kind": kind, "redundancy": 1, **options}
    return services.study_import(bundle(records, study), filename="s.jsonl")


def text_of(page: str) -> str:
    """What a reader sees: the page without its tags, scripts and styles."""
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    return unescape(re.sub(r"<[^>]+>", " ", page))


def test_no_help_text_is_markup():
    """The admin shows help texts as HTML: a ``<kind>`` placeholder vanished as a tag."""
    bad = [
        f"{model.__name__}.{field.name}"
        for model in apps.get_app_config("annotator").get_models()
        for field in model._meta.get_fields()
        if re.search(r"<[A-Za-z/!]", str(getattr(field, "help_text", "") or ""))
    ]
    assert bad == []


@pytest.mark.parametrize("kind", kinds.NAMES)
def test_the_change_page_offers_only_the_kind_s_answer_switches(admin_client, kind):
    study = study_of(kind)
    page = admin_client.get(f"/admin/annotator/study/{study.pk}/change/").content.decode()
    shown = [s for s in SWITCHES if f'name="{s}"' in page]
    assert shown == OFFERED[kind]
    assert "kinds/.py" not in text_of(page)
    assert "checked by the kind when saved. The answer switches are the boxes." in text_of(page)


def headings(page: str) -> list[str]:
    return [h.strip() for h in re.findall(r"<h1[^>]*>(.*?)</h1>", page, re.S)]


def test_the_create_and_prepare_pages_have_one_heading(admin_client):
    page = admin_client.get("/admin/annotator/study/import/").content.decode()
    assert headings(page) == ["Create a study"]
    study = study_of("pairwise")
    chosen = {"action": "prepare_checks", "_selected_action": [study.pk]}
    page = admin_client.post("/admin/annotator/study/", chosen).content.decode()
    assert headings(page) == ["Prepare gold checks and a qualification test"]


def test_a_switch_of_the_former_kind_is_refused_when_the_kind_changes(admin_client):
    """The switches shown are those of the study's kind; one left on while the kind is
    changed to one without such an answer is refused, and nothing is saved."""
    study = study_of("pairwise", allow_both_good=True)
    form = {
        "name": study.name,
        "kind": "likert",
        "question": "",
        "instructions": "",
        "allow_tie": "on",
        "allow_both_good": "on",
        "render_markdown": "on",
        "redundancy": 1,
        "lease_seconds": 600,
        "batch_size": 10,
        "gamma": 0.05,
        "collection": "all",
        "gold_rate_start": 0.2,
        "gold_rate_end": 0.05,
        "gold_rate_halflife": 20,
        "max_strikes": 3,
        "is_active": "on",
    }
    page = admin_client.post(f"/admin/annotator/study/{study.pk}/change/", form)
    assert page.status_code == 200  # the form again, with the reason
    assert "A Likert study has no such answer; turn it off." in unescape(page.content.decode())
    study.refresh_from_db()
    assert (study.kind, study.options["allow_both_good"]) == ("pairwise", True)


@pytest.mark.parametrize(
    ("kind", "options", "refused"),
    [
        ("ranking", {"allow_both_good": True}, "allow_both_good: a ranking test has no such"),
        ("error_spans", {"allow_tie": True}, "allow_tie: an error-span test has no such"),
        ("likert", {"allow_both_bad": True}, "allow_both_bad: a Likert test has no such"),
        ("ranking", {"allow_tie": True}, None),
        ("pairwise", {"allow_both_bad": True}, None),
    ],
)
def test_a_qualification_test_takes_only_its_kind_s_switches(db, kind, options, refused):
    from django.core.exceptions import ValidationError

    test = QualificationTest(name="t", kind=kind, options=options)
    if refused is None:
        test.full_clean()
        return
    with pytest.raises(ValidationError) as caught:
        test.full_clean()
    assert refused in str(caught.value)


@pytest.mark.parametrize("kind", ["likert", "ranking", "error_spans"])
def test_an_imported_switch_the_kind_lacks_is_ignored_and_not_shown(admin_client, kind):
    """Bundles written for every kind alike may say ``"allow_both_bad": true``: the kind
    ignores it (no such answer on its page) and the admin does not offer it."""
    study = study_of(kind, allow_both_bad=True)
    page = admin_client.get(f"/admin/annotator/study/{study.pk}/change/").content.decode()
    assert 'name="allow_both_bad"' not in page
    client = Client()
    client.get(f"/w/{study.public_id}/", {"worker": "w"})
    task = client.get(f"/w/{study.public_id}/task/").content.decode()
    assert "both_bad" not in task and "Both bad" not in task


@pytest.mark.parametrize("kind", kinds.NAMES)
def test_a_test_made_from_a_study_s_items_carries_only_its_kind_s_switches(db, kind):
    """``prepare_checks`` copies the study's options into its test: the switches the kind
    has no answer for stay behind, so the test can be edited and saved in the admin."""
    study = study_of(kind)
    known = {
        "pairwise": "s0",
        "likert": {"scores": {"overall": 3}},
        "ranking": "s1",
        "error_spans": {"spans": [], "score": 50},
    }[kind]
    item = study.items.order_by("pk").first()
    outputs = item.output_list()
    item.expected = study.kind_impl.parse_expected(
        study.kind_options(),
        known,
        systems=[o.system.name for o in outputs],
        outputs=[o.text for o in outputs],
    )
    item.save(update_fields=["expected"])
    test = services.study_prepare_checks(study, n_qualification=1, seed=0)
    assert [s for s in SWITCHES if s in test.options] == OFFERED[kind]
    test.full_clean()


def _change_form(study: Study, options: object, **switches: str) -> dict:
    """The study's change form as the admin posts it: the kind's settings as JSON."""
    given = options if isinstance(options, str) else json.dumps(options)
    return change_form(study, options=given, **switches)


def test_a_likert_studys_criteria_are_edited_in_its_options_and_checked(admin_client):
    """A Likert study's criteria are part of its one ``options`` object: a valid edit is
    saved in the stored form and bumps the config version; a bad scale or a duplicate name
    is named on the page and nothing changes."""
    study = study_of("likert", criteria=[{"name": "ok", "label": "OK?", "scale": [1, 3]}])
    url = f"/admin/annotator/study/{study.pk}/change/"
    page = unescape(admin_client.get(url).content.decode())
    assert '"scale_max": 3' in page and 'name="allow_tie"' not in page
    for bad, message in (
        ({"criteria": [{"name": "ok", "scale": [1, 40]}]}, "2 to 21 points"),
        ({"criteria": [{"name": "a"}, {"name": "a"}]}, "criterion names must be distinct"),
        ({"criteria": [{"name": "ok"}], "strength": True}, "take no 'strength' option"),
        ("[1, 2]", "Give the options as a JSON object."),
    ):
        page = admin_client.post(url, _change_form(study, bad))
        assert page.status_code == 200 and message in unescape(page.content.decode())
        study.refresh_from_db()
        assert study.options["criteria"][0]["scale_max"] == 3 and study.config_version == 1
    edited = {"criteria": [{"name": "ok", "label": "Fine?", "scale": [0, 6]}]}
    assert admin_client.post(url, _change_form(study, edited)).status_code == 302
    study.refresh_from_db()
    assert study.options["criteria"] == [
        {"name": "ok", "label": "Fine?", "scale_min": 0, "scale_max": 6, "anchors": {},
         "labels": []},
    ]  # fmt: skip
    assert study.config_version == 2


def test_a_switch_box_is_stored_in_the_options_and_the_rest_kept(admin_client):
    """Unticking "tie" on a pairwise study stores ``allow_tie: false`` beside its other
    settings (criteria, strength), which the form shows as JSON without the switches."""
    criteria = [{"name": "helpful", "label": "Helpful?"}]
    study = study_of("pairwise", criteria=criteria, strength=True)
    url = f"/admin/annotator/study/{study.pk}/change/"
    page = unescape(admin_client.get(url).content.decode())
    shown = re.search(r'<textarea name="options"[^>]*>(.*?)</textarea>', page, re.S).group(1)
    kept = {k: v for k, v in study.options.items() if k not in SWITCHES}
    assert json.loads(shown) == kept and kept["strength"] is True
    assert admin_client.post(url, _change_form(study, kept, allow_tie="")).status_code == 302
    study.refresh_from_db()
    assert study.options == {**kept, "allow_tie": False, "allow_both_good": False,
                             "allow_both_bad": False}  # fmt: skip
    assert study.config_version == 2 and study.kind_settings["strength"] is True


def test_a_post_without_the_options_field_keeps_the_kinds_settings(admin_client):
    """A hand-made post that leaves ``options`` out changes the switches it sends and keeps
    the criteria and strength, instead of resetting them to the kind's defaults."""
    criteria = [{"name": "helpful", "label": "Helpful?"}]
    study = study_of("pairwise", criteria=criteria, strength=True)
    form = _change_form(study, {}, allow_tie="")
    del form["options"]
    url = f"/admin/annotator/study/{study.pk}/change/"
    assert admin_client.post(url, form).status_code == 302
    study.refresh_from_db()
    assert study.options["criteria"][0]["name"] == "helpful" and study.options["strength"]
    assert study.options["allow_tie"] is False
