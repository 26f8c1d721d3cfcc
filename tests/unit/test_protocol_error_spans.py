"""Adaptive collection of an error-span (ESA) study, run live through the services (SQLite,
eager tasks): the kind is scored, so its 0-100 scores reach the protocol as Likert-style
ratings (``score_rows``/``score_scales``) and a pair's preference per input is the sign of
the two outputs' score difference; the answer the worker submits (spans + score) is parsed
against the stored output text."""

import json
import random

import pytest

from annotator import services
from annotator.errors import InvalidAnswer
from annotator.models import Annotation, Item
from protocol import selectors
from protocol.models import ProtocolConfig, Round, SystemPair
from tests.leasing import next_lease
from tests.protocol_sim import MEAN_RATING, adaptive_bundle, run_workers


def make(n_inputs=40, **options):
    data = adaptive_bundle(n_inputs, kind="error_spans", categories=["Accuracy"], **options)
    study = services.study_import(data, filename="esa.jsonl")
    return study, ProtocolConfig.objects.get(study=study)


def esa_answer(assignment, rng: random.Random) -> dict:
    """A worker's form: the first word marked as a minor error, and a score around the
    system's true mean (1-5 mapped onto 0-100) with noise."""
    output = assignment.item.output_list()[0]
    text = output.text
    end = text.index(" ")
    spans = [{"start": 0, "end": end, "severity": "minor", "category": "", "text": text[:end]}]
    score = round(25 * (MEAN_RATING[output.system.name] - 1) + rng.gauss(0, 10))
    return {"spans": json.dumps(spans), "score": str(min(100, max(0, score)))}


@pytest.mark.django_db(transaction=True)
def test_adaptive_error_spans_import_makes_one_item_per_output():
    study, config = make()
    assert study.kind == "error_spans" and study.collection == "adaptive"
    assert SystemPair.objects.filter(study=study).count() == 6
    assert list(Round.objects.values_list("number", "state", "items")) == [(1, "open", 20)]
    assert not Item.objects.filter(study=study, item_outputs__position=1).exists()
    assert config.committed == 20


@pytest.mark.django_db(transaction=True)
def test_a_submitted_answer_is_checked_against_the_stored_output_and_counted_once():
    study, _ = make()
    part = services.participation_enter(study=study, platform="link", external_id="w")
    a = next_lease(participation=part)
    assert a.display_order == [0]
    text = a.item.output_list()[0].text
    bad = {
        "spans": json.dumps([{"start": 0, "end": 2, "severity": "minor", "text": "zz"}]),
        "score": "50",
    }
    with pytest.raises(InvalidAnswer, match="does not match"):
        services.annotation_submit(annotator=part.annotator, token=a.token, data=bad)
    assert not Annotation.objects.exists()
    good = {
        "spans": json.dumps([{"start": 0, "end": 2, "severity": "major", "text": text[:2]}]),
        "score": "40",
    }
    first, created = services.annotation_submit(annotator=part.annotator, token=a.token, data=good)
    again, created_again = services.annotation_submit(
        annotator=part.annotator, token=a.token, data=good
    )
    assert (created, created_again, again.pk) == (True, False, first.pk)
    assert first.answer == {
        "spans": [{"start": 0, "end": 2, "severity": "major", "category": None, "text": text[:2]}],
        "score": 40,
    }
    assert Annotation.objects.count() == 1 and first.scores == {"score": 40}


@pytest.mark.django_db(transaction=True)
def test_simulated_esa_workers_decide_the_rounds_and_the_better_system_wins():
    study, config = make()
    run_workers(study, answer_with=esa_answer)
    assert set(Round.objects.values_list("state", flat=True)) == {"decided"}
    assert not SystemPair.objects.filter(study=study, state="open").exists()
    s1_s3 = SystemPair.objects.get(study=study, system_a__name="s1", system_b__name="s3")
    assert (s1_s3.state, s1_s3.winner.name) == ("decided", "s1")
    for decided in SystemPair.objects.filter(study=study, state="decided"):
        loser = decided.system_b if decided.winner_id == decided.system_a_id else decided.system_a
        assert MEAN_RATING[decided.winner.name] > MEAN_RATING[loser.name]
    assert (
        SystemPair.objects.get(study=study, system_a__name="s3", system_b__name="s4").state
        != "decided"
    )  # equal systems
    config.refresh_from_db()
    assert Annotation.objects.filter(study=study).count() == config.committed
    ratings = selectors.scored_ratings(study)
    assert all(len(ratings.both(p)) > 0 for p in SystemPair.objects.filter(study=study))


@pytest.mark.django_db
def test_an_error_spans_study_refuses_conversation_outputs():
    """Spans are offsets into one text: an output given as a list of messages is refused
    (``Kind.conversation_outputs`` is False) and nothing is stored."""
    from annotator.errors import ImportRejected
    from annotator.models import Study
    from tests.conftest import bundle

    chat = [{"role": "assistant", "content": "Hello."}]
    data = bundle(
        [{"id": "c1", "input": "Hi", "outputs": {"m1": chat, "m2": "Hello there."}}],
        {"kind": "error_spans"},
    )
    with pytest.raises(ImportRejected) as exc:
        services.study_import(data, filename="chat.jsonl")
    assert any("m1" in error for error in exc.value.errors), exc.value.errors
    assert not Study.objects.exists()
