"""The entry flood of issue 31 on PostgreSQL with the throttle counting in Redis, at the
production limits: 22 addresses entering 29 new worker ids each (each address under its
30/min) used to take the study's whole 600/min and lock every new worker out for the rest
of the minute, and left 600 worker and 600 participation rows behind."""

import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client, override_settings
from django.utils import timezone

from annotator import services, throttle
from annotator.models import Annotator, Assignment, Participation
from tests.conftest import pairwise_bundle

#: Shares Redis database 3 with test_throttle_redis.py: one worker runs both.
pytestmark = pytest.mark.xdist_group("redis-throttle")


@pytest.fixture
def redis_counts():
    url = settings.CELERY_BROKER_URL.rsplit("/", 1)[0] + "/3"
    caches = {"default": {"BACKEND": throttle.REDIS_CACHE, "LOCATION": url}}
    with override_settings(CACHES=caches):
        client = throttle._redis()

        def clear():
            for key in client.scan_iter(f"{throttle.REDIS_PREFIX}*entry*"):
                client.delete(key)

        clear()
        yield
        clear()


@override_settings(HUMEVAL_THROTTLE_ENTRY="30/min", HUMEVAL_THROTTLE_ENTRY_STUDY="600/min")
def test_an_entry_flood_from_22_addresses_locks_no_worker_out(make_study, redis_counts):
    study = make_study(pairwise_bundle(n_inputs=30))
    url = f"/w/{study.public_id}/"
    # a worker who already holds work before the flood
    holder = Client(REMOTE_ADDR="192.0.2.200")
    assert holder.get(url, {"worker": "holder"}).status_code == 302
    assert holder.get(f"{url}task/").status_code == 200
    flood = Client()
    codes = [
        flood.get(url, {"worker": uuid.uuid4().hex}, REMOTE_ADDR=f"198.51.100.{a}").status_code
        for a in range(22)
        for _ in range(29)
    ]
    assert codes == [302] * (22 * 29)  # each address under its own limit
    # new workers from their own addresses still get in and get work
    for i in range(20):
        worker = Client(REMOTE_ADDR=f"203.0.113.{i}")
        assert worker.get(url, {"worker": f"real{i}"}).status_code == 302
        assert worker.get(f"{url}task/").status_code == 200
    # and the worker who holds work comes back (from another address) to the same item
    token = Assignment.objects.get(annotator__external_id="holder").token
    assert holder.get(url, {"worker": "holder"}, REMOTE_ADDR="192.0.2.201").status_code == 302
    assert str(token) in holder.get(f"{url}task/").content.decode()
    # the flood's rows go with the sweep; every worker who took work keeps theirs
    assert Participation.objects.filter(study=study).count() == 1 + 22 * 29 + 20
    later = timezone.now() + timedelta(minutes=settings.HUMEVAL_ENTRY_SWEEP_MINUTES + 1)
    assert services.participations_sweep_unused(now=later) == 22 * 29
    kept = set(Participation.objects.values_list("annotator__external_id", flat=True))
    assert kept == {"holder"} | {f"real{i}" for i in range(20)}
    assert Annotator.objects.count() == 21
