"""``manage.py replay`` on the WMT21 MQM file and on the platform's own export."""

import json

import pytest
from django.core.management import CommandError, call_command

from annotator import services
from tests.conftest import MQM, pairwise_bundle
from tests.leasing import next_lease

OUTCOMES = ("correct", "inversion", "omission", "insertion")


def replay_json(capsys, *args) -> dict:
    call_command("replay", *args, "--json")
    return json.loads(capsys.readouterr().out)


def test_replay_mqm_paper_protocol(capsys):
    result = replay_json(
        capsys,
        "--mqm",
        str(MQM),
        "--systems",
        "Facebook-AI,HuaweiTSC,Nemo",
        "--batch",
        "10",
        "--repeats",
        "2",
        "--paper",
    )
    summary = result["summary"]
    assert abs(sum(summary[k] for k in OUTCOMES) - 1) < 1e-9
    assert 0 < summary["annotations"] <= 1 and result["repeats"] == 2
    call_command(
        "replay", "--mqm", str(MQM), "--systems", "Facebook-AI,HuaweiTSC", "--repeats", "1"
    )
    table = capsys.readouterr().out
    assert "Corr." in table and "Ins." in table


def test_replay_on_a_seeded_subset_of_inputs(capsys):
    args = ("--mqm", str(MQM), "--systems", "Facebook-AI,HuaweiTSC,Nemo", "--repeats", "1")
    first = replay_json(capsys, *args, "--inputs", "60", "--seed", "4")
    again = replay_json(capsys, *args, "--inputs", "60", "--seed", "4")
    assert first["pool"] == 3 * 60 and first["summary"] == again["summary"]
    with pytest.raises(CommandError, match="--inputs"):
        call_command("replay", *args, "--inputs", "100000")


@pytest.mark.django_db
def test_replay_reads_the_platforms_export(tmp_path, capsys):
    import random

    study = services.study_import(
        pairwise_bundle(n_inputs=12, systems=("s1", "s2", "s3"), redundancy=1),
        filename="b.jsonl",
        overrides={"open_links": True, "gold_rate_start": 0.0, "gold_rate_end": 0.0},
    )
    rng = random.Random(1)
    part = services.participation_enter(study=study, platform="link", external_id="w")
    while (a := next_lease(participation=part)) is not None:
        left_text = a.item.output_list()[a.display_order[0]].text
        services.annotation_submit(
            annotator=part.annotator,
            token=a.token,
            data={"answer": "left" if "s1" in left_text or rng.random() < 0.5 else "right"},
        )
    export = tmp_path / "labels.csv"
    call_command("export_labels", str(study.pk), "--format", "csv", "-o", str(export))
    capsys.readouterr()
    result = replay_json(capsys, "--export", str(export), "--batch", "4", "--repeats", "3")
    assert abs(sum(result["summary"][k] for k in OUTCOMES) - 1) < 1e-9
    assert result["pool"] == 36 and result["n_pairs"] == 3


def test_replay_rejects_a_bad_export(tmp_path):
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(CommandError, match="an export needs columns"):
        call_command("replay", "--export", str(bad))
