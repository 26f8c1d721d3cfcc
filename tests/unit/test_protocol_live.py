"""The adaptive protocol run live through the services (SQLite, eager tasks)."""

import random

import pytest

from annotator import services
from annotator.models import Annotation, Assignment, Item
from protocol.models import Decision, ProtocolConfig, Round, SystemPair
from tests.leasing import next_lease
from tests.protocol_sim import adaptive_bundle, lease_to_new_workers, run_workers


def make(budget=None, **options):
    study = services.study_import(
        adaptive_bundle(**options, **({"budget": budget} if budget else {})), filename="a.jsonl"
    )
    return study, ProtocolConfig.objects.get(study=study)


@pytest.mark.django_db(transaction=True)
def test_adaptive_study_starts_with_round_one_only():
    study, config = make()
    assert SystemPair.objects.filter(study=study).count() == 6
    assert list(Round.objects.values_list("number", "state", "items")) == [(1, "open", 30)]
    assert Item.objects.filter(study=study).count() == 30  # batch 5 × 6 pairs
    assert config.committed == 30


@pytest.mark.django_db(transaction=True)
def test_rounds_run_until_every_pair_is_retired():
    study, config = make()
    run_workers(study)
    assert not SystemPair.objects.filter(state="open").exists()
    rounds = list(Round.objects.order_by("number").values_list("state", flat=True))
    assert set(rounds) == {"decided"}
    # one decision per open pair per round, never twice
    for rnd in Round.objects.all():
        assert rnd.decisions.count() == len(set(rnd.decisions.values_list("pair", flat=True)))
    s1_s3 = SystemPair.objects.get(system_a__name="s1", system_b__name="s3")
    assert (s1_s3.state, s1_s3.winner.name) == ("decided", "s1")
    # no decided pair is inverted against the simulated truth
    for pair in SystemPair.objects.filter(state="decided"):
        loser = pair.system_b if pair.winner_id == pair.system_a_id else pair.system_a
        assert pair.winner.name < loser.name or pair.winner.name == "s2" and loser.name in "s3s4"
    config.refresh_from_db()
    assert Annotation.objects.filter(study=study).count() == config.committed


@pytest.mark.django_db(transaction=True)
def test_budget_is_never_overspent_and_ends_exactly_spent():
    study, config = make(budget=47)  # not a multiple of a round
    run_workers(study)
    config.refresh_from_db()
    collected = Annotation.objects.filter(study=study).count()
    assert collected <= 47 and config.committed <= 47
    open_left = SystemPair.objects.filter(state="open").count()
    assert open_left == 0
    by_budget = [p.evidence.get("outcome") == "budget" for p in SystemPair.objects.all()]
    assert collected == 47 or not any(by_budget)  # spent exactly, or closed before it ran out
    assert any(by_budget)  # 47 is too small for these pairs: the budget binds here


@pytest.mark.django_db(transaction=True)
def test_a_budget_left_below_one_item_gives_every_open_pair_its_last_look():
    # redundancy 2 and an odd budget: one annotation is left that no item can use, so the
    # round that spends the rest is the last look (Algorithm 1 at gamma) for every open pair
    study, config = make(budget=61, redundancy=2)
    run_workers(study, per_worker=40)
    config.refresh_from_db()
    assert Annotation.objects.filter(study=study).count() == config.committed == 60
    assert not SystemPair.objects.filter(state="open").exists()
    last = Round.objects.filter(study=study).order_by("number").last()
    for decision in Decision.objects.filter(round=last):
        significant = not 0.025 <= decision.theta <= 0.975
        assert decision.outcome == ("decided" if significant else "exhausted")
    assert Decision.objects.filter(round=last).exists()


@pytest.mark.django_db(transaction=True)
def test_paper_protocol_gives_n_to_every_open_pair():
    study, config = make()
    config.paper = True
    config.save()
    run_workers(study, n_workers=1, per_worker=30)  # complete round 1 only
    first = Round.objects.get(number=1)
    assert first.state == "decided"
    second = Round.objects.get(number=2)
    still_open = Decision.objects.filter(round=first, outcome="open").count()
    assert second.items == 5 * still_open


@pytest.mark.django_db(transaction=True)
def test_decide_is_idempotent():
    from protocol.services import round_decide

    study, config = make()
    run_workers(study, n_workers=1, per_worker=30)
    n = Decision.objects.count()
    assert round_decide(study.pk, 1) is False
    assert Decision.objects.count() == n


@pytest.mark.django_db(transaction=True)
def test_worker_waits_between_rounds_instead_of_ending():
    from django.test import Client

    study, _ = make()
    leased = lease_to_new_workers(study, 30)
    assert (
        all(lease for _, lease in leased) and Round.objects.get().state == "open"
    )  # every item of round 1 leased
    client = Client()
    client.get(f"/w/{study.public_id}/?worker=late")
    page = client.get(f"/w/{study.public_id}/task/")
    assert page.status_code == 200 and "More tasks are coming" in page.content.decode()
    assert 'http-equiv="refresh"' in page.content.decode()
    for part, lease in leased:
        services.annotation_submit(
            annotator=part.annotator, token=lease.token, data={"answer": "tie"}
        )
    assert Round.objects.filter(number=2, state="open").exists()  # decided, next one open
    page = client.get(f"/w/{study.public_id}/task/").content.decode()
    assert 'name="token"' in page and "Task 1" in page
    Round.objects.update(state="decided")  # the protocol opened no further round: the end
    Assignment.objects.filter(state="issued").update(state="returned")
    Item.objects.update(is_active=False)
    response = client.get(f"/w/{study.public_id}/task/")
    assert response.status_code == 302 and response.url.endswith("/end/")


@pytest.mark.django_db(transaction=True)
def test_a_blocked_worker_goes_to_the_end_not_the_waiting_page():
    from django.test import Client

    from annotator.models import Participation

    study, _ = make()
    client = Client()
    client.get(f"/w/{study.public_id}/?worker=cheat")
    assert 'name="token"' in client.get(f"/w/{study.public_id}/task/").content.decode()
    services.participation_set_blocked(Participation.objects.get(), True)
    assert Round.objects.get().state == "open"  # more work is coming, but not for them
    for response in (
        client.get(f"/w/{study.public_id}/task/"),
        client.post(f"/w/{study.public_id}/task/", {"token": "x", "answer": "tie"}),
    ):
        assert response.status_code == 302 and response.url.endswith("/end/")


@pytest.mark.django_db(transaction=True)
def test_a_study_with_criteria_is_decided_on_its_summary_criterion():
    """Criteria ``safe`` then ``overall``: workers answer ``overall`` by the true quality and
    ``safe`` the other way round; the protocol counts ``overall`` (the summary criterion,
    ``Kind.overall_criterion(opts)``), so no decided pair is inverted against the truth."""
    from tests.protocol_sim import answer

    criteria = [{"name": "safe", "label": "Safer?"}, {"name": "overall", "label": "Better?"}]
    study, _ = make(criteria=criteria)
    assert study.kind_impl.overall_criterion(study.kind_options()) == "overall"
    flip = {"left": "right", "right": "left", "tie": "tie"}
    rng = random.Random(0)
    for w in range(200):
        part = services.participation_enter(study=study, platform="link", external_id=f"c{w}")
        a = next_lease(participation=part)
        if a is None:
            break
        side = answer(a, rng, accuracy=1.0)
        data = {"answer-overall": side, "answer-safe": flip[side]}
        services.annotation_submit(annotator=part.annotator, token=a.token, data=data)
    decided = SystemPair.objects.filter(state="decided")
    assert decided.exists()
    for pair in decided:
        loser = pair.system_b if pair.winner_id == pair.system_a_id else pair.system_a
        assert pair.winner.name < loser.name or pair.winner.name == "s2" and loser.name in "s3s4"


@pytest.mark.django_db
def test_a_pairs_pool_is_every_input_but_the_gold_ones():
    from protocol import selectors
    from tests.conftest import bundle

    records = [{"id": f"q{i}", "input": "?", "outputs": {"a": "1", "b": "2"}} for i in range(3)]
    records += [{"id": "gold", "input": "?", "gold": "a", "outputs": {"a": "1", "b": "2"}}]
    study = services.study_import(
        bundle(records, {"kind": "pairwise", "collection": "adaptive", "batch_size": 1}),
        filename="a.jsonl",
    )
    pairs = list(SystemPair.objects.filter(study=study))
    ids = dict(study.inputs.values_list("pk", "external_id"))
    pools = [{ids[i] for i in pool} for pool in selectors.pair_pools(study, pairs)]
    assert len(pairs) == 1 and pools == [{"q0", "q1", "q2"}]
