"""A judge run's heartbeat (``JudgeRun.heartbeat_at``): written while the run runs, also
while a call hangs; a run whose worker died stops writing it, is shown stale in the admin
after ``HUMEVAL_JUDGE_STALE_SECONDS``, is cancelled at the first ask, and the study can be
rated again."""

from datetime import timedelta

import pytest
from django.utils import timezone

from annotator import judging
from annotator.models import JudgeRun
from tests.conftest import boss_client, pairwise_bundle

pytestmark = pytest.mark.django_db


def a_run(study, **fields) -> JudgeRun:
    return JudgeRun.objects.create(
        study=study, base_url="http://judge.invalid/v1", model="m", key_source="none", **fields
    )


def test_a_running_judge_run_writes_its_heartbeat(make_study, monkeypatch):
    study = make_study(pairwise_bundle())
    run = a_run(study)
    beats = []

    def hanging_run(study, *, should_stop, **kwargs):
        beats.append(JudgeRun.objects.get(pk=run.pk).heartbeat_at)  # written at the start
        JudgeRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(1))
        should_stop()  # asked while a call hangs: the heartbeat is written again
        beats.append(JudgeRun.objects.get(pk=run.pk).heartbeat_at)
        assert not JudgeRun.objects.get(pk=run.pk).is_stale
        return judging.RunResult()

    monkeypatch.setattr(judging, "HEARTBEAT_SECONDS", 0)
    monkeypatch.setattr(judging, "run_key", lambda run: (None, "no key"))
    monkeypatch.setattr(judging, "judge_run", hanging_run)
    judging.judge_run_execute(run.pk)
    run.refresh_from_db()
    assert beats[0] is not None and beats[0] >= run.started_at
    assert beats[1] > timezone.now() - timedelta(seconds=60)
    assert run.state == JudgeRun.State.DONE


def test_a_run_whose_worker_died_is_shown_stale_and_cancelled_at_once(make_study, settings):
    study = make_study(pairwise_bundle())
    silent = timezone.now() - timedelta(seconds=settings.HUMEVAL_JUDGE_STALE_SECONDS + 5)
    dead = a_run(study, state="running", started_at=silent, heartbeat_at=silent)
    live = a_run(study, state="running", started_at=silent, heartbeat_at=timezone.now())
    assert dead.is_stale and not live.is_stale
    client = boss_client()
    form = {"action": "run_judge", "_selected_action": [study.pk]}
    page = client.post("/admin/annotator/study/", form).content.decode()
    assert page.count("(stale: its worker stopped") == 1
    assert judging.judge_runs_cancel([study]) == 2
    dead.refresh_from_db()
    live.refresh_from_db()
    assert dead.state == JudgeRun.State.CANCELLED and "no heartbeat" in dead.message
    assert live.state == JudgeRun.State.RUNNING and live.cancel_requested  # asked to stop
    page = client.post("/admin/annotator/study/", form).content.decode()
    assert "stale" not in page and "its worker had stopped" in page
