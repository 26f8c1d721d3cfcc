"""``demo`` and ``simulate_crowd``: simulated workers run the demo's adaptive study through
the services until the protocol has decided it (SQLite, eager Celery: rounds decide in
process)."""

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotator.models import Annotation, Participation, Study
from protocol.models import Decision, ProtocolConfig, Round, SystemPair
from tests.conftest import ROOT, boss_client

ADAPTIVE_DEMO = (ROOT / "demo" / "adaptive_demo.jsonl").read_text(encoding="utf-8")
TRUTH = json.loads(ADAPTIVE_DEMO.splitlines()[1])["metadata"]["truth"]


@pytest.fixture
def demo(transactional_db, capsys):
    call_command("demo")
    capsys.readouterr()
    return {s.collection: s for s in Study.objects.filter(kind="pairwise")}


def _run(capsys, study: Study, *args: str) -> str:
    call_command("simulate_crowd", str(study.pk), *args)
    return capsys.readouterr().out


def test_simulate_crowd_decides_the_demo_adaptive_study(demo, capsys):
    study = demo["adaptive"]
    out = _run(capsys, study, "--until-done", "--seed", "0")
    assert "(no work left)" in out and f"/studies/{study.pk}/protocol/" in out
    rounds = list(Round.objects.filter(study=study).order_by("number"))
    assert len(rounds) >= 2 and {r.state for r in rounds} == {"decided"}
    for rnd in rounds:  # every round decided each pair open in it, once
        assert rnd.decisions.count() == rnd.decisions.values("pair").distinct().count() > 0
    pairs = list(SystemPair.objects.filter(study=study).select_related("winner"))
    assert len(pairs) == 6 and not [p for p in pairs if p.state == "open"]
    decided = [p for p in pairs if p.state == "decided"]
    assert len(decided) >= 4
    for pair in decided:  # the simulated truth is found, never inverted
        loser = pair.system_b if pair.winner_id == pair.system_a_id else pair.system_a
        assert TRUTH[pair.winner.name] > TRUTH[loser.name]
    config = ProtocolConfig.objects.get(study=study)
    collected = Annotation.objects.filter(study=study, source="platform").count()
    assert collected == config.committed <= study.budget
    assert collected == sum(r.committed for r in rounds)
    assert Participation.objects.filter(study=study, annotator__platform="simulated").count()
    # the dashboard shows the rounds and the decided order
    client = boss_client()
    page = client.get(f"/studies/{study.pk}/protocol/").content.decode()
    assert f"Collected {collected} of a budget of {study.budget} annotations in {len(rounds)}" in (
        page
    )
    assert "<strong>expert-preferred</strong>" in page
    # coming back finds nothing more to do, and changes nothing
    again = _run(capsys, study, "--until-done", "--seed", "0")
    assert again.startswith("0 answers")
    assert Decision.objects.filter(round__study=study).count() == sum(
        r.decisions.count() for r in rounds
    )


def test_workers_answers_and_cap(demo, capsys):
    study = demo["adaptive"]
    out = _run(capsys, study, "--workers", "2", "--seed", "3")
    # without --until-done each worker gives at most 10 answers
    assert out.startswith("20 answers from 2 simulated workers")
    out = _run(capsys, study, "--workers", "4", "--seed", "4", "--max-answers", "7")
    assert out.startswith("7 answers from") and "reached --max-answers 7" in out
    assert Annotation.objects.filter(study=study, source="platform").count() == 27
    # round 1 (30 items) is not complete yet: nothing decided
    assert not Decision.objects.filter(round__study=study).exists()


def test_known_answers_drive_a_non_adaptive_study(demo, capsys):
    study = demo["all"]  # LLMBar: the expert label is every item's known answer
    out = _run(capsys, study, "--workers", "3", "--max-answers", "12", "--seed", "1")
    assert out.startswith("12 answers from 3 simulated workers")
    assert "random" not in out and "/protocol/" not in out
    labels = Annotation.objects.filter(study=study, source="platform").select_related("item")
    agree = sum(a.value == a.item.expected.get("value") for a in labels)
    assert len(labels) == 12 and agree >= 8  # workers are 75-95 % accurate


def test_bad_arguments_are_refused(demo):
    with pytest.raises(CommandError, match="no study with id 999"):
        call_command("simulate_crowd", "999")
    with pytest.raises(CommandError, match="--workers must be at least 1"):
        call_command("simulate_crowd", str(demo["adaptive"].pk), "--workers", "0")


@pytest.mark.django_db(transaction=True)
def test_simulated_workers_answer_every_criterion_and_the_required_reason(make_study):
    """A study with criteria, strength and a required reason: the simulated crowd's answers
    pass the kind's own validation (Kind.simulate_answer → kinds.criteria.simulate_form)."""
    from annotator.simulated_crowd import crowd_run
    from tests.conftest import pairwise_bundle

    criteria = [{"name": "helpful", "label": "Helpful?"}, {"name": "safe", "label": "Safe?"}]
    study = make_study(
        pairwise_bundle(4, criteria=criteria, strength=True, rationale="required", redundancy=1)
    )
    crowd_run(study, workers=2, seed=3, until_done=True)
    labels = list(Annotation.objects.filter(study=study))
    assert len(labels) == 4
    for label in labels:
        assert set(label.answer["criteria"]) == {"helpful", "safe"}
        assert label.answer["rationale"] and label.raw_answer.startswith(("left", "right", "="))
