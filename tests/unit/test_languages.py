"""Worker pages in the worker's language (docs/languages.md): every worker-facing string is
marked for translation, every shipped catalog translates every one of them and its compiled
.mo matches its .po; a study's language and the worker's switch; guideline revisions on the
labels and in the report."""

from __future__ import annotations

import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from django.utils import translation

from annotator import revisions
from annotator.languages import WORKER_TEXTS
from annotator.models import Annotation, GuidelineRevision
from tests.conftest import bundle, make_superuser, pairwise_bundle

babel_pofile = pytest.importorskip("babel.messages.pofile")
babel_mofile = pytest.importorskip("babel.messages.mofile")

ROOT = Path(settings.BASE_DIR)
LOCALE = ROOT / "locale"
LANGUAGES = [code for code, _ in settings.LANGUAGES]
#: Every template a worker sees (entry messages, instructions, qualification, each kind's
#: task page, the end, waiting and stale pages) and the scripts of those pages.
WORKER_TEMPLATES = sorted(
    [
        ROOT / "templates" / "base.html",
        *(ROOT / "annotator" / "templates" / "annotator").glob("*.html"),
        *(ROOT / "kinds" / "templates" / "kinds").glob("*.html"),
    ]
)
WORKER_SCRIPTS = sorted(
    [
        *(ROOT / "kinds" / "static" / "kinds").glob("*.js"),
        *(ROOT / "static" / "humeval").glob("*.js"),
    ]
)
RESEARCHER_SCRIPTS = {"workspace.js"}  # the researcher's workspace, not a worker page
#: Words that are no English to translate: key names on the keyboard.
KEY_NAMES = {"Enter", "Shift", "Ctrl", "Alt", "Tab", "Delete", "Esc"}

TAG = re.compile(r"{%.*?%}|{{.*?}}|{#.*?#}", re.S)
BLOCK = re.compile(r"{%\s*blocktranslate.*?{%\s*endblocktranslate\s*%}", re.S)
COMMENT = re.compile(r"{%\s*comment\s*%}.*?{%\s*endcomment\s*%}", re.S)
TRANSLATE = re.compile(r"""{%\s*translate\s+(?:"((?:[^"\\]|\\.)*)"|'([^']*)')""")


def catalog(language: str, domain: str):
    path = LOCALE / translation.to_locale(language) / "LC_MESSAGES" / f"{domain}.po"
    with path.open("rb") as po:
        return babel_pofile.read_po(po)


def unmarked_text(source: str) -> list[str]:
    """Words of a template a worker would read that no translate tag covers: the text and
    the aria-label/title/alt/placeholder values left once every tag, variable, comment and
    blocktranslate is taken out."""
    bare = TAG.sub(" ", BLOCK.sub(" ", COMMENT.sub(" ", source)))
    found: list[str] = []

    class Parser(HTMLParser):
        def handle_data(self, data):
            found.extend(re.findall(r"[A-Za-z]{2,}", data))

        def handle_starttag(self, tag, attrs):
            for name, value in attrs:
                if name in ("aria-label", "title", "alt", "placeholder") and value:
                    found.extend(re.findall(r"[A-Za-z]{2,}", value))

    Parser().feed(bare)
    return [w for w in found if w not in KEY_NAMES]


def test_every_worker_facing_template_string_is_marked_for_translation():
    unmarked = {p.name: unmarked_text(p.read_text()) for p in WORKER_TEMPLATES}
    assert {name: words for name, words in unmarked.items() if words} == {}


def test_the_unmarked_check_finds_english_text_and_attributes():
    assert unmarked_text('<p>{% translate "Fine" %} Left over</p>') == ["Left", "over"]
    assert unmarked_text('<a title="Drag me">{% blocktranslate %}ok{% endblocktranslate %}</a>')
    assert unmarked_text('<kbd>Enter</kbd> {{ value }} {% url "x" %}') == []


def test_worker_scripts_show_no_literal_english():
    """A script's text for a worker goes through gettext (Django's JavaScript catalog)."""
    shown = re.compile(
        r"""(?:textContent\s*=|setCustomValidity\(|say\(|setAttribute\("(?:aria-label|title)",)"""
        r"""\s*["'][A-Za-z]"""
    )
    found = {
        p.name: shown.findall(p.read_text())
        for p in WORKER_SCRIPTS
        if p.name not in RESEARCHER_SCRIPTS
    }
    assert {name: hits for name, hits in found.items() if hits} == {}


def template_messages() -> set[str]:
    found = set()
    for path in WORKER_TEMPLATES:
        for double, single in TRANSLATE.findall(path.read_text()):
            found.add((double or single).replace('\\"', '"'))
    return found


def script_messages() -> set[str]:
    call = re.compile(r"""gettext\("((?:[^"\\]|\\.)*)"\)""")
    return {m for p in WORKER_SCRIPTS for m in call.findall(p.read_text())}


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_shipped_catalog_translates_every_worker_message(language):
    """Each language's django and djangojs catalogs hold every message the worker pages ask
    for (the templates' translate tags, the scripts' gettext calls, the kinds' captions in
    ``WORKER_TEXTS``), none fuzzy, every plural form filled."""
    for domain, wanted in (
        ("django", template_messages() | set(WORKER_TEXTS)),
        ("djangojs", script_messages()),
    ):
        cat = catalog(language, domain)
        ids = {m.id if isinstance(m.id, str) else m.id[0] for m in cat if m.id}
        assert wanted - ids == set(), (language, domain)
        for message in cat:
            if not message.id:
                continue
            strings = message.string if isinstance(message.string, tuple) else (message.string,)
            assert all(strings), (language, domain, message.id)
            assert not message.fuzzy, (language, domain, message.id)
            for placeholder in re.findall(r"%\(\w+\)[sd]", str(message.id)):
                assert all(placeholder in s for s in strings), (language, message.id)


def test_the_kinds_captions_are_in_the_worker_texts():
    from kinds import criteria, likert, pairwise

    captions = {
        *pairwise.RAW_ANSWERS.values(),
        *(label for _, _, label in criteria.STRENGTH_ANSWERS),
        likert.DEFAULT_CRITERION["label"],
        *likert.DEFAULT_CRITERION["anchors"].values(),
    }
    assert captions - set(WORKER_TEXTS) == set()


@pytest.mark.parametrize("language", LANGUAGES)
def test_each_compiled_catalog_matches_its_po(language):
    """The committed .mo files are the .po files compiled (``manage.py compile_catalogs``)."""
    for domain in ("django", "djangojs"):
        po = LOCALE / translation.to_locale(language) / "LC_MESSAGES" / f"{domain}.po"
        compiled = io.BytesIO()
        babel_mofile.write_mo(compiled, catalog(language, domain), use_fuzzy=False)
        assert po.with_suffix(".mo").read_bytes() == compiled.getvalue(), (
            f"{po.with_suffix('.mo')} is stale: run python manage.py compile_catalogs"
        )


def test_translations_are_real_for_a_sample():
    with translation.override("de"):
        assert translation.gettext("Submit") == "Absenden"
    with translation.override("ar"):
        assert translation.gettext("Submit") != "Submit"
        assert translation.get_language_bidi()
    with translation.override("ja"):
        assert translation.gettext("Instructions") != "Instructions"


# --- a study's language ---------------------------------------------------------------------


def enter(client: Client, study, worker="w1", **params):
    return client.get(f"/w/{study.public_id}/", {"worker": worker, **params})


def test_the_study_language_sets_lang_dir_and_the_worker_may_switch(make_study):
    study = make_study(pairwise_bundle(language="ar", languages=["en", "fr"]))
    assert (study.language, study.languages) == ("ar", ["en", "fr"])
    client = Client()
    enter(client, study)
    page = client.get(f"/w/{study.public_id}/task/").content.decode()
    assert '<html lang="ar" dir="rtl">' in page
    assert 'dir="auto"' in page  # the input and the outputs carry their own direction
    assert "/w/jsi18n/ar/" in page
    assert 'hreflang="fr"' in page and 'hreflang="en"' in page
    switched = client.get(f"/w/{study.public_id}/task/", {"lang": "fr"})
    assert '<html lang="fr" dir="ltr">' in switched.content.decode()
    # remembered for the study's pages; a language the study does not allow is ignored
    later = client.get(f"/w/{study.public_id}/task/", {"lang": "ru"}).content.decode()
    assert '<html lang="fr" dir="ltr">' in later


def test_instructions_per_language_and_the_js_catalog(make_study):
    study = make_study(
        pairwise_bundle(
            language="de",
            instructions="Read carefully.",
            instructions_by_language={"de": "Bitte sorgfältig lesen."},
            languages=["en"],
        )
    )
    client = Client()
    enter(client, study)
    page = client.get(f"/w/{study.public_id}/instructions/").content.decode()
    assert "Bitte sorgfältig lesen." in page and "Anleitung" in page
    english = client.get(f"/w/{study.public_id}/instructions/", {"lang": "en"}).content.decode()
    assert "Read carefully." in english
    script = Client().get("/w/jsi18n/he/")
    # the catalog holds Hebrew strings, JSON-escaped ("Remove": "הסר")
    assert script.status_code == 200 and json.dumps("הסר")[1:-1] in script.content.decode()
    assert Client().get("/w/jsi18n/xx/").status_code == 404


@pytest.mark.parametrize(
    "line",
    [{"language": "tlh"}, {"languages": "en"}, {"languages": ["en", "xx"]}],
)
def test_a_study_line_with_an_unknown_language_is_refused(make_study, line):
    from annotator.errors import ImportRejected
    from annotator.models import Study

    with pytest.raises(ImportRejected):
        make_study(pairwise_bundle(**line))
    assert not Study.objects.exists()


# --- guideline revisions ----------------------------------------------------------------------


def answer(client: Client, study, value="left") -> None:
    page = client.get(f"/w/{study.public_id}/task/").content.decode()
    token = re.search(r'name="token" value="([0-9a-f-]+)"', page).group(1)
    response = client.post(f"/w/{study.public_id}/task/", {"token": token, "answer": value})
    assert response.status_code == 200


def test_labels_before_and_after_an_edit_carry_different_revisions(make_study):
    """Editing the instructions in the admin makes revision 2 (who, when, a diff); labels
    made before carry 1, after 2; the report splits agreement and position bias by revision
    and lists the labels made under the superseded wording."""
    study = make_study(
        bundle(
            [
                {"id": f"q{i}", "input": f"input {i}", "outputs": {"a": f"A {i}", "b": f"B {i}"}}
                for i in range(4)
            ],
            {"kind": "pairwise", "redundancy": 2, "instructions": "Pick the better one."},
        )
    )
    workers = [Client(), Client()]
    for n, client in enumerate(workers):
        enter(client, study, worker=f"w{n}")
        answer(client, study)
    assert set(Annotation.objects.values_list("guideline_revision", flat=True)) == {1}

    admin = make_superuser()
    researcher = Client()
    researcher.force_login(admin)
    form = researcher.get(f"/admin/annotator/study/{study.pk}/change/")
    assert form.status_code == 200
    data = admin_form_data(form)
    data["instructions"] = "Pick the more helpful one; ignore length."
    saved = researcher.post(f"/admin/annotator/study/{study.pk}/change/", data)
    assert saved.status_code == 302, saved.content.decode()[:2000]
    study.refresh_from_db()
    assert study.guideline_revision == 2
    first, second = GuidelineRevision.objects.filter(study=study).order_by("number")
    assert (first.number, second.number) == (1, 2)
    assert second.created_by == admin and "ignore length" in second.text
    assert "+Pick the more helpful one; ignore length." in revisions.revision_diff(second)
    page = researcher.get(f"/admin/annotator/guidelinerevision/{second.pk}/change/")
    assert "-Pick the better one." in page.content.decode()
    # saving again without a change makes no revision
    researcher.post(
        f"/admin/annotator/study/{study.pk}/change/",
        admin_form_data(form) | {"instructions": "Pick the more helpful one; ignore length."},
    )
    assert GuidelineRevision.objects.filter(study=study).count() == 2

    for client in workers:  # the same workers go on, under the new wording
        answer(client, study, "right")
    revs = dict(Annotation.objects.values_list("pk", "guideline_revision"))
    assert sorted(revs.values()) == [1, 1, 2, 2]

    from analysis.selectors import study_report

    report = study_report(study, n_boot=0)
    split = report["revisions"]
    assert split["current"] == 2
    assert [r["revision"] for r in split["revisions"]] == [1, 2]
    assert [r["superseded"] for r in split["revisions"]] == [True, False]
    assert [r["annotations"] for r in split["revisions"]] == [2, 2]
    old = split["revisions"][0]["properties"][0]
    assert old["name"] == "preference"
    assert old["position_bias"]["overall"]["n"] == 2  # both chose left before the edit
    assert old["position_bias"]["overall"]["share_left"] == 1.0
    new = split["revisions"][1]["properties"][0]["position_bias"]["overall"]
    assert new["share_left"] == 0.0
    assert split["superseded_annotations"] == sorted(pk for pk, r in revs.items() if r == 1)


def admin_form_data(response) -> dict:
    """The admin change form's fields as a browser would post them."""
    form = response.context["adminform"].form
    data = {}
    for name, field in form.fields.items():
        value = form.initial.get(name, field.initial)
        if value is None:
            continue
        if isinstance(value, bool):
            if value:
                data[name] = "on"
            continue
        if isinstance(value, list | dict) and name not in ("researchers",):
            data[name] = json.dumps(value)
            continue
        if name == "researchers":
            data[name] = [getattr(v, "pk", v) for v in value]
            continue
        data[name] = getattr(value, "pk", value)
    for formset in response.context["inline_admin_formsets"]:
        management = formset.formset.management_form
        for name in management.fields:
            data[f"{management.prefix}-{name}"] = management.initial.get(name, 0)
    return data
