"""Estimates and the item bootstrap shared by every statistic of the analysis core.

Every statistic is returned as an :class:`Estimate` whose ``reason`` says why a value is
undefined (never a bare NaN). Intervals are percentile bootstraps over items (Efron &
Tibshirani 1993, ch. 13). Items with equal counts are interchangeable, so a resample is a
``Multinomial(n, freq / n)`` draw over the distinct count patterns
(:func:`analysis.counts.find_patterns`) and a statistic's sums are a matrix product
(:func:`bootstrap_sums`): exact, at ``O(n_boot × patterns)``. Users' view: ``docs/analysis.md``.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

__all__ = [
    "BOOTSTRAP_CACHE_CELLS",
    "Estimate",
    "SeedLike",
    "as_generator",
    "bootstrap_counts",
    "bootstrap_sums",
    "clear_bootstrap_cache",
    "estimate_from_sums",
    "percentile_interval",
]

SeedLike = int | np.random.Generator | None

BOOTSTRAP_CACHE_CELLS = 10_000_000
"""Bootstrap weight matrices of at most this many cells are memoised (integer seeds only)."""
BLOCK_ROWS = 100
"""Resamples drawn from one child generator of the seed; blocks may be drawn in parallel."""
PARALLEL_CELLS = 200_000
"""Memoised draws of at least this many cells use a thread per core."""


# --------------------------------------------------------------------------------------------
# Result type
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Estimate:
    """A statistic with its bootstrap interval, or the reason why it is undefined.

    Attributes
    ----------
    value:
        The point estimate, or ``None`` when the statistic is undefined for these data.
    low, high:
        Percentile bootstrap interval bounds, or ``None`` when no interval could be formed.
    n:
        Number of items that entered the statistic.
    n_boot:
        Number of bootstrap replicates in which the statistic was defined.
    reason:
        Empty when value and interval are defined; otherwise why not.
    """

    value: float | None
    low: float | None = None
    high: float | None = None
    n: int = 0
    n_boot: int = 0
    reason: str = ""

    @property
    def defined(self) -> bool:
        """Whether ``value`` is a number."""
        return self.value is not None

    @classmethod
    def undefined(cls, reason: str, n: int = 0) -> Estimate:
        """An undefined estimate with its explanation."""
        return cls(value=None, n=n, reason=reason)

    def as_dict(self, prefix: str = "") -> dict[str, object]:
        """Flat mapping, for building tidy frames."""
        return {
            f"{prefix}value": self.value,
            f"{prefix}low": self.low,
            f"{prefix}high": self.high,
            f"{prefix}n": self.n,
            f"{prefix}n_boot": self.n_boot,
            f"{prefix}reason": self.reason,
        }


# --------------------------------------------------------------------------------------------
# The item bootstrap
# --------------------------------------------------------------------------------------------


def as_generator(seed: SeedLike) -> np.random.Generator:
    """``seed`` itself if it is a :class:`numpy.random.Generator`, else a new one from it."""
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _block_generators(n_boot: int, seed: SeedLike) -> list[np.random.Generator]:
    """One generator per block of :data:`BLOCK_ROWS` resamples, children of ``seed``."""
    n_blocks = -(-n_boot // BLOCK_ROWS)
    if isinstance(seed, np.random.Generator):
        return seed.spawn(n_blocks)
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(n_blocks)]


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _multinomial_chunks(freq: np.ndarray, n_boot: int, seed: SeedLike) -> Iterable[np.ndarray]:
    n = int(freq.sum())
    pvals = freq / n
    step = max(1, BOOTSTRAP_CACHE_CELLS // max(1, len(freq)))
    for b, rng in enumerate(_block_generators(n_boot, seed)):
        rows = min(BLOCK_ROWS, n_boot - b * BLOCK_ROWS)
        for start in range(0, rows, step):  # a block's rows in turn: the same draws
            yield rng.multinomial(n, pvals, size=min(step, rows - start)).astype(np.float64)


@functools.lru_cache(maxsize=8)
def _cached_weights(digest: bytes, freq_bytes: bytes, n_boot: int, seed: int) -> np.ndarray:
    freq = np.frombuffer(freq_bytes, dtype=np.int64)
    n = int(freq.sum())
    pvals, w = freq / n, np.empty((n_boot, len(freq)))

    def fill(b: int, rng: np.random.Generator) -> None:  # numpy draws without the GIL
        block = w[b * BLOCK_ROWS : (b + 1) * BLOCK_ROWS]
        block[:] = rng.multinomial(n, pvals, size=len(block))

    blocks = list(enumerate(_block_generators(n_boot, seed)))
    threads = min(_cores(), len(blocks)) if w.size >= PARALLEL_CELLS else 1
    if threads > 1:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda job: fill(*job), blocks))
    else:
        for job in blocks:
            fill(*job)
    w.flags.writeable = False
    return w


def _weight_chunks(freq: np.ndarray, n_boot: int, seed: SeedLike) -> Iterable[np.ndarray]:
    if isinstance(seed, int | np.integer) and n_boot * len(freq) <= BOOTSTRAP_CACHE_CELLS:
        fb = freq.tobytes()
        yield _cached_weights(hashlib.blake2b(fb).digest(), fb, int(n_boot), int(seed))
    else:
        yield from _multinomial_chunks(freq, n_boot, seed)


def clear_bootstrap_cache() -> None:
    """Forget the memoised bootstrap weights (for timing runs that must start cold)."""
    _cached_weights.cache_clear()


def bootstrap_counts(freq: np.ndarray, n_boot: int = 1000, seed: SeedLike = 0) -> np.ndarray:
    """``(n_boot, P)`` bootstrap multiplicities of ``P`` item patterns with counts ``freq``.

    Resampling ``n = freq.sum()`` items with replacement gives pattern counts
    ``Multinomial(n, freq / n)``; row ``b`` holds the counts of resample ``b``. Each block of
    :data:`BLOCK_ROWS` rows comes from its own child of ``seed`` (``SeedSequence.spawn``), so the
    draws are the same whether the blocks are drawn in turn or in parallel. With an integer
    seed the result is memoised (read-only), so statistics computed on the same patterns use the
    same resamples.
    """
    freq = np.asarray(freq, dtype=np.int64)
    if n_boot <= 0 or freq.sum() == 0:
        return np.zeros((0, len(freq)))
    chunks = list(_weight_chunks(freq, n_boot, seed))
    return chunks[0] if len(chunks) == 1 else np.vstack(chunks)  # the memoised array, no copy


def bootstrap_sums(
    values: np.ndarray, freq: np.ndarray, n_boot: int = 1000, seed: SeedLike = 0
) -> np.ndarray:
    """Column sums of per-item statistics over ``n_boot`` bootstrap resamples of the items.

    ``values``: ``(P, m)`` sufficient statistics per distinct item pattern; ``freq``: ``(P,)``
    items per pattern (the resample size is ``freq.sum()``); ``seed`` as in
    :func:`bootstrap_counts`. Returns ``(n_boot, m)``: ``bootstrap_counts(freq) @ values``,
    computed in bounded-memory chunks.
    """
    values = np.asarray(values, dtype=np.float64)
    freq = np.asarray(freq, dtype=np.int64)
    if values.ndim == 1:
        values = values[:, None]
    if n_boot <= 0 or freq.sum() == 0:
        return np.zeros((0, values.shape[1]))
    return np.vstack([w @ values for w in _weight_chunks(freq, n_boot, seed)])


def percentile_interval(
    replicates: np.ndarray, confidence: float = 0.95
) -> tuple[float | None, float | None, int]:
    """Percentile interval of the finite replicates: ``(low, high, n_finite)``."""
    reps = np.asarray(replicates, dtype=np.float64)
    reps = reps[np.isfinite(reps)]
    if reps.size == 0:
        return None, None, 0
    a = (1.0 - confidence) / 2.0
    low, high = np.quantile(reps, [a, 1.0 - a])
    return float(low), float(high), int(reps.size)


def estimate_from_sums(
    values: np.ndarray,
    freq: np.ndarray,
    reduce: Callable[[np.ndarray], np.ndarray],
    *,
    n: int,
    n_boot: int = 1000,
    seed: SeedLike = 0,
    confidence: float = 0.95,
    undefined: str = "statistic undefined for these data",
) -> Estimate:
    """Point estimate ``reduce(freq @ values)`` with a bootstrap percentile interval.

    ``reduce`` maps a ``(b, m)`` array of summed statistics to ``b`` values (NaN when undefined).
    ``undefined`` is the reason reported when the point estimate is not finite.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    total = np.asarray(freq, dtype=np.float64) @ values
    with np.errstate(divide="ignore", invalid="ignore"):
        point = float(np.asarray(reduce(total[None, :]))[0])
    if not math.isfinite(point):
        return Estimate.undefined(undefined, n=n)
    return _with_interval(point, values, freq, reduce, n, n_boot, seed, confidence)


def _with_interval(
    point: float,
    values: np.ndarray,
    freq: np.ndarray,
    reduce: Callable[[np.ndarray], np.ndarray],
    n: int,
    n_boot: int,
    seed: SeedLike,
    confidence: float,
) -> Estimate:
    if n_boot <= 0:
        return Estimate(point, n=n, reason="no bootstrap interval: n_boot=0")
    sums = bootstrap_sums(values, freq, n_boot, seed)
    with np.errstate(divide="ignore", invalid="ignore"):
        reps = np.asarray(reduce(sums), dtype=np.float64)
    low, high, n_ok = percentile_interval(reps, confidence)
    reason = ""
    if n_ok == 0:
        reason = "no bootstrap interval: the statistic was undefined in every resample"
    elif n_ok < n_boot:
        reason = f"interval from the {n_ok} of {n_boot} resamples in which it was defined"
    return Estimate(point, low, high, n=n, n_boot=n_ok, reason=reason)
