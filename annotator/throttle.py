"""A fixed-window request counter in the cache, for the worker pages' entry and submit.

With the default local-memory cache each process counts on its own; production sets
``HUMEVAL_CACHE_URL=redis://…`` so every web process shares the counts.
"""

import time

from django.core.cache import cache


def parse_rate(rate: str) -> tuple[int, int]:
    """``"30/min"`` → (30, 60). Units: s, min, h."""
    count, unit = rate.split("/")
    return int(count), {"s": 1, "sec": 1, "min": 60, "h": 3600, "hour": 3600}[unit]


def allow(scope: str, ident: str, rate: str) -> bool:
    """Count one request of ``ident`` in ``scope``; ``False`` once the rate is exceeded."""
    limit, window = parse_rate(rate)
    key = f"throttle:{scope}:{ident}:{int(time.time() // window)}"
    cache.add(key, 0, window + 1)
    try:
        return cache.incr(key) <= limit
    except ValueError:  # the key expired between add and incr
        cache.add(key, 1, window + 1)
        return True


def client_ip(request) -> str:
    return request.META.get("REMOTE_ADDR", "unknown")
