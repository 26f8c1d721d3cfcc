"""The worker pages' throttle on Redis, as in production (``HUMEVAL_CACHE_URL``)."""

import time
import uuid
from types import SimpleNamespace

import pytest
from django.conf import settings
from django.test import override_settings

from annotator import throttle

#: Redis database 3 holds every xdist worker's counters, keyed by study and address ids
#: that repeat between the workers' databases: these tests run in one worker.
pytestmark = pytest.mark.xdist_group("redis-throttle")


def test_the_throttle_counts_in_redis_with_an_expiring_key():
    url = settings.CELERY_BROKER_URL.rsplit("/", 1)[0] + "/3"
    caches = {"default": {"BACKEND": throttle.REDIS_CACHE, "LOCATION": url}}
    ident = uuid.uuid4().hex
    with override_settings(CACHES=caches):
        client = throttle._redis()
        assert client is not None
        assert [throttle.allow("submit", ident, "3/min") for _ in range(5)] == [
            True,
            True,
            True,
            False,
            False,
        ]
        assert throttle.allow("submit", ident + "-other", "3/min")  # counted per worker
        keys = client.keys(f"{throttle.REDIS_PREFIX}throttle:submit:{ident}")
        assert len(keys) == 1  # one number per bucket: when it is full again
        assert 0 < client.ttl(keys[0]) <= 61  # the bucket goes away once it is full
        client.delete(*keys)
    assert throttle._redis() is None  # the default cache of the tests is local memory


def test_failure_counts_are_read_from_redis_without_counting():
    url = settings.CELERY_BROKER_URL.rsplit("/", 1)[0] + "/3"
    caches = {"default": {"BACKEND": throttle.REDIS_CACHE, "LOCATION": url}}
    ident = uuid.uuid4().hex
    with override_settings(CACHES=caches):
        client = throttle._redis()
        assert not throttle.exceeded("token-failure", ident, "2/min")
        throttle.allow("token-failure", ident, "2/min")
        assert not throttle.exceeded("token-failure", ident, "2/min")
        throttle.allow("token-failure", ident, "2/min")
        assert throttle.exceeded("token-failure", ident, "2/min")
        assert throttle.exceeded("token-failure", ident, "2/min")  # reading added nothing
        assert 0 < throttle.retry_after("token-failure", ident, "2/min") <= 30
        keys = client.keys(f"{throttle.REDIS_PREFIX}throttle:token-failure:{ident}")
        assert len(keys) == 1
        client.delete(*keys)


def test_a_bucket_in_redis_lets_no_burst_through_at_a_minute_boundary(monkeypatch):
    """60 requests in 4 s across a minute boundary against 30/min: a fixed window let all 60
    through (30 at the end of one minute, 30 at the start of the next); the bucket lets
    the 30 of its burst and one per 2 s after it."""
    url = settings.CELERY_BROKER_URL.rsplit("/", 1)[0] + "/3"
    caches = {"default": {"BACKEND": throttle.REDIS_CACHE, "LOCATION": url}}
    ident = uuid.uuid4().hex
    clock = [(time.time() // 60 + 1) * 60 - 2.0]  # 2 s before a minute boundary
    monkeypatch.setattr(
        throttle, "time", SimpleNamespace(time=lambda: clock[0], monotonic=time.monotonic)
    )
    passed = 0
    with override_settings(CACHES=caches):
        for _ in range(60):
            passed += throttle.allow("entry", ident, "30/min")
            clock[0] += 4 / 60
        throttle._redis().delete(f"{throttle.REDIS_PREFIX}throttle:entry:{ident}")
    assert passed <= 32


def test_a_counted_request_is_one_round_trip_to_redis(monkeypatch):
    """The bucket's script runs by its hash (``EVALSHA``): one send and one reply per request
    once Redis knows the script (a pipeline asked ``SCRIPT EXISTS`` first, a second round
    trip on every request)."""
    from redis.connection import AbstractConnection

    url = settings.CELERY_BROKER_URL.rsplit("/", 1)[0] + "/3"
    caches = {"default": {"BACKEND": throttle.REDIS_CACHE, "LOCATION": url}}
    ident = uuid.uuid4().hex
    sent: list[bytes] = []
    send = AbstractConnection.send_packed_command

    def counting(self, command, *args, **kwargs):
        sent.append(b"".join(command) if isinstance(command, list) else command)
        return send(self, command, *args, **kwargs)

    with override_settings(CACHES=caches):
        client = throttle._redis()
        assert throttle.allow("submit", ident, "3/min")  # loads the script if Redis lacks it
        monkeypatch.setattr(AbstractConnection, "send_packed_command", counting)
        assert throttle.allow("submit", ident, "3/min")
        assert not throttle.exceeded("submit", ident, "3/min")
        monkeypatch.undo()
        assert len(sent) == 2 and all(b"EVALSHA" in s and b"SCRIPT" not in s for s in sent)
        client.delete(*client.keys(f"{throttle.REDIS_PREFIX}throttle:submit:{ident}"))
