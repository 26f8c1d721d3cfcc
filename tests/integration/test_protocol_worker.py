"""The adaptive protocol with a real Celery worker: rounds are decided by the worker,
pairs retire, the budget holds (pairwise, Likert and ranking studies); a worker killed mid-decision
leaves the round to be decided exactly once after restart."""

import time

import pytest
from django.db import connection
from django.db.models import Count

from annotator import services
from annotator.models import Annotation, Item
from protocol.models import Decision, ProtocolConfig, Round, SystemPair
from tests.protocol_sim import QUALITY, adaptive_bundle, likert_bundle, ranking_bundle, run_workers
from tests.services import CeleryWorker, RoundLock, wait_for

#: The tests on the session's shared Celery worker (``celery_worker``, here and in
#: test_celery_worker.py / test_protocol_worker.py) run in one process, one after another:
#: its worker starts once (a start took 10-25 s on the loaded 2-core machine).
pytestmark = pytest.mark.xdist_group("shared-celery-worker")


def work_until_done(study, timeout: float = 120) -> None:
    """Simulated workers annotate whatever is released; wait for the worker's decisions
    between rounds; stop when no pair is open."""
    deadline = time.monotonic() + timeout
    seed = 0
    while SystemPair.objects.filter(study=study, state="open").exists():
        assert time.monotonic() < deadline, "the protocol did not finish in time"
        seed += 1
        run_workers(study, n_workers=50, seed=seed)
        open_round = Round.objects.filter(study=study).order_by("-number").first()
        wait_for(
            lambda r=open_round: (
                Round.objects.get(pk=r.pk).state == "decided"
                or Item.objects.filter(study=study, n_taken__lt=1, is_gold=False).exists()
            ),
            timeout=60,
        )


@pytest.mark.django_db(transaction=True)
def test_worker_decides_rounds_until_pairs_retire_within_budget(celery_worker):
    study = services.study_import(adaptive_bundle(budget=120), filename="a.jsonl")
    work_until_done(study)
    config = ProtocolConfig.objects.get(study=study)
    collected = Annotation.objects.filter(study=study).count()
    assert collected == config.committed <= 120
    # the budget is spent exactly, or every pair was closed by the decision function
    # (decided, equivalent, or futile) before the budget ran out
    by_budget = [p.evidence.get("outcome") == "budget" for p in SystemPair.objects.all()]
    assert collected == 120 or not any(by_budget)
    assert set(Round.objects.filter(study=study).values_list("state", flat=True)) == {"decided"}
    for rnd in Round.objects.filter(study=study):
        pairs = list(rnd.decisions.values_list("pair", flat=True))
        assert len(pairs) == len(set(pairs))
    assert SystemPair.objects.get(study=study, system_a__name="s1", system_b__name="s3").winner
    assert "protocol.decide_round" in celery_worker.log.read_text()


@pytest.mark.django_db(transaction=True)
def test_worker_decides_likert_rounds_with_shared_items_within_budget(celery_worker):
    study = services.study_import(likert_bundle(budget=70), filename="l.jsonl")
    assert Round.objects.get(study=study).items == 20  # 5 inputs × 4 outputs for 6 pairs
    work_until_done(study)
    config = ProtocolConfig.objects.get(study=study)
    collected = Annotation.objects.filter(study=study).count()
    assert collected == config.committed <= 70
    rounds = list(Round.objects.filter(study=study).values_list("state", flat=True))
    assert len(rounds) >= 2 and set(rounds) == {"decided"}
    for rnd in Round.objects.filter(study=study):
        pairs = list(rnd.decisions.values_list("pair", flat=True))
        assert len(pairs) == len(set(pairs))
    outputs = list(
        Item.objects.filter(study=study).values_list("input_id", "item_outputs__output_id")
    )
    assert len(outputs) == len(set(outputs))  # an output's item serves every pair
    by_budget = [p.evidence.get("outcome") == "budget" for p in SystemPair.objects.all()]
    assert 70 - collected <= 1 or not any(by_budget)
    s1_s3 = SystemPair.objects.get(study=study, system_a__name="s1", system_b__name="s3")
    assert s1_s3.winner.name == "s1"
    assert sum(s1_s3.evidence["human"]) == s1_s3.evidence["used"] <= 40  # inputs
    assert "protocol.decide_round" in celery_worker.log.read_text()


@pytest.mark.django_db(transaction=True)
def test_worker_decides_ranking_rounds_within_budget(celery_worker):
    """An adaptive ranking study (4 systems, 3 per item, redundancy 2): every round's items
    rank three outputs, the budget counts one annotation per ranking, and the rounds the
    worker decides read the three pair preferences of each ranking."""
    study = services.study_import(
        ranking_bundle(n_inputs=60, budget=90, redundancy=2), filename="r.jsonl"
    )
    work_until_done(study)
    config = ProtocolConfig.objects.get(study=study)
    collected = Annotation.objects.filter(study=study).count()
    assert collected == config.committed <= 90
    rounds = list(Round.objects.filter(study=study).values_list("state", flat=True))
    assert len(rounds) >= 2 and set(rounds) == {"decided"}
    sizes = (
        Item.objects.filter(study=study)
        .annotate(n=Count("item_outputs"))
        .values_list("n", flat=True)
    )
    assert set(sizes) == {3}
    for rnd in Round.objects.filter(study=study):
        pairs = list(rnd.decisions.values_list("pair", flat=True))
        assert len(pairs) == len(set(pairs))
        assert rnd.committed == rnd.items * 2
    s1_s3 = SystemPair.objects.get(study=study, system_a__name="s1", system_b__name="s3")
    assert s1_s3.winner.name == "s1"
    for pair in SystemPair.objects.filter(study=study, state="decided"):
        assert QUALITY[pair.winner.name] == max(
            QUALITY[pair.system_a.name], QUALITY[pair.system_b.name]
        )
        # every label of the pair is one ranking's preference, one per annotation
        assert sum(pair.evidence["human"]) == pair.evidence["used"]
    by_budget = [p.evidence.get("outcome") == "budget" for p in SystemPair.objects.all()]
    assert 90 - collected < 2 or not any(by_budget)
    assert "protocol.decide_round" in celery_worker.log.read_text()


def blocked_on_round_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query ILIKE '%%protocol_round%%FOR UPDATE%%'"
        )
        return cursor.fetchone()[0] > 0


@pytest.mark.django_db(transaction=True)
def test_killed_worker_mid_decision_decides_round_exactly_once(tmp_path):
    study = services.study_import(adaptive_bundle(), filename="a.jsonl")
    # round 1 is completed while no worker runs: its decision waits in Redis
    run_workers(study, n_workers=1, per_worker=30)
    assert Round.objects.get(study=study, number=1).state == "closed"
    lock = RoundLock(study, 1)
    lock.start()
    worker = CeleryWorker(connection.settings_dict["NAME"], tmp_path / "first.log")
    worker.start()
    try:
        wait_for(blocked_on_round_lock, timeout=60)  # the task is inside round_decide
        worker.kill()  # kill -9, mid-decision
    finally:
        lock.release()
    assert Round.objects.get(study=study, number=1).state == "closed"
    assert not Decision.objects.exists()
    restarted = CeleryWorker(connection.settings_dict["NAME"], tmp_path / "second.log")
    restarted.start()
    try:
        wait_for(lambda: Round.objects.get(study=study, number=1).state == "decided", timeout=60)
        time.sleep(2)  # any duplicate delivery has had its chance
    finally:
        restarted.stop()
    first = Round.objects.get(study=study, number=1)
    assert first.decisions.count() == 6
    assert Decision.objects.filter(round__number=1).count() == 6
    assert Round.objects.filter(study=study, number=2).count() == 1
