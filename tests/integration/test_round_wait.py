"""No web process waits for a round's decision: with no Celery worker to decide it, the
answer that completes the round is answered at once with the waiting page, which looks
again after a second (``views.FIRST_WAIT_SECONDS``) and keeps looking every second while the
round is being decided (every 5 s once the decision is late), reading only the round's
state; once a worker decides the round, the next look gets round 2's task."""

import re
import time

import pytest
from django.db import connection
from django.test import Client

from annotator import services, views
from annotator.models import Annotator, Assignment
from protocol.models import Round
from tests.protocol_sim import adaptive_bundle
from tests.services import CeleryWorker, wait_for

TOKEN = re.compile(r'name="token" value="([0-9a-f-]+)"')


@pytest.mark.django_db(transaction=True)
def test_the_completing_answer_gets_the_waiting_page_at_once_and_it_looks_again_soon(
    tmp_path, monkeypatch
):
    study = services.study_import(
        adaptive_bundle(n_inputs=200, systems=("s1", "s2")), filename="a.jsonl"
    )
    client = Client()
    client.get(f"/w/{study.public_id}/", {"worker": "w1"})
    token = TOKEN.search(client.get(f"/w/{study.public_id}/task/").content.decode()).group(1)
    for _ in range(4):
        page = client.post(f"/w/{study.public_id}/task/", {"token": token, "answer": "left"})
        token = TOKEN.search(page.content.decode()).group(1)
    sleeping, leased = [], []
    with monkeypatch.context() as patch:  # a web process that waited would sleep
        patch.setattr(time, "sleep", sleeping.append)
        page = client.post(f"/w/{study.public_id}/task/", {"token": token, "answer": "left"})
        lease = views._next
        patch.setattr(
            views, "_next", lambda participation: leased.append(1) or lease(participation)
        )
        looks = [client.get(f"/w/{study.public_id}/task/?look={n}") for n in (1, 2, 4, 5, 9)]
    assert sleeping == []
    assert leased == []  # while the round is being decided a look tries no lease
    assert Round.objects.get(study=study, number=1).state == "closed"  # nobody decided it
    soon = views.FIRST_WAIT_SECONDS
    url = f"/w/{study.public_id}/task/"
    assert f'content="{soon}; url={url}?look=1"' in page.content.decode()
    for n, look in zip((1, 2, 4), looks[:3], strict=True):  # no backing off: work comes soon
        assert f'content="{soon}; url={url}?look={n + 1}"' in look.content.decode()
    for look in looks[3:]:  # a decision that is late (no Celery worker): every 5 seconds
        assert f'content="{views.WAIT_SECONDS}; url={url}?look=6"' in look.content.decode()
    # a worker blocked meanwhile is still sent to the end page by such a look
    blocked = Client()
    blocked.get(f"/w/{study.public_id}/", {"worker": "w2"})
    Annotator.objects.filter(external_id="w2").update(is_blocked=True)
    page_blocked = blocked.get(url, {"look": 1})
    assert page_blocked.status_code == 302 and page_blocked["Location"].endswith("/end/")

    worker = CeleryWorker(connection.settings_dict["NAME"], tmp_path / "celery.log")
    worker.start()  # decides the round left undecided (recovered when it starts)
    try:
        wait_for(lambda: Round.objects.filter(study=study, number=2).exists(), timeout=60)
    finally:
        worker.stop()
    page = client.get(f"/w/{study.public_id}/task/?look=6").content.decode()  # the next look
    lease = Assignment.objects.get(token=TOKEN.search(page).group(1))
    assert lease.item.round_number == 2


@pytest.mark.django_db(transaction=True)
def test_a_worker_with_no_task_while_the_round_collects_waits_the_usual_time(monkeypatch):
    """Round 1 open, its last item leased to another worker: nothing is being decided yet, so
    the answer looks for no task a second time (only the embedded mode decides a round as an
    answer commits) and the waiting page looks again after ``views.FIRST_WAIT_SECONDS``,
    then a second later each time, never more than ``views.WAIT_SECONDS`` apart; a look
    count it did not write counts as none."""
    study = services.study_import(
        adaptive_bundle(n_inputs=200, systems=("s1", "s2")), filename="a.jsonl"
    )
    holder, waiter = Client(), Client()
    holder.get(f"/w/{study.public_id}/", {"worker": "w1"})
    token = TOKEN.search(holder.get(f"/w/{study.public_id}/task/").content.decode()).group(1)
    for _ in range(3):
        page = holder.post(f"/w/{study.public_id}/task/", {"token": token, "answer": "left"})
        token = TOKEN.search(page.content.decode()).group(1)
    waiter.get(f"/w/{study.public_id}/", {"worker": "w2"})
    waiter_token = TOKEN.search(waiter.get(f"/w/{study.public_id}/task/").content.decode())
    looks = []
    with monkeypatch.context() as patch:
        patch.setattr(views, "_next", lambda participation: looks.append(participation))
        page = waiter.post(
            f"/w/{study.public_id}/task/", {"token": waiter_token.group(1), "answer": "left"}
        )
    assert looks == []
    html = page.content.decode()
    assert Round.objects.get(study=study, number=1).state == "open"
    assert 'id="waiting"' in html
    url = f"/w/{study.public_id}/task/"
    assert f'content="{views.FIRST_WAIT_SECONDS}; url={url}?look=1"' in html
    for look, seconds, after in [
        (1, 2, 2), (2, 3, 3), (3, 4, 4), (4, 5, 5), (5, 5, 6), (99, 5, 6),
        ("", 1, 1), ("-1", 1, 1), ("x", 1, 1), ("²", 1, 1), ("1.5", 1, 1), ("9" * 5000, 1, 1),
    ]:  # fmt: skip
        page = waiter.get(url, {"look": look})
        assert page.status_code == 200
        assert f'content="{seconds}; url={url}?look={after}"' in page.content.decode(), look
    assert Round.objects.get(study=study, number=1).state == "open"

    # the round completes while a look tries its lease (another worker's last answer): the
    # page reads the outlook again and looks as soon as a decided round's work may come
    def lease_meeting_the_last_answer(participation):
        Round.objects.filter(study=study, number=1).update(state="closed")

    with monkeypatch.context() as patch:
        patch.setattr(views, "_next", lease_meeting_the_last_answer)
        page = waiter.get(url, {"look": 3})
    assert f'content="{views.FIRST_WAIT_SECONDS}; url={url}?look=4"' in page.content.decode()
