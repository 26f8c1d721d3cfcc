"""Queues that isolate tenants (issue 31 item 1), on real Redis, PostgreSQL and Celery worker
processes laid out as docker-compose.yml lays them out: one researcher's judge runs against
an endpoint that trickles a byte every few seconds hold both judge worker processes, while
another researcher's adaptive round completes and is decided within seconds; the runs are
then cancelled (as from the admin) and stop within seconds."""

import time

import pytest
from django.db import connection

from annotator import judging, services
from annotator.models import JudgeRun
from annotator.tasks import run_judge
from protocol.models import Round
from tests.conftest import pairwise_bundle
from tests.protocol_sim import adaptive_bundle, run_workers
from tests.services import CeleryWorker, wait_for
from tests.unit.test_judge import KEY, judge_servers


@pytest.mark.django_db(transaction=True)
def test_a_stalled_judge_does_not_delay_another_studys_round(tmp_path, settings):
    database = connection.settings_dict["NAME"]
    with judge_servers(tmp_path) as start:
        server = start(trickle=3.0)  # one byte of the answer every 3 s, for ever
        settings.HUMEVAL_JUDGE_ENDPOINTS = [(server.url, "TEST_JUDGE_KEY")]
        env = {"HUMEVAL_JUDGE_ENDPOINTS": f"{server.url}=TEST_JUDGE_KEY", "TEST_JUDGE_KEY": KEY}
        judge_workers = CeleryWorker(
            database, tmp_path / "judge.log", env=env, queues=("judge",), concurrency=2
        )
        round_workers = CeleryWorker(database, tmp_path / "rounds.log", queues=("rounds",))
        judge_workers.start()
        round_workers.start()
        try:
            # researcher 1: two judge runs, one per study, each holding a judge process
            runs = []
            for n in range(2):
                study = services.study_import(pairwise_bundle(), filename=f"j{n}.jsonl")
                run = judging.judge_run_create(
                    study, base_url=server.url, model="slow", concurrency=1
                )
                run_judge.delay(run.pk)
                runs.append(run)
            wait_for(
                lambda: (
                    JudgeRun.objects.filter(state="running").count() == 2
                    and len(server.requests()) >= 2
                ),
                timeout=60,
            )
            # researcher 2: an adaptive study whose first round completes now
            other = services.study_import(adaptive_bundle(budget=200), filename="a.jsonl")
            run_workers(other, n_workers=1, per_worker=1000)
            completed = time.monotonic()
            assert Round.objects.get(study=other, number=1).state in ("closed", "decided")
            wait_for(
                lambda: Round.objects.get(study=other, number=1).state == "decided", timeout=30
            )
            decided_in = time.monotonic() - completed
            assert decided_in < 20, decided_in  # measured 5.4 s: the decision itself, no wait
            assert Round.objects.filter(study=other, number=2).exists()
            # the judge runs were still holding their workers all along
            assert JudgeRun.objects.filter(state="running").count() == 2
            assert "protocol.decide_round[" not in judge_workers.log.read_text()
            assert "protocol.decide_round[" in round_workers.log.read_text()
            # cancelled from the admin's action: both stop within seconds, keys never logged
            asked = time.monotonic()
            assert judging.judge_runs_cancel([r.study for r in runs]) == 2
            wait_for(lambda: JudgeRun.objects.filter(state="cancelled").count() == 2, timeout=30)
            assert time.monotonic() - asked < 10
            for run in JudgeRun.objects.all():
                assert run.key_sent == "the operator's key TEST_JUDGE_KEY"
                assert "cancelled" in run.message
            headers = {r["headers"].get("Authorization") for r in server.requests()}
            assert headers == {f"Bearer {KEY}"}
        finally:
            judge_workers.stop()
            round_workers.stop()
