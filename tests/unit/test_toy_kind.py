"""A kind defined here, in the test, and registered for its duration, runs through every
path a study takes: import → qualification → lease → submit → export → report → one
adaptive round — touching no file outside this test (issue 26). What differs between
kinds must live on the kind object; an app that branches on the kind's name or shape fails
here, as it would for anyone adding a kind.

Two toy kinds, one per item shape the protocol knows besides rankings (``Kind.item_shape``):

* *binary acceptability* (``scored``): an item shows one output; the worker says whether it
  is acceptable (``yes`` = 1, ``no`` = 0), so the adaptive protocol compares two systems by
  their outputs' scores on the same input;
* *first or second* (``pair``): an item shows two outputs; the worker picks the better one,
  a preference in system order the protocol counts per label.

Neither has a Judge-Bench form, so that export is refused with a reason."""

from __future__ import annotations

import random
import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client, override_settings

import kinds
from analysis.render import render_text
from analysis.selectors import study_report
from annotator import exports, services
from annotator.errors import NoJudgeBenchForm
from annotator.models import (
    Annotation,
    Assignment,
    QualificationAttempt,
    QualificationQuestion,
    QualificationTest,
    Study,
)
from formats.labels import read_export
from protocol.models import Round, SystemPair
from tests.conftest import boss_client
from tests.protocol_sim import MEAN_RATING, adaptive_bundle

CHOICES = {"yes": "Acceptable", "no": "Not acceptable"}


class Acceptability(kinds.Kind):
    """Binary acceptability: one output per item, ``{"accept": "yes"|"no"}``."""

    name = "acceptability"
    label = "Binary acceptability"
    noun = "acceptability"
    template = "toy/acceptability.html"
    scored = True
    adaptive = True

    # what the test posts and expects (not part of the kind's interface)
    field, wrong, refusal, first = "accept", "maybe", "Say yes or no.", "yes"
    questions = [
        (["Fine answer."], "yes", {"accept": "yes"}),
        (["<b>Bad</b> answer."], "no", {"accept": "no"}),
    ]
    stored = ({"accept": "yes"}, "yes", {"acceptable": 1})
    collected_as, prop, title = "scored", "acceptable", "Acceptable?"

    @staticmethod
    def worker(assignment, rng: random.Random) -> str:
        """A simulated worker: ``yes`` with a chance that grows with the system's quality."""
        system = assignment.item.output_list()[0].system.name
        return "yes" if rng.random() < (MEAN_RATING[system] - 1) / 4 else "no"

    @property
    def instructions_template(self) -> str:
        return "toy/instructions.html"

    def validate_options(self, opts: Mapping[str, Any], n_systems: int | None) -> dict[str, Any]:
        if opts.get("collection") == "adaptive" and n_systems is not None and n_systems < 2:
            raise kinds.OptionError(["study: adaptive collection compares systems"])
        return {}

    def outputs_per_item(self, opts: Mapping[str, Any], n_systems: int) -> int:
        return 1

    def context(self, opts: Mapping[str, Any]) -> dict[str, Any]:
        return {"choices": list(CHOICES.items())}

    def _accept(self, value: object) -> str:
        value = kinds.base.once(value, "the answer")
        if value not in CHOICES:
            raise kinds.AnswerError("Say yes or no.")
        return str(value)

    def parse_answer(
        self,
        opts: Mapping[str, Any],
        display_order: Sequence[int],
        data: Mapping[str, Any],
        *,
        outputs: Sequence[str] = (),
    ) -> dict[str, Any]:
        return {"accept": self._accept(data.get("accept"))}

    def summary(self, opts: Mapping[str, Any], answer: Mapping[str, Any]) -> dict[str, Any]:
        accept = answer["accept"]
        return {"raw_answer": accept, "value": "", "scores": {"acceptable": int(accept == "yes")}}

    def answer_from_summary(
        self, opts: Mapping[str, Any], value: str, scores: Mapping[str, Any]
    ) -> dict[str, Any]:
        return {"accept": "yes" if scores.get("acceptable") else "no"}

    def simulate_answer(self, opts, display_order, qualities, known_range, expected, rng, accuracy):
        if expected:
            right = rng.random() < accuracy
            return {"accept": expected["accept"] if right else rng.choice(list(CHOICES))}, False
        return {"accept": rng.choice(list(CHOICES))}, True

    def scores(self, opts: Mapping[str, Any], answer: Mapping[str, Any]) -> dict:
        return {"acceptable": {0: float(answer.get("accept") == "yes")}}

    def score_scales(self, opts: Mapping[str, Any]) -> list[tuple[str, float, float]]:
        return [("acceptable", 0, 1)]

    def report_properties(self, opts, question, observed):
        return [("acceptable", "categorical", tuple(CHOICES), "Acceptable?")]

    def report_labels(self, opts, answer):
        return [("acceptable", answer["accept"])]

    def parse_expected(self, opts, gold, *, systems, outputs):
        accept = gold.get("accept") if isinstance(gold, Mapping) else gold
        return {"accept": self._accept(accept)}

    def gold_correct(self, opts, expected, answer) -> bool:
        return expected.get("accept") == answer.get("accept")

    def export_fields(self, opts: Mapping[str, Any]) -> list[str]:
        return ["accept"]

    def export_row(self, opts, answer, systems, display_order) -> dict[str, Any]:
        return {"accept": answer["accept"]}


class FirstOrSecond(kinds.Kind):
    """A pair of outputs; ``{"raw": "first"|"second", "value": "A"|"B"}`` (system order)."""

    name = "first_or_second"
    label = "First or second"
    noun = "first-or-second"
    template = "toy/first_or_second.html"
    adaptive = True

    field, wrong, refusal, first = "pick", "both", "Say first or second.", "first"
    questions = [
        (["Good.", "<b>Bad</b>."], "A", {"value": "A"}),
        (["Worse.", "Better."], "B", {"value": "B"}),
    ]
    stored = None  # depends on the display order drawn
    collected_as, prop, title = "pair", "preference", "Which is better?"

    @staticmethod
    def worker(assignment, rng: random.Random) -> str:
        """A simulated worker: picks the better system's output with chance 0.85."""
        quality = [MEAN_RATING[o.system.name] for o in assignment.item.output_list()]
        a_better = quality[0] > quality[1] if quality[0] != quality[1] else rng.random() < 0.5
        if rng.random() > 0.85:
            a_better = not a_better
        return "first" if a_better == (assignment.display_order[0] == 0) else "second"

    @property
    def instructions_template(self) -> str:
        return "toy/instructions.html"

    def outputs_per_item(self, opts: Mapping[str, Any], n_systems: int) -> int:
        return 2

    def context(self, opts: Mapping[str, Any]) -> dict[str, Any]:
        return {"choices": [("first", "First"), ("second", "Second")]}

    def parse_answer(self, opts, display_order, data, *, outputs=()):
        raw = kinds.base.once(data.get("pick"), "the answer")
        if raw not in ("first", "second"):
            raise kinds.AnswerError("Say first or second.")
        shown_first = display_order[0] == 0
        return {"raw": raw, "value": "A" if (raw == "first") == shown_first else "B"}

    def simulate_answer(self, opts, display_order, qualities, known_range, expected, rng, accuracy):
        return {"pick": rng.choice(["first", "second"])}, True

    def pair_preferences(self, opts, answer):
        return [("preference", 0, 1, 1.0 if answer["value"] == "A" else 0.0)]

    def report_properties(self, opts, question, observed):
        return [("preference", "pairwise", ("A", "B"), "Which is better?")]

    def report_labels(self, opts, answer):
        return [("preference", answer["value"])]

    def parse_expected(self, opts, gold, *, systems, outputs):
        if gold not in ("A", "B"):
            raise kinds.AnswerError("the known answer is A or B")
        return {"value": gold}

    def gold_correct(self, opts, expected, answer) -> bool:
        return expected.get("value") == answer.get("value")

    def export_fields(self, opts: Mapping[str, Any]) -> list[str]:
        return ["pick"]

    def export_row(self, opts, answer, systems, display_order) -> dict[str, Any]:
        return {"pick": answer["raw"]}


#: The toy kinds' templates, in memory (the worker's part of the task page, the sentence
#: of the default instructions).
TEMPLATES = {
    "toy/first_or_second.html": (
        '{% load i18n %}{% for output in outputs %}<section class="output">'
        '{% include "kinds/_content.html" with content=output %}</section>{% endfor %}'
        "{% for value, caption in choices %}"
        '<label><input type="radio" name="pick" value="{{ value }}" required>'
        "{{ caption }}</label>{% endfor %}"
        '<button type="submit" class="answer submit">{% translate "Submit" %}</button>'
    ),
    "toy/acceptability.html": (
        '{% load i18n %}<section class="output single">'
        '{% include "kinds/_content.html" with content=outputs.0 %}</section>'
        "{% for value, caption in choices %}"
        '<label><input type="radio" name="accept" value="{{ value }}" required>'
        "{{ caption }}</label>{% endfor %}"
        '<button type="submit" class="answer submit">{% translate "Submit" %}</button>'
    ),
    "toy/instructions.html": "Say what you think of the response.",
}


@pytest.fixture(params=[Acceptability, FirstOrSecond], ids=["scored", "pair"])
def toy_kind(request, settings):
    """A toy kind registered, and its templates found, for one test."""
    toy = request.param()
    engine = dict(settings.TEMPLATES[0])
    engine["APP_DIRS"] = False
    engine["OPTIONS"] = {
        **engine["OPTIONS"],
        "loaders": [
            ("django.template.loaders.locmem.Loader", TEMPLATES),
            "django.template.loaders.filesystem.Loader",
            "django.template.loaders.app_directories.Loader",
        ],
    }
    kinds.register(toy)
    try:
        with override_settings(TEMPLATES=[engine]):
            yield toy
    finally:
        kinds.unregister(toy.name)


def token_of(page: str) -> str:
    return re.search(r'name="token" value="([0-9a-f-]+)"', page).group(1)


def test_the_registry_takes_a_kind_and_gives_it_back(toy_kind):
    name = toy_kind.name
    assert kinds.get(name) is toy_kind and name in kinds.NAMES
    assert (name, toy_kind.label) in kinds.choices()
    assert name not in kinds.judgebench_kinds()
    assert toy_kind.item_shape({}, 4) == toy_kind.collected_as
    with pytest.raises(ValueError, match="name of its own"):
        kinds.register(type(toy_kind)())


@pytest.mark.django_db(transaction=True)
def test_a_kind_defined_in_a_test_runs_through_every_path(toy_kind):
    name, field = toy_kind.name, toy_kind.field
    # --- import: an adaptive study of four systems; round 1 open
    data = adaptive_bundle(20, kind=name, name="toy study")
    study = services.study_import(data, filename="toy.jsonl")
    assert (study.kind, study.collection) == (name, "adaptive")
    assert SystemPair.objects.filter(study=study).count() == 6
    (first,) = Round.objects.filter(study=study)
    assert first.state == "open" and first.items > 0

    # --- qualification: a test of the kind, written as the admin writes it
    test = QualificationTest.objects.create(name="toy test", kind=name, pass_threshold=2)
    for k, (outputs, gold, _) in enumerate(toy_kind.questions):
        question = QualificationQuestion(
            test=test, prompt=f"q{k}", outputs=outputs, expected=gold, order=k
        )
        question.full_clean()
        question.save()
    assert [q.expected for q in test.questions.all()] == [e for *_, e in toy_kind.questions]
    study.qualification = test
    study.full_clean()
    study.save()

    client = Client()
    assert client.get(f"/w/{study.public_id}/", {"worker": "person"}).status_code == 302
    for k in range(2):
        page = client.get(f"/w/{study.public_id}/qualify/")
        html = page.content.decode()
        assert page.status_code == 200 and f'name="{field}" value="{toy_kind.first}"' in html
        assert "<b>Bad</b>" not in html  # model outputs are text, never markup
        attempt = QualificationAttempt.objects.get(annotator__external_id="person")
        step = attempt.order[k]
        known = QualificationQuestion.objects.get(pk=step["question"]).expected
        refused = client.post(
            f"/w/{study.public_id}/qualify/",
            {"question": step["question"], field: toy_kind.wrong},
        )
        assert refused.status_code == 400 and toy_kind.refusal in refused.content.decode()
        right = right_answer(toy_kind, known, step["display_order"])
        done = client.post(
            f"/w/{study.public_id}/qualify/", {"question": step["question"], field: right}
        )
        assert done.status_code == 302
    attempt = QualificationAttempt.objects.get(annotator__external_id="person")
    assert (attempt.n_correct, attempt.passed) == (2, True)

    # --- lease and submit through the worker's page
    page = client.get(f"/w/{study.public_id}/task/").content.decode()
    assert f'name="{field}" value="{toy_kind.first}"' in page
    token = token_of(page)
    refused = client.post(f"/w/{study.public_id}/task/", {"token": token, field: toy_kind.wrong})
    assert refused.status_code == 400 and not Annotation.objects.exists()
    answered = client.post(f"/w/{study.public_id}/task/", {"token": token, field: toy_kind.first})
    assert answered.status_code == 200
    (label,) = Annotation.objects.all()
    order = Assignment.objects.get(token=token).display_order
    expected = toy_kind.stored or (
        {"raw": "first", "value": "AB"[order[0]]},
        "first",
        {},
    )
    assert (label.answer, label.raw_answer, label.scores) == expected

    # --- one adaptive round: the worker answers the rest of round 1 on the page (a simulated
    # worker, kinder to a better system); it closes, is decided, round 2 opens
    rng = random.Random(0)
    page = answered.content.decode()
    while first.refresh_from_db() or first.state == "open":
        assignment = Assignment.objects.get(token=token_of(page))
        answer = {"token": assignment.token, field: toy_kind.worker(assignment, rng)}
        page = client.post(f"/w/{study.public_id}/task/", answer).content.decode()
    assert first.state == "decided"
    assert Round.objects.filter(study=study, number=2).exists() or not SystemPair.objects.filter(
        study=study, state="open"
    )
    evidence = SystemPair.objects.filter(study=study).values_list("evidence", flat=True)
    assert all(e["round"] == 1 and sum(e["human"]) > 0 for e in evidence)

    # --- export: every row format through the project's own reader; Judge-Bench refused
    n = Annotation.objects.filter(study=study).count()
    for fmt in exports.ROW_FORMATS:
        read = read_export("".join(exports.export_chunks(study, fmt)), f".{fmt}")
        assert not read.errors and len(read.rows) == n, fmt
        assert toy_kind.first in set(read.rows[field].astype(str)), fmt
    with pytest.raises(NoJudgeBenchForm):
        exports.export_chunks(study, "judgebench")
    with tempfile.TemporaryDirectory() as tmp:
        call_command("export_labels", str(study.pk), "--format", "hf", tmp)
        card = (Path(tmp) / "README.md").read_text()
    assert name in card

    # --- report: the kind's property, in the text and on the researcher's page
    report = study_report(study, n_boot=20, seed=0)
    assert [p["name"] for p in report["properties"]] == [toy_kind.prop]
    assert toy_kind.prop in render_text(report)
    boss = boss_client()
    page = boss.get(f"/studies/{study.pk}/report/")
    assert page.status_code == 200 and toy_kind.title in page.content.decode()
    dashboard = boss.get(f"/studies/{study.pk}/protocol/")
    assert dashboard.status_code == 200 and "s1" in dashboard.content.decode()


def right_answer(toy_kind, known: dict, display_order: list[int]) -> str:
    """The posted value that matches a qualification question's known answer."""
    if "accept" in known:
        return known["accept"]
    return "first" if "AB"[display_order[0]] == known["value"] else "second"


class Unadaptive(Acceptability):
    """The acceptability toy, declared unfit for adaptive collection (``Kind.adaptive``)."""

    name = "unadaptive"
    label = "Acceptability, collected whole"
    noun = "whole-acceptability"
    adaptive = False


@pytest.mark.django_db
def test_a_kind_that_is_not_adaptive_is_refused_adaptive_collection_with_the_reason():
    """``Kind.adaptive`` is every built-in kind's, not a given: a kind without it is
    refused ``collection: adaptive`` at import, naming why, and nothing is stored; the same
    study collected whole imports."""
    from annotator.errors import ImportRejected

    kinds.register(Unadaptive())
    try:
        data = adaptive_bundle(4, kind="unadaptive", name="whole")
        with pytest.raises(ImportRejected) as refused:
            services.study_import(data, filename="toy.jsonl")
        assert "study: whole-acceptability studies cannot be collected adaptively" in (
            refused.value.errors
        )
        assert not Study.objects.exists()
        whole = adaptive_bundle(4, kind="unadaptive", name="whole", collection="all")
        study = services.study_import(whole, filename="toy.jsonl")
        assert (study.collection, study.items.count()) == ("all", 16)
    finally:
        kinds.unregister("unadaptive")
