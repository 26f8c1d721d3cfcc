"""Request throttles: the worker pages' entry and submit, and failed API tokens.

Each counter is a token bucket (GCRA, the generic cell rate algorithm): a rate of ``30/min``
lets a burst of 30 through, then one every 2 s, so no window boundary doubles the rate (a
fixed window let 60 through in 4 s across a minute boundary). One number is kept per
counter, the "theoretical arrival time" ``tat``: a request is let through when
``max(tat, now) + interval - now <= window`` and then moves ``tat`` on by ``interval``.

With the default local-memory cache each process counts on its own (through Django's cache
API); production sets ``HUMEVAL_CACHE_URL=redis://…`` so every web process shares the
counts, kept in that Redis with one round trip per request (a small Lua script, so the read
and the write are one atomic step).

Redis may fail. A request never waits on it for long (short connect and read timeouts) and
never fails because of it: the counter falls back to this process's memory (the same
limit, counted per process), logs a warning, and Redis is tried again after
``REDIS_RETRY_AFTER`` seconds. DRF's API throttles (a sliding log of request times) get
the same fallback through :class:`ResilientCache`.
"""

import ipaddress
import logging
import math
import threading
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


#: The bucket in Redis: KEYS[1] the bucket's ``tat``, KEYS[2] (optional) a marker that this
#: member was already counted in the window (then nothing is counted again). ARGV: now,
#: interval, window (seconds), add (0: only ask whether one more would pass). Returns
#: {1 or 0, seconds to wait}; numbers go out as strings (Lua numbers are truncated).
_BUCKET_LUA = """
local now, interval = tonumber(ARGV[1]), tonumber(ARGV[2])
local window, add = tonumber(ARGV[3]), tonumber(ARGV[4])
if KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 then return {1, '0'} end
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local after = tat + interval * math.max(add, 1)
if after - now > window then return {0, tostring(after - now - window)} end
if add > 0 then
  redis.call('SET', KEYS[1], tostring(after), 'PX', math.ceil((after - now) * 1000) + 1000)
  if KEYS[2] then redis.call('SET', KEYS[2], '1', 'PX', math.ceil(window * 1000)) end
end
return {1, '0'}
"""
_lock = threading.Lock()


@once
def _bucket_script(client: redis.Redis):
    return client.register_script(_BUCKET_LUA)


def _spend_in(store, key: str, member: str, now: float, interval: float, window: int, add: int):
    """:data:`_BUCKET_LUA` on a Django cache (this process's memory), under a lock."""
    with _lock:
        if member and store.get(member) is not None:
            return True, 0.0
        after = max(store.get(key, 0.0), now) + interval * max(add, 1)
        if after - now > window:
            return False, after - now - window
        if add:
            store.set(key, after, math.ceil(after - now) + 1)
            if member:
                store.set(member, 1, window)
        return True, 0.0


def _spend(key: str, rate: str, add: int = 1, member: str = "") -> tuple[bool, float]:
    """Take ``add`` requests from the bucket ``key`` (0: only ask whether one more would
    pass); with ``member``, a member already counted in the last window passes free.
    Returns whether it passes and, if not, the seconds until one would."""
    limit, window = parse_rate(rate)
    interval, now = window / limit, time.time()
    client = _redis()
    if client is None:
        return _spend_in(cache, key, member, now, interval, window, add)
    if redis_available():
        try:
            keys = [REDIS_PREFIX + key] + ([REDIS_PREFIX + member] if member else [])
            # EVALSHA: one round trip (the script is loaded once, when Redis lacks it)
            passed, wait = _bucket_script(client)(keys=keys, args=[now, interval, window, add])
            return bool(passed), float(wait)
        except redis.RedisError as exc:
            redis_failed(exc)
    return _spend_in(_local, key, member, now, interval, window, add)


def _key(scope: str, ident: str) -> str:
    return f"throttle:{scope}:{ident}"


def allow(scope: str, ident: str, rate: str) -> bool:
    """Count one request of ``ident`` in ``scope``; ``False`` once the rate is exceeded
    (a refused request is not counted)."""
    return _spend(_key(scope, ident), rate)[0]


def retry_after(scope: str, ident: str, rate: str) -> float:
    """Seconds until ``ident`` may make one more request in ``scope`` (0: now); counts
    nothing."""
    passed, wait = _spend(_key(scope, ident), rate, add=0)
    return 0.0 if passed else wait


def exceeded(scope: str, ident: str, rate: str) -> bool:
    """Whether ``ident`` has used up ``scope``'s rate for now (counts nothing)."""
    return retry_after(scope, ident, rate) > 0


def allow_entry(request, study_id, *, returning: bool) -> bool:
    """A worker entering a study: counted per client address (``HUMEVAL_THROTTLE_ENTRY``),
    and, for a worker new to the study, against the study's budget of new entrants
    (``HUMEVAL_THROTTLE_ENTRY_STUDY``), which counts each client address once per window:
    a flood from a few dozen addresses takes a few dozen of it, never the whole budget.
    A returning worker (``returning``: already a participant) never waits for the study's
    budget, so those who hold work keep it whatever the flood (docs/reliability.md)."""
    address = client_ip(request)
    if not allow("entry", address, settings.HUMEVAL_THROTTLE_ENTRY):
        return False
    if returning:
        return True
    return _spend(
        _key("entry-study", str(study_id)),
        settings.HUMEVAL_THROTTLE_ENTRY_STUDY,
        member=_key("entry-study-address", f"{study_id}:{address}"),
    )[0]


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
    ``HUMEVAL_THROTTLE_API_TOKEN_FAILURES`` every token from that address, right or wrong,
    answers 429 (with ``Retry-After``) until the bucket lets one more through."""

    def authenticate(self, request):
        header = get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        rate = settings.HUMEVAL_THROTTLE_API_TOKEN_FAILURES
        address = client_ip(request)
        wait = retry_after("token-failure", address, rate)
        if wait > 0:
            raise exceptions.Throttled(wait=wait)
        try:
            return super().authenticate(request)
        except exceptions.AuthenticationFailed:
            allow("token-failure", address, rate)
            raise
