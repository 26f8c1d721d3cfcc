"""Fixed-window request counters: the worker pages' entry and submit, and failed API tokens.

With the default local-memory cache each process counts on its own (through Django's cache
API); production sets ``HUMEVAL_CACHE_URL=redis://…`` so every web process shares the
counts, kept in that Redis with one round trip per request (``SET NX EX`` and ``INCR`` in
one ``MULTI``): the cache API would take three, and a new Redis client object per call.

Redis may fail. A request never waits on it for long (short connect and read timeouts) and
never fails because of it: the counter falls back to this process's memory (the same
limit, counted per process), logs a warning, and Redis is tried again after
``REDIS_RETRY_AFTER`` seconds. DRF's API throttles get the same fallback through
:class:`ResilientCache`.
"""

import ipaddress
import logging
import time
from functools import cache as once

import redis
from django.conf import settings
from django.core.cache import cache
from django.core.cache.backends.locmem import LocMemCache
from rest_framework import exceptions, throttling
from rest_framework.authentication import TokenAuthentication, get_authorization_header

log = logging.getLogger(__name__)

REDIS_CACHE = "django.core.cache.backends.redis.RedisCache"
#: Where the Redis counters live (beside, never inside, the cache's own keys).
REDIS_PREFIX = "humeval:throttle:"
#: Seconds a request may wait for Redis (connecting, or an answer) before counting locally.
REDIS_TIMEOUT = 0.5
#: After a failure, Redis is left alone for this many seconds (no timeout paid per request).
REDIS_RETRY_AFTER = 5.0

#: This process's counters while Redis is unreachable.
_local = LocMemCache("humeval-throttle-fallback", {"OPTIONS": {"MAX_ENTRIES": 100_000}})
_redis_down_until = 0.0


def parse_rate(rate: str) -> tuple[int, int]:
    """``"30/min"`` → (30, 60). Units: s, min, h."""
    count, unit = rate.split("/")
    return int(count), {"s": 1, "sec": 1, "min": 60, "h": 3600, "hour": 3600}[unit]


@once
def _redis_for(location: str) -> redis.Redis:
    return redis.Redis.from_url(
        location, socket_connect_timeout=REDIS_TIMEOUT, socket_timeout=REDIS_TIMEOUT
    )


def _redis() -> redis.Redis | None:
    """A client of the cache's Redis (one per process and location), or ``None`` when the
    cache is not Redis."""
    conf = settings.CACHES["default"]
    if conf.get("BACKEND") != REDIS_CACHE:
        return None
    location = conf["LOCATION"]
    if not isinstance(location, str):
        location = location[0]
    return _redis_for(location.split(",")[0])


def redis_available() -> bool:
    """Whether Redis may be asked now (``False`` for a few seconds after it failed)."""
    return time.monotonic() >= _redis_down_until


def redis_failed(exc: Exception) -> None:
    """Leave Redis alone for ``REDIS_RETRY_AFTER`` seconds, and say so once."""
    global _redis_down_until
    first = redis_available()
    _redis_down_until = time.monotonic() + REDIS_RETRY_AFTER
    if first:
        log.warning(
            "Redis unreachable (%s): throttles count in this process; retrying in %.0f s",
            exc,
            REDIS_RETRY_AFTER,
        )


def _count_in(store, key: str, window: int, add: int) -> int:
    if not add:
        return store.get(key, 0)
    store.add(key, 0, window + 1)
    try:
        return store.incr(key, add)
    except ValueError:  # the key expired between add and incr
        store.add(key, add, window + 1)
        return add


def _count(key: str, window: int, add: int = 1) -> int:
    """The window's count of ``key`` after adding ``add`` (0: only read it)."""
    client = _redis()
    if client is None:
        return _count_in(cache, key, window, add)
    if redis_available():
        try:
            if not add:
                return int(client.get(REDIS_PREFIX + key) or 0)
            pipe = client.pipeline(transaction=True)
            pipe.set(REDIS_PREFIX + key, 0, ex=window + 1, nx=True)
            pipe.incr(REDIS_PREFIX + key, add)
            return pipe.execute()[1]
        except redis.RedisError as exc:
            redis_failed(exc)
    return _count_in(_local, key, window, add)


def _key(scope: str, ident: str, window: int) -> str:
    return f"throttle:{scope}:{ident}:{int(time.time() // window)}"


def allow(scope: str, ident: str, rate: str) -> bool:
    """Count one request of ``ident`` in ``scope``; ``False`` once the rate is exceeded."""
    limit, window = parse_rate(rate)
    return _count(_key(scope, ident, window), window) <= limit


def exceeded(scope: str, ident: str, rate: str) -> bool:
    """Whether ``ident`` has used up ``scope``'s rate in this window (counts nothing)."""
    limit, window = parse_rate(rate)
    return _count(_key(scope, ident, window), window, add=0) >= limit


def allow_entry(request, study_id) -> bool:
    """A worker entering a study: counted per client address (``HUMEVAL_THROTTLE_ENTRY``)
    and per study (``HUMEVAL_THROTTLE_ENTRY_STUDY``, high enough for a crowd)."""
    return allow("entry", client_ip(request), settings.HUMEVAL_THROTTLE_ENTRY) and allow(
        "entry-study", str(study_id), settings.HUMEVAL_THROTTLE_ENTRY_STUDY
    )


@once
def _networks(proxies: tuple[str, ...]) -> tuple:
    return tuple(ipaddress.ip_network(p, strict=False) for p in proxies)


def _trusted(address, proxies: tuple) -> bool:
    return any(address in network for network in proxies)


def client_ip(request) -> str:
    """The client's address: ``REMOTE_ADDR``, unless it is one of
    ``HUMEVAL_TRUSTED_PROXIES``; then the right-most address of ``X-Forwarded-For`` that is
    not a trusted proxy (the left-most valid one when all are, or before a malformed entry).
    Without trusted proxies the header is ignored: anyone can write it."""
    remote = request.META.get("REMOTE_ADDR", "") or "unknown"
    proxies = _networks(tuple(settings.HUMEVAL_TRUSTED_PROXIES))
    if not proxies:
        return remote
    try:
        if not _trusted(ipaddress.ip_address(remote), proxies):
            return remote
    except ValueError:
        return remote
    client = remote
    for hop in reversed(request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")):
        try:
            address = ipaddress.ip_address(hop.strip())
        except ValueError:
            break
        client = str(address)
        if not _trusted(address, proxies):
            break
    return client


# --- the API -----------------------------------------------------------------------------


class ResilientCache:
    """The cache DRF's throttles keep their request histories in: Django's default cache,
    or this process's memory while that cache's Redis is unreachable."""

    def get(self, key: str, default=None):
        if _redis() is None or redis_available():
            try:
                return cache.get(key, default)
            except redis.RedisError as exc:
                redis_failed(exc)
        return _local.get(key, default)

    def set(self, key: str, value, timeout=None) -> None:
        if _redis() is None or redis_available():
            try:
                return cache.set(key, value, timeout)
            except redis.RedisError as exc:
                redis_failed(exc)
        _local.set(key, value, timeout)


class AnonThrottle(throttling.AnonRateThrottle):
    """DRF's anonymous throttle (``HUMEVAL_THROTTLE_API_ANON``), per ``client_ip``."""

    cache = ResilientCache()

    def get_ident(self, request) -> str:
        return client_ip(request)


class UserThrottle(throttling.UserRateThrottle):
    """DRF's per-user throttle (``HUMEVAL_THROTTLE_API_USER``)."""

    cache = ResilientCache()

    def get_ident(self, request) -> str:
        return client_ip(request)


class ThrottledTokenAuthentication(TokenAuthentication):
    """Token authentication that counts wrong tokens per client address: past
    ``HUMEVAL_THROTTLE_API_TOKEN_FAILURES`` in its window every token from that address,
    right or wrong, answers 429 until the window ends."""

    def authenticate(self, request):
        header = get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        rate = settings.HUMEVAL_THROTTLE_API_TOKEN_FAILURES
        address = client_ip(request)
        if exceeded("token-failure", address, rate):
            window = parse_rate(rate)[1]
            raise exceptions.Throttled(wait=window - time.time() % window)
        try:
            return super().authenticate(request)
        except exceptions.AuthenticationFailed:
            allow("token-failure", address, rate)
            raise
