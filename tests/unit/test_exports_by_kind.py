"""Exports of every kind (pairwise, pairwise with criteria, Likert, ranking, error spans):
the columns each writes and what they hold, CSV / JSON Lines / JSON through the command and
the API, read back by the project's own label reader (``formats.labels``,
``analysis.loaders``); Judge-Bench refused with the reason for a kind without that form;
Hugging Face datasets that ``datasets.load_dataset`` reads back to the same labels, with
the texts judged."""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

import datasets
import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

import kinds
from analysis.loaders import load_dataset
from annotator import services
from annotator.models import Annotation, Study
from formats.labels import LABEL_FIELDS, read_export
from tests.conftest import bundle
from tests.leasing import next_lease
from tests.unit.test_report import client_for

#: The CSV's common columns (``scores`` is spread over ``score_<criterion>`` columns).
COMMON = [f for f in LABEL_FIELDS if f != "scores"]
CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Is 7 < 8 & 9 > 8?"},
]
TEXTS = {"s1": "Yes, it is true.", "s2": "No, that is wrong.", "s3": "Maybe so."}


def _records(systems, conversation: bool) -> list[dict]:
    """Three inputs; with ``conversation`` the first is a conversation answered by turns."""
    records = [
        {"id": f"in{i}", "input": f"question {i}", "outputs": {s: TEXTS[s] for s in systems}}
        for i in range(3)
    ]
    if conversation:
        records[0]["input"] = CHAT
        records[0]["outputs"] = {s: [{"role": "assistant", "content": TEXTS[s]}] for s in systems}
    return records


#: kind label → (study line, systems, conversations allowed, own CSV columns).
STUDIES = {
    "pairwise": ({"kind": "pairwise", "allow_tie": True}, ("s1", "s2"), True, []),
    "criteria": (
        {
            "kind": "pairwise",
            "criteria": [{"name": "helpful"}, {"name": "honest"}],
            "strength": True,
            "rationale": "optional",
        },
        ("s1", "s2"),
        True,
        ["helpful", "helpful_strength", "honest", "honest_strength", "rationale"],
    ),
    "likert": (
        {
            "kind": "likert",
            "criteria": [
                {"name": "fluency", "scale": [1, 5]},
                {"name": "tone", "labels": ["formal", "casual"]},
            ],
        },
        ("s1", "s2"),
        True,
        ["score_fluency", "score_tone"],
    ),
    "ranking": (
        {"kind": "ranking", "allow_tie": True},
        ("s1", "s2", "s3"),
        True,
        ["systems", "display_order", "ranking"],
    ),
    "error_spans": (
        {"kind": "error_spans", "categories": ["accuracy", "fluency"]},
        ("s1", "s2"),
        False,
        ["score", "spans", "minor_errors", "major_errors", "mqm_errors"],
    ),
}


def _study(make_study, name: str, annotated: bool = True) -> Study:
    line, systems, conversation, _ = STUDIES[name]
    study = make_study(
        bundle(_records(systems, conversation), {"name": f"{name} study", **line}),
        redundancy=2,
    )
    if annotated:
        _annotate(study, ("w1", "w2"))
    return study


def _annotate(study: Study, workers) -> None:
    """Every worker answers every item: through the kind's simulated worker, and for error
    spans one marked span ("is" of the first output's text) and a score."""
    rng = random.Random(3)
    kind, opts = study.kind_impl, study.kind_options()
    for worker in workers:
        part = services.participation_enter(study=study, platform="link", external_id=worker)
        while (a := next_lease(participation=part)) is not None:
            outputs = a.item.output_list()
            if kind.name == "error_spans":
                text = outputs[0].text
                start = text.index("is") if "is" in text else 0
                span = {"start": start, "end": start + 2, "severity": "minor"}
                span |= {"category": "accuracy", "text": text[start : start + 2]}
                data = {"spans": json.dumps([span]), "score": str(rng.randint(0, 100))}
            else:
                qualities = [None] * len(outputs)
                data, _ = kind.simulate_answer(opts, a.display_order, qualities, None, {}, rng, 0.8)
            services.annotation_submit(annotator=part.annotator, token=a.token, data=data)


def _owner(study: Study) -> User:
    owner, _ = User.objects.get_or_create(username="owner")
    study.researchers.add(owner)
    return owner


def _export(study: Study, fmt: str, tmp_path, via: str) -> str:
    """The study's labels as ``fmt`` (csv, jsonl, json) through the command or the API."""
    if via == "command":
        out = tmp_path / f"labels.{fmt}"
        call_command("export_labels", study.pk, "--format", fmt, "-o", str(out))
        return out.read_text(encoding="utf-8")
    url = f"/api/studies/{study.pk}/annotations/?format={fmt}&page_size=1000"
    response = client_for(_owner(study)).get(url)
    assert response.status_code == 200, response.content
    return response.content.decode()


def _rows(study: Study) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "labels.jsonl"
        call_command("export_labels", study.pk, "--format", "jsonl", "-o", str(out))
        return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


# --- the columns of each kind -------------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize("name", list(STUDIES))
@pytest.mark.parametrize("via", ["command", "api"])
def test_each_kind_writes_its_columns_and_they_read_back(make_study, tmp_path, name, via):
    study = _study(make_study, name)
    n_labels = Annotation.objects.filter(study=study).count()
    own = STUDIES[name][3]
    csv_text = _export(study, "csv", tmp_path, via)
    assert csv_text.splitlines()[0].split(",") == COMMON + own
    jsonl = _export(study, "jsonl", tmp_path, via)
    keys = [f for f in own if not f.startswith("score_")]
    assert all(list(json.loads(line)) == [*LABEL_FIELDS, *keys] for line in jsonl.splitlines())
    for fmt, text in (("csv", csv_text), ("jsonl", jsonl), ("json", None)):
        text = text or _export(study, fmt, tmp_path, via)
        read = read_export(text, f".{fmt}")
        assert not read.errors and len(read.rows) == n_labels, fmt
        path = tmp_path / f"back.{fmt}"
        path.write_text(text, encoding="utf-8")
        dataset = load_dataset(path)  # the report's reader
        assert len(dataset.annotations), fmt
    assert len(_rows(study)) == n_labels


@pytest.mark.django_db
def test_ranking_rows_name_the_shown_systems_not_two_of_them(make_study, tmp_path):
    study = _study(make_study, "ranking")
    for row in _rows(study):
        annotation = Annotation.objects.get(pk=row["annotation_id"])
        names = [o.system.name for o in annotation.item.output_list()]
        shown = [names[p] for p in annotation.assignment.display_order]
        assert row["systems"] == names == ["s1", "s2", "s3"]
        assert row["display_order"] == shown
        tiers = [[names[p] for p in tier] for tier in annotation.answer["ranking"]]
        assert row["ranking"] == tiers
        for column in ("system_a", "system_b", "left_system", "label", "preferred_system"):
            assert row[column] is None, column
    # read back as the report reads a ranking: each pair of the three a pairwise item
    path = tmp_path / "ranking.csv"
    call_command("export_labels", study.pk, "--format", "csv", "-o", str(path))
    data = load_dataset(path)
    assert [p.name for p in data.properties] == ["preference"]
    n = Annotation.objects.filter(study=study).count()
    assert len(data.annotations) == 3 * n
    items = {(r.system_a, r.system_b) for r in data.items.itertuples()}
    assert items == {("s1", "s2"), ("s1", "s3"), ("s2", "s3")}


@pytest.mark.django_db
def test_ranking_export_gives_the_studys_report(make_study, tmp_path):
    from analysis import selectors
    from analysis.__main__ import report_for_file

    study = _study(make_study, "ranking")
    from_db = selectors.study_report(study, n_boot=20)
    for fmt in ("csv", "jsonl"):
        path = tmp_path / f"r.{fmt}"
        call_command("export_labels", study.pk, "--format", fmt, "-o", str(path))
        from_file = report_for_file(path, n_boot=20)
        assert from_file["counts"] == from_db["counts"], fmt
        a, b = from_db["properties"][0], from_file["properties"][0]
        assert a["name"] == b["name"] == "preference"
        # the file's labels are those observed (no tie was given): compare the given ones
        given = [d for d in a["label_distribution"] if d["count"]]
        assert given == b["label_distribution"], fmt
        assert a["pairwise"] == b["pairwise"], fmt


@pytest.mark.django_db
def test_error_span_rows_hold_one_score_and_the_spans(make_study, tmp_path):
    study = _study(make_study, "error_spans")
    csv_text = _export(study, "csv", tmp_path, "api")
    header = csv_text.splitlines()[0].split(",")
    assert "score_score" not in header and header.count("score") == 1
    for row in _rows(study):
        annotation = Annotation.objects.get(pk=row["annotation_id"])
        assert row["score"] == annotation.answer["score"] and row["scores"] is None
        assert row["spans"] == annotation.answer["spans"] and row["minor_errors"] == 1
        assert row["system_a"] == annotation.item.output_list()[0].system.name
    path = tmp_path / "esa.csv"
    path.write_text(csv_text, encoding="utf-8")
    data = load_dataset(path)
    assert [p.name for p in data.properties] == ["score"]
    scores = sorted(data.annotations["label"].tolist())
    assert scores == sorted(a.answer["score"] for a in Annotation.objects.filter(study=study))


# --- Judge-Bench: refused, with the reason, for a kind without that form -------------------
@pytest.mark.django_db
@pytest.mark.parametrize("name", ["ranking", "error_spans"])
def test_a_kind_without_a_judgebench_form_is_refused_with_the_reason(make_study, name):
    study = _study(make_study, name)
    assert study.kind_impl.judgebench_form is None
    response = client_for(_owner(study)).get(f"/api/studies/{study.pk}/judgebench/")
    assert response.status_code == 409
    body = response.json()
    assert body["kind"] == name and body["judgebench_kinds"] == ["pairwise", "likert"]
    assert "has no Judge-Bench form" in body["detail"]
    assert "pairwise or Likert" in body["detail"]
    with pytest.raises(CommandError) as caught:
        call_command("export_labels", study.pk, "--format", "judgebench")
    assert str(caught.value) == body["detail"] and "\n" not in str(caught.value)


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["pairwise", "criteria", "likert"])
def test_a_kind_with_a_judgebench_form_exports_it(make_study, tmp_path, name):
    study = _study(make_study, name)
    response = client_for(_owner(study)).get(f"/api/studies/{study.pk}/judgebench/")
    assert response.status_code == 200 and response.streaming  # written as it is read
    document = json.loads(b"".join(response.streaming_content))
    assert len(document["instances"]) == study.items.count()
    out = tmp_path / "jb.json"
    call_command("export_labels", study.pk, "--format", "judgebench", "-o", str(out))
    assert json.loads(out.read_text(encoding="utf-8")) == document


def test_the_kinds_say_which_have_a_judgebench_form():
    assert kinds.judgebench_kinds() == ["pairwise", "likert"]
    assert {kinds.get(n).judgebench_form for n in kinds.NAMES} == {"pair", "rating", None}


# --- Hugging Face: every kind, read back with load_dataset ------------------------------------
def _load(directory, tmp_path) -> list[dict]:
    data = datasets.load_dataset(str(directory), cache_dir=str(tmp_path / "hf-cache"))
    assert list(data) == ["train"]
    return data["train"].to_list()


@pytest.mark.django_db
@pytest.mark.parametrize("name", list(STUDIES))
def test_hf_export_of_each_kind_loads_back_to_the_same_labels(make_study, tmp_path, name):
    study = _study(make_study, name)
    expected = _rows(study)
    call_command("export_labels", study.pk, "--format", "hf", str(tmp_path / "ds"))
    assert (tmp_path / "ds" / "data").is_dir()
    rows = _load(tmp_path / "ds", tmp_path)
    assert len(rows) == len(expected) == Annotation.objects.filter(study=study).count()
    for row, want in zip(rows, expected, strict=True):
        texts = {k: row.pop(k) for k in ("input", "input_messages", "outputs")}
        row["scores"] = None if row["scores"] is None else json.loads(row["scores"])
        assert row == want
        annotation = Annotation.objects.get(pk=row["annotation_id"])
        item = annotation.item
        assert texts["input"] == item.input.text
        assert texts["input_messages"] == item.input.metadata.get("conversation")
        assert texts["outputs"] == [
            {"system": o.system.name, "text": o.text, "messages": o.messages}
            for o in item.output_list()
        ]
    if STUDIES[name][2]:  # the conversation input travels as messages
        assert any(r["input_messages"] == CHAT for r in _load(tmp_path / "ds", tmp_path))


@pytest.mark.django_db
def test_hf_export_of_a_study_without_labels_is_refused_in_one_line(make_study, tmp_path):
    """``datasets.load_dataset`` cannot read back a split of no rows (it answers 'Instruction
    "train" corresponds to no data'), so an export with no labels is refused, not written."""
    study = _study(make_study, "ranking", annotated=False)
    with pytest.raises(CommandError, match="has no labels to export") as caught:
        call_command("export_labels", study.pk, "--format", "hf", str(tmp_path / "ds"))
    assert "\n" not in str(caught.value) and not (tmp_path / "ds").exists()
    _annotate(study, ("w1",))
    with pytest.raises(CommandError, match="none match the filters"):
        call_command(
            "export_labels", study.pk, "--format", "hf", str(tmp_path / "ds"), "--annotator", "x"
        )
    assert not (tmp_path / "ds").exists()
