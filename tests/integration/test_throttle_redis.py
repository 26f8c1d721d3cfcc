"""The worker pages' throttle on Redis, as in production (``HUMEVAL_CACHE_URL``)."""

import uuid

from django.conf import settings
from django.test import override_settings

from annotator import throttle


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
        keys = client.keys(f"{throttle.REDIS_PREFIX}throttle:submit:{ident}:*")
        assert len(keys) == 1 and int(client.get(keys[0])) == 5
        assert 0 < client.ttl(keys[0]) <= 61  # the window's counter goes away with it
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
        keys = client.keys(f"{throttle.REDIS_PREFIX}throttle:token-failure:{ident}:*")
        assert len(keys) == 1 and int(client.get(keys[0])) == 2  # reading added nothing
        client.delete(*keys)
