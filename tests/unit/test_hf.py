"""Hugging Face datasets in (``import_study`` with ``--map``) and out (``export_labels
--format hf``), on local files only: the Hub paths need the network."""

from __future__ import annotations

import io
import json

import datasets
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotator.models import Output, Study
from tests.conftest import pairwise_bundle
from tests.unit.test_report import annotate

ROWS = {
    "qid": ["q1", "q2", "q3"],
    "prompt": ["What is 2+2?", "Name a colour.", "Say hi."],
    "ans_a": ["4", "red", "hi"],
    "ans_b": ["four", "blue", "hello"],
}
MAP = "id=qid,input=prompt,outputs.m1=ans_a,outputs.m2=ans_b"


def _import(source, *args) -> Study:
    out = io.StringIO()
    call_command("import_study", str(source), "--kind", "pairwise", *args, stdout=out)
    return Study.objects.get(pk=int(out.getvalue()))


def _contents(study: Study) -> dict:
    return {
        (o.input.external_id, o.input.text, o.system.name): o.text
        for o in Output.objects.filter(input__study=study).select_related("input", "system")
    }


EXPECTED = {
    (q, p, s): ROWS[col][i]
    for i, (q, p) in enumerate(zip(ROWS["qid"], ROWS["prompt"], strict=True))
    for s, col in (("m1", "ans_a"), ("m2", "ans_b"))
}


@pytest.mark.django_db
def test_save_to_disk_dataset_is_imported_through_the_map(tmp_path):
    datasets.Dataset.from_dict(ROWS).save_to_disk(str(tmp_path / "saved"))
    study = _import(tmp_path / "saved", "--map", MAP)
    assert _contents(study) == EXPECTED
    assert sorted(study.systems.values_list("name", flat=True)) == ["m1", "m2"]
    assert study.items.count() == 3


@pytest.mark.django_db
def test_parquet_file_and_hub_layout_directory(tmp_path):
    data = datasets.Dataset.from_dict(ROWS)
    data.to_parquet(str(tmp_path / "rows.parquet"))
    assert _contents(_import(tmp_path / "rows.parquet", "--map", MAP)) == EXPECTED
    hub = tmp_path / "snapshot"
    (hub / "data").mkdir(parents=True)
    data.to_parquet(str(hub / "data" / "train-00000-of-00001.parquet"))
    (hub / "README.md").write_text("---\nlicense: mit\n---\n# a dataset\n")
    study = _import(hub, "--map", MAP, "--name", "from the hub layout")
    assert _contents(study) == EXPECTED and study.name == "from the hub layout"


@pytest.mark.django_db
def test_jsonl_file_in_hub_layout_with_a_map(tmp_path):
    hub = tmp_path / "repo"
    (hub / "data").mkdir(parents=True)
    rows = [dict(zip(ROWS, values, strict=True)) for values in zip(*ROWS.values(), strict=True)]
    (hub / "data" / "train.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert _contents(_import(hub / "data" / "train.jsonl", "--map", MAP)) == EXPECTED
    assert _contents(_import(hub, "--map", MAP)) == EXPECTED


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ("id=qid,input=question,outputs.m1=ans_a,outputs.m2=ans_b", "'question'"),
        ("id=qid,input=prompt", "no outputs"),
        ("idx=qid,outputs.m1=ans_a", "unknown field 'idx'"),
        ("input", "not field=column"),
    ],
)
def test_a_bad_map_names_the_columns_and_writes_nothing(tmp_path, mapping, message):
    datasets.Dataset.from_dict(ROWS).save_to_disk(str(tmp_path / "saved"))
    with pytest.raises(CommandError) as err:
        _import(tmp_path / "saved", "--map", mapping)
    assert message in str(err.value)
    if "column" in str(err.value) and message.startswith("'"):
        assert "its columns are: qid, prompt, ans_a, ans_b" in str(err.value)
    assert not Study.objects.exists()


@pytest.mark.django_db
def test_a_row_the_bundle_refuses_is_named_and_nothing_written(tmp_path):
    bad = dict(ROWS, ans_b=["four", "", "hello"])  # an empty output in row 2
    datasets.Dataset.from_dict(bad).save_to_disk(str(tmp_path / "saved"))
    with pytest.raises(CommandError, match="input 'q2'.*empty"):
        _import(tmp_path / "saved", "--map", MAP)
    assert not Study.objects.exists()


def _load(directory, tmp_path) -> list[dict]:
    """The exported dataset as ``datasets.load_dataset`` reads it (one ``train`` split)."""
    return datasets.load_dataset(str(directory), cache_dir=str(tmp_path / "cache"))[
        "train"
    ].to_list()


@pytest.mark.django_db
def test_export_hf_gives_the_jsonl_rows_and_a_card_with_the_settings(make_study, tmp_path):
    study = make_study(pairwise_bundle(n_inputs=3, systems=("s1", "s2")), redundancy=2)
    annotate(study, workers=("w1", "w2"))
    call_command("export_labels", study.pk, "--format", "jsonl", "-o", str(tmp_path / "l.jsonl"))
    expected = [json.loads(line) for line in (tmp_path / "l.jsonl").read_text().splitlines()]
    call_command("export_labels", study.pk, "--format", "hf", str(tmp_path / "ds"))
    rows = _load(tmp_path / "ds", tmp_path)
    for row in rows:
        row["scores"] = None if row["scores"] is None else json.loads(row["scores"])
        for text in ("input", "input_messages", "outputs"):  # the texts judged
            del row[text]
    assert len(expected) == 6 and rows == expected
    card = (tmp_path / "ds" / "README.md").read_text()
    header = card.split("---\n")[1]
    for text in ("kind: pairwise", "redundancy: 2", "collection:", "config_version: 1", "- s1"):
        assert text in header, text
    assert '**systems**: ["s1", "s2"]' in card
    with pytest.raises(CommandError, match="not empty"):
        call_command("export_labels", study.pk, "--format", "hf", str(tmp_path / "ds"))


@pytest.mark.django_db
def test_likert_scores_survive_the_hf_export(make_study, tmp_path):
    extra = {"criteria": [{"name": "fluency", "scale": [1, 5]}]}
    study = make_study(pairwise_bundle(n_inputs=2, kind="likert", **extra), redundancy=1)
    annotate(study, workers=("w1",), likert=lambda rng: {"fluency": rng.randint(1, 5)})
    call_command("export_labels", study.pk, "--format", "hf", str(tmp_path / "ds"))
    rows = _load(tmp_path / "ds", tmp_path)
    assert len(rows) == 4 and all(1 <= json.loads(r["scores"])["fluency"] <= 5 for r in rows)
    assert "fluency" in (tmp_path / "ds" / "README.md").read_text()


@pytest.mark.django_db
def test_without_the_library_the_error_names_the_extra(tmp_path, monkeypatch, make_study):
    datasets.Dataset.from_dict(ROWS).save_to_disk(str(tmp_path / "saved"))
    monkeypatch.setitem(__import__("sys").modules, "datasets", None)  # as if not installed
    with pytest.raises(CommandError, match=r"pip install 'humeval\[hf\]'"):
        _import(tmp_path / "saved", "--map", MAP)
    assert not Study.objects.exists()
    study = make_study()
    with pytest.raises(CommandError, match=r"pip install 'humeval\[hf\]'"):
        call_command("export_labels", study.pk, "--format", "hf", str(tmp_path / "out"))


def test_a_hub_dataset_out_of_reach_is_named_with_the_reason(db, monkeypatch):
    """Without network the Hub raises ConnectionError, an OSError without ``strerror``:
    the command said "cannot read hub:…: None"."""
    from formats import hf

    def unreachable(source, split=None):
        raise ConnectionError(f"Couldn't reach '{source[4:]}' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(hf, "open_rows", unreachable)
    with pytest.raises(CommandError) as caught:
        call_command("import_study", "hub:someone/data")
    assert str(caught.value) == (
        "cannot read hub:someone/data: Couldn't reach 'someone/data' on the Hub "
        "(LocalEntryNotFoundError)"
    )
