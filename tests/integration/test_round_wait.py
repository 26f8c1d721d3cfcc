"""The answer that completes a round waits for the decision only so long: with no Celery
worker to decide it, the answer is shown the waiting page after
``HUMEVAL_NEXT_ROUND_WAIT_SECONDS``; once a worker decides the round, the next look gets
round 2's task."""

import re
import time

import pytest
from django.db import connection
from django.test import Client

from annotator import services
from annotator.models import Assignment
from protocol.models import Round
from tests.protocol_sim import adaptive_bundle
from tests.services import CeleryWorker, wait_for

TOKEN = re.compile(r'name="token" value="([0-9a-f-]+)"')


@pytest.mark.django_db(transaction=True)
def test_without_a_celery_worker_the_completing_answer_waits_only_the_set_time(settings, tmp_path):
    settings.HUMEVAL_NEXT_ROUND_WAIT_SECONDS = 1.5
    study = services.study_import(
        adaptive_bundle(n_inputs=200, systems=("s1", "s2")), filename="a.jsonl"
    )
    client = Client()
    client.get(f"/w/{study.public_id}/", {"worker": "w1"})
    token = TOKEN.search(client.get(f"/w/{study.public_id}/task/").content.decode()).group(1)
    for _ in range(4):
        page = client.post(f"/w/{study.public_id}/task/", {"token": token, "answer": "left"})
        token = TOKEN.search(page.content.decode()).group(1)
    started = time.monotonic()
    page = client.post(f"/w/{study.public_id}/task/", {"token": token, "answer": "left"})
    waited = time.monotonic() - started
    assert 'id="waiting"' in page.content.decode()  # nobody decided the round
    assert 1.5 <= waited < 4, waited
    assert Round.objects.get(study=study, number=1).state == "closed"

    worker = CeleryWorker(connection.settings_dict["NAME"], tmp_path / "celery.log")
    worker.start()  # decides the round left undecided (recovered when it starts)
    try:
        wait_for(lambda: Round.objects.filter(study=study, number=2).exists(), timeout=60)
    finally:
        worker.stop()
    page = client.get(f"/w/{study.public_id}/task/").content.decode()
    lease = Assignment.objects.get(token=TOKEN.search(page).group(1))
    assert lease.item.round_number == 2
