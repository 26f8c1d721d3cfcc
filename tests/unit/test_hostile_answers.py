"""Hostile answers, for every kind, on the task page and on the qualification page, through
the worker's HTTP path (Django's test client posting the form): JSON nested deeper than the
parser follows, unclosed JSON, a number too long to read, a NUL byte, markup, 200,000
characters, a field sent twice, an empty field among 900 made-up ones. Each is a 400 that
names the problem in a short message (what was sent is not echoed at length, markup stays
text) over the same task or question, and stores nothing; the right answer is still taken
afterwards."""

import html
import re

import pytest
from django.test import Client

import kinds
from annotator import services
from annotator.models import Annotation, Assignment, Item, QualificationAttempt
from tests.conftest import active_markup, bundle

SYSTEMS = {
    "pairwise": ("s1", "s2"),
    "likert": ("s1", "s2"),
    "ranking": ("s1", "s2", "s3"),
    "error_spans": ("s1", "s2"),
}
#: A known answer per kind, as the kind reads it (system order).
KNOWN = {
    "pairwise": {"value": "A"},
    "likert": {"scores": {"overall": 3}, "tolerance": 1},
    "ranking": {"top": 0},
    "error_spans": {"spans": [], "score": 50},
}
#: A form each kind takes, whatever the display order.
VALID = {
    "pairwise": {"answer": "tie"},
    "likert": {"score-overall": "3"},
    "ranking": {"ranking": "[[0], [1], [2]]"},
    "error_spans": {"spans": "[]", "score": "50"},
}
#: The fields of each kind's form a hostile value goes into.
FIELDS = {
    "pairwise": ["answer"],
    "likert": ["score-overall"],
    "ranking": ["ranking"],
    "error_spans": ["spans", "score"],
}
REPEATED = object()
#: The field empty, among 900 made-up fields (Likert: 900 unknown criteria).
MANY = object()
HOSTILE = {
    "nested": "[" * 990 + "]" * 990,
    "nested-unclosed": "[" * 990,
    "nested-objects": '{"a":' * 400 + "1" + "}" * 400,
    "huge-number": "9" * 5000,
    "nested-number": "[[" + "9" * 5000 + "]]",
    "nul": "\x00",
    "markup": '<script>alert(1)</script><img src=x onerror="alert(2)">',
    "long": "x" * 200_000,
    "repeated": REPEATED,
    "many-fields": MANY,
    "empty": "",
}
CASES = [(kind, field, name) for kind in kinds.NAMES for field in FIELDS[kind] for name in HOSTILE]


def hostile_form(kind: str, field: str, name: str) -> dict:
    form = dict(VALID[kind])
    value = HOSTILE[name]
    if value is MANY:
        form |= {f"score-made-up-{i}": "1" for i in range(900)}
        value = ""
    form[field] = [form[field], form[field]] if value is REPEATED else value
    return form


def study_of(kind: str, *, screened: bool):
    systems = SYSTEMS[kind]
    records = [
        {
            "id": f"in{i}",
            "input": f"question {i}",
            "outputs": {s: f"Answer {i} by {s}, plain text." for s in systems},
        }
        for i in range(4)
    ]
    study = services.study_import(
        bundle(records, {"name": f"{kind} hostile", "kind": kind, "redundancy": 1}),
        filename="s.jsonl",
        overrides={"open_links": True, "gold_rate_start": 0.0, "gold_rate_end": 0.0},
    )
    if screened:
        kind_impl, opts = study.kind_impl, study.kind_options()
        for item in Item.objects.filter(study=study).order_by("pk")[:2]:
            outputs = item.output_list()
            item.expected = kind_impl.parse_expected(
                opts,
                KNOWN[kind],
                systems=[o.system.name for o in outputs],
                outputs=[o.text for o in outputs],
            )
            item.save(update_fields=["expected"])
        test = services.study_prepare_checks(study, n_qualification=2, seed=1)
        test.pass_threshold = 1
        test.save()
    return study


def refusal(response) -> str:
    """The message shown over the page."""
    found = re.search(
        r'<ul class="messages" role="alert"><li[^>]*>(.*?)</li>', response.content.decode(), re.S
    )
    assert found, "no message shown"
    message = html.unescape(found.group(1))
    assert 0 < len(message) < 300, message[:500]
    assert active_markup(found.group(0)) == [] and "<" not in found.group(1)  # text only
    return message


@pytest.mark.django_db
@pytest.mark.parametrize(("kind", "field", "name"), CASES)
def test_a_hostile_task_answer_is_a_400_that_stores_nothing(kind, field, name):
    study = study_of(kind, screened=False)
    client = Client()
    client.get(f"/w/{study.public_id}/", {"worker": "w"})
    page = client.get(f"/w/{study.public_id}/task/")
    assert page.status_code == 200
    token = str(Assignment.objects.get().token)
    url = f"/w/{study.public_id}/task/"
    refused = client.post(url, {"token": token, **hostile_form(kind, field, name)})
    assert refused.status_code == 400
    assert refusal(refused)
    assert token in refused.content.decode()  # the same task, to answer again
    assert not Annotation.objects.exists()
    assert Assignment.objects.get().state == "issued"
    taken = client.post(url, {"token": token, **VALID[kind]})
    assert taken.status_code == 200
    assert Annotation.objects.count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(("kind", "field", "name"), CASES)
def test_a_hostile_qualification_answer_is_a_400_that_stores_nothing(kind, field, name):
    study = study_of(kind, screened=True)
    client = Client()
    client.get(f"/w/{study.public_id}/", {"worker": "w"})
    url = f"/w/{study.public_id}/qualify/"
    assert client.get(url).status_code == 200
    question = QualificationAttempt.objects.get().order[0]["question"]
    refused = client.post(url, {"question": question, **hostile_form(kind, field, name)})
    assert refused.status_code == 400
    assert refusal(refused)
    assert f'name="question" value="{question}"' in refused.content.decode()
    assert QualificationAttempt.objects.get().answers == []
    taken = client.post(url, {"question": question, **VALID[kind]})
    assert taken.status_code == 302
    assert len(QualificationAttempt.objects.get().answers) == 1


@pytest.mark.django_db
@pytest.mark.parametrize("kind", kinds.NAMES)
def test_every_kind_s_qualification_test_scores_its_answers(kind):
    """A question answered right and one answered wrong, through the page: the test of
    every kind reads the answer (error spans against the question's own output)."""
    study = study_of(kind, screened=True)
    client = Client()
    client.get(f"/w/{study.public_id}/", {"worker": "w"})
    url = f"/w/{study.public_id}/qualify/"
    right = {
        "pairwise": lambda order: {"answer": "left" if order == [0, 1] else "right"},
        "likert": lambda order: {"score-overall": "3"},
        "ranking": lambda order: {
            "ranking": str([[order.index(0)]] + [[d] for d in range(3) if order[d] != 0])
        },
        "error_spans": lambda order: {"spans": "[]", "score": "55"},
    }[kind]
    wrong = {
        "pairwise": {"answer": "tie"},
        "likert": {"score-overall": "5"},
        "ranking": None,
        "error_spans": {"spans": "[]", "score": "90"},
    }[kind]
    for k in range(2):
        client.get(url)
        slot = QualificationAttempt.objects.get().order[k]
        order = slot["display_order"]
        if kind == "ranking" and k == 1:  # the known best anywhere but first
            first = [d for d in range(3) if order[d] != 0]
            form = {"ranking": str([[first[0]], [order.index(0)], [first[1]]])}
        else:
            form = right(order) if k == 0 else wrong
        assert client.post(url, {"question": slot["question"], **form}).status_code == 302
    attempt = QualificationAttempt.objects.get()
    assert [a["correct"] for a in attempt.answers] == [True, False]
    assert attempt.passed is True  # one right of two, one needed


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("reason", "message"),
    [
        ("why\x00not", "NUL character"),
        ("x" * 5000, "at most 2000"),
        (["one", "two"], "Give one answer for the reason: it was sent 2 times."),
    ],
)
def test_a_hostile_written_reason_is_a_400_that_stores_nothing(reason, message):
    """The one free text a worker writes (a pairwise study's reason): a NUL, which the
    database cannot store, is refused like any malformed answer, not a 500."""
    records = [{"id": "q", "input": "q", "outputs": {"a": "one", "b": "two"}}]
    study = services.study_import(
        bundle(records, {"kind": "pairwise", "redundancy": 1, "rationale": "optional"}),
        filename="s.jsonl",
        overrides={"open_links": True, "gold_rate_start": 0.0, "gold_rate_end": 0.0},
    )
    client = Client()
    client.get(f"/w/{study.public_id}/", {"worker": "w"})
    client.get(f"/w/{study.public_id}/task/")
    token = str(Assignment.objects.get().token)
    url = f"/w/{study.public_id}/task/"
    refused = client.post(url, {"token": token, "answer": "left", "rationale": reason})
    assert refused.status_code == 400
    assert message in refusal(refused)
    assert not Annotation.objects.exists()
    taken = client.post(url, {"token": token, "answer": "left", "rationale": "ok"})
    assert taken.status_code == 302  # the only item: on to the end page
    assert Annotation.objects.get().answer["rationale"] == "ok"
