"""Leases at the end of a round: an idle lease goes to a worker who has no item, a
heartbeat keeps an open page's lease, a late answer to a handed-on lease is refused, and
the worker whose answer completes a round lands on the next round's task."""

import re
from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from annotator import services
from annotator.errors import AssignmentExpired, AssignmentNotFound
from annotator.models import Annotation, Assignment, Item
from protocol.models import Round
from tests.leasing import next_lease
from tests.protocol_sim import adaptive_bundle


def worker(study, name: str):
    return services.participation_enter(study=study, platform="link", external_id=name)


def idle() -> timedelta:
    return timedelta(seconds=settings.HUMEVAL_LEASE_IDLE_SECONDS + 1)


def answer_all(part, now=None) -> list[int]:
    """The worker answers until they find nothing; the items they answered."""
    got = []
    while (a := next_lease(participation=part, now=now)) is not None:
        services.annotation_submit(
            annotator=part.annotator, token=a.token, data={"answer": "left"}, now=now
        )
        got.append(a.item_id)
    return got


def test_idle_lease_goes_to_a_worker_who_has_none_and_its_late_answer_is_refused(make_study):
    study = make_study(redundancy=1)  # 3 items, one slot each
    w1, w2 = worker(study, "w1"), worker(study, "w2")
    held = next_lease(participation=w1)  # w1 then walks away
    assert len(answer_all(w2)) == 2  # the other two; the held one is not theirs yet
    assert Assignment.objects.get(pk=held.pk).state == "issued"
    later = timezone.now() + idle()
    assert answer_all(w2, now=later) == [held.item_id]  # idle: handed to w2
    assert Assignment.objects.get(pk=held.pk).state == "expired"
    with pytest.raises(AssignmentExpired, match="ran out"):  # w1 comes back: not stored
        services.annotation_submit(
            annotator=w1.annotator, token=held.token, data={"answer": "right"}
        )
    assert Annotation.objects.count() == 3
    assert Annotation.objects.filter(annotator=w1.annotator).count() == 0
    assert all(i.n_taken == i.n_done == 1 for i in Item.objects.all())


def test_a_lease_whose_page_beats_is_kept_and_its_answer_counts(make_study):
    study = make_study(redundancy=1)
    w1, w2 = worker(study, "w1"), worker(study, "w2")
    held = next_lease(participation=w1)
    answer_all(w2)
    now = timezone.now()
    beat = now + timedelta(seconds=settings.HUMEVAL_LEASE_IDLE_SECONDS - 5)
    services.assignment_renew(participation=w1, token=held.token, now=beat)
    assert answer_all(w2, now=now + idle()) == []  # renewed: not idle, w2 gets nothing
    lease = Assignment.objects.get(pk=held.pk)
    assert lease.state == "issued" and lease.seen_at == beat
    assert lease.expires_at == held.expires_at  # a beat never lengthens the lease
    _, created = services.annotation_submit(
        annotator=w1.annotator, token=held.token, data={"answer": "left"}
    )
    assert created and all(i.n_taken == i.n_done == 1 for i in Item.objects.all())


def test_renew_refuses_someone_elses_unknown_and_closed_leases(make_study):
    study = make_study(redundancy=1)
    w1, w2 = worker(study, "w1"), worker(study, "w2")
    a1 = next_lease(participation=w1)
    for token in (a1.token, "not-a-uuid", "00000000-0000-0000-0000-000000000000"):
        with pytest.raises(AssignmentNotFound):
            services.assignment_renew(participation=w2, token=token)
    past_expiry = a1.expires_at + timedelta(seconds=1)
    with pytest.raises(AssignmentExpired):
        services.assignment_renew(participation=w1, token=a1.token, now=past_expiry)
    assert Assignment.objects.get(pk=a1.pk).seen_at == a1.seen_at  # nothing changed
    services.annotation_submit(annotator=w1.annotator, token=a1.token, data={"answer": "left"})
    with pytest.raises(AssignmentExpired):
        services.assignment_renew(participation=w1, token=a1.token)


def test_an_idle_lease_stays_with_its_holder_when_the_asker_could_not_take_it(make_study):
    study = make_study(redundancy=2)  # 3 items × 2 slots
    w1, w2 = worker(study, "w1"), worker(study, "w2")
    assert len(answer_all(w2)) == 3  # w2 has seen every item
    held = next_lease(participation=w1)
    w3 = worker(study, "w3")
    assert len(answer_all(w3)) == 2  # the two other free slots; the held one is not idle
    later = timezone.now() + idle()
    assert next_lease(participation=w2, now=later) is None
    assert Assignment.objects.get(pk=held.pk).state == "issued"  # not taken for nothing
    assert next_lease(participation=w3, now=later).item_id == held.item_id
    assert Assignment.objects.get(pk=held.pk).state == "expired"


def test_a_worker_at_their_cap_reclaims_nothing(make_study):
    study = make_study(redundancy=1, items_per_worker=1)
    w1, w2 = worker(study, "w1"), worker(study, "w2")
    held = next_lease(participation=w1)
    assert len(answer_all(w2)) == 1
    assert next_lease(participation=w2, now=timezone.now() + idle()) is None
    assert Assignment.objects.get(pk=held.pk).state == "issued"


def enter(client: Client, study, name: str) -> str:
    assert client.get(f"/w/{study.public_id}/", {"worker": name}).status_code == 302
    page = client.get(f"/w/{study.public_id}/task/").content.decode()
    return re.search(r'name="token" value="([0-9a-f-]+)"', page).group(1)


def test_renew_endpoint_is_bound_to_the_workers_own_lease(
    make_study, settings, frozen_throttle_window
):
    from django.core.cache import cache

    cache.clear()
    settings.HUMEVAL_THROTTLE_RENEW = "3/min"
    study = make_study(redundancy=1)
    url = f"/w/{study.public_id}/renew/"
    one, two = Client(), Client()
    token = enter(one, study, "w1")
    other = enter(two, study, "w2")
    page = one.get(f"/w/{study.public_id}/task/").content.decode()
    script = re.search(r'<script src="/static/humeval/lease.js"[^>]*>', page).group(0)
    assert f'data-url="{url}"' in script and f'data-token="{token}"' in script
    assert Client().post(url, {"token": token}).status_code == 403  # no participation
    assert one.get(url).status_code == 405
    response = one.post(url, {"token": token})
    assert response.status_code == 200 and response.json() == {"renewed": True}
    refused = one.post(url, {"token": other})  # someone else's lease
    assert refused.status_code == 404 and refused.json()["error"] == "assignment_not_found"
    assert Assignment.objects.get(token=other).seen_at < Assignment.objects.get(token=token).seen_at
    assert one.post(url, {"token": token}).status_code == 200  # the third in a minute
    assert one.post(url, {"token": token}).status_code == 429  # the fourth
    assert Annotation.objects.count() == 0
    cache.clear()


def test_renew_after_the_answer_is_refused(make_study):
    study = make_study(redundancy=1)
    client = Client()
    token = enter(client, study, "w1")
    client.post(f"/w/{study.public_id}/task/", {"token": token, "answer": "left"})
    refused = client.post(f"/w/{study.public_id}/renew/", {"token": token})
    # a stale page is told, without an error status (which browsers log as an error)
    assert refused.status_code == 200
    assert refused.json()["renewed"] is False and refused.json()["error"] == "assignment_expired"


def test_the_answer_that_completes_a_round_is_answered_with_the_next_rounds_task(
    transactional_db,
):
    """Embedded mode (the decision runs when the completing answer commits): the worker
    who completes round 1 gets round 2's first task, not the waiting page."""
    study = services.study_import(
        adaptive_bundle(n_inputs=200, systems=("s1", "s2")), filename="a.jsonl"
    )
    client = Client()
    token = enter(client, study, "w1")
    pages = []
    for _ in range(5):  # round 1: batch 5 of the one pair, redundancy 1; too few to decide
        response = client.post(f"/w/{study.public_id}/task/", {"token": token, "answer": "left"})
        page = response.content.decode()
        pages.append(page)
        if match := re.search(r'name="token" value="([0-9a-f-]+)"', page):
            token = match.group(1)
    assert Round.objects.get(study=study, number=1).state == "decided"
    assert "More tasks are coming" not in pages[-1]
    lease = Assignment.objects.get(token=token)
    assert lease.state == "issued" and lease.item.round_number == 2
