"""A fixed-window request counter for the worker pages' entry and submit.

With the default local-memory cache each process counts on its own (through Django's cache
API); production sets ``HUMEVAL_CACHE_URL=redis://…`` so every web process shares the
counts, kept in that Redis with one round trip per request (``SET NX EX`` and ``INCR`` in
one ``MULTI``): the cache API would take three, and a new Redis client object per call.
"""

import time
from functools import cache as once

from django.conf import settings
from django.core.cache import cache

REDIS_CACHE = "django.core.cache.backends.redis.RedisCache"
#: Where the Redis counters live (beside, never inside, the cache's own keys).
REDIS_PREFIX = "humeval:throttle:"


def parse_rate(rate: str) -> tuple[int, int]:
    """``"30/min"`` → (30, 60). Units: s, min, h."""
    count, unit = rate.split("/")
    return int(count), {"s": 1, "sec": 1, "min": 60, "h": 3600, "hour": 3600}[unit]


@once
def _redis_for(location: str):
    import redis

    return redis.Redis.from_url(location)


def _redis():
    """A client of the cache's Redis (one per process and location), or ``None`` when the
    cache is not Redis."""
    conf = settings.CACHES["default"]
    if conf.get("BACKEND") != REDIS_CACHE:
        return None
    location = conf["LOCATION"]
    if not isinstance(location, str):
        location = location[0]
    return _redis_for(location.split(",")[0])


def allow(scope: str, ident: str, rate: str) -> bool:
    """Count one request of ``ident`` in ``scope``; ``False`` once the rate is exceeded."""
    limit, window = parse_rate(rate)
    key = f"throttle:{scope}:{ident}:{int(time.time() // window)}"
    client = _redis()
    if client is not None:
        pipe = client.pipeline(transaction=True)
        pipe.set(REDIS_PREFIX + key, 0, ex=window + 1, nx=True)
        pipe.incr(REDIS_PREFIX + key)
        return pipe.execute()[1] <= limit
    cache.add(key, 0, window + 1)
    try:
        return cache.incr(key) <= limit
    except ValueError:  # the key expired between add and incr
        cache.add(key, 1, window + 1)
        return True


def client_ip(request) -> str:
    return request.META.get("REMOTE_ADDR", "unknown")
