"""Aggregation of crowd labels, the shared data model and the item bootstrap.

Human labels are a long frame, one row per annotation: ``item`` (any hashable id),
``annotator`` and ``label`` (numbers for Likert data; ``"A"``, ``"B"``, ``"tie"``,
``"both_good"``, ``"both_bad"`` for preferences, :data:`PAIRWISE_LABELS`). Judge labels have
``item``, ``judge`` (default ``"judge"``) and ``label``. Missing labels are dropped; a label
outside the declared ``labels=`` raises :class:`ValueError`. Every statistic is a function
of the per-item label counts (:class:`LabelCounts`), returned as an :class:`Estimate` whose
``reason`` says why a value is undefined (never a bare NaN).

Intervals are percentile bootstraps over items (Efron & Tibshirani 1993, ch. 13). Items with
equal counts are interchangeable, so a resample is a ``Multinomial(n, freq / n)`` draw over the
distinct count patterns and a statistic's sums are a matrix product (:func:`bootstrap_sums`):
exact, at ``O(n_boot × patterns)``. Users' view: ``docs/analysis.md``.
"""

from __future__ import annotations

import functools
import hashlib
import math
import warnings
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np
import pandas as pd

# pairwise preference labels; the last three count as a tie (ORA, Section 3.4)
from formats.vocab import PAIRWISE_LABELS

__all__ = [
    "BOOTSTRAP_CACHE_CELLS",
    "CROWD_KIT_MISSING",
    "PAIRWISE_LABELS",
    "WorkerModel",
    "Estimate",
    "LabelCounts",
    "Patterns",
    "as_generator",
    "as_label_counts",
    "find_patterns",
    "holm",
    "bootstrap_counts",
    "bootstrap_sums",
    "clear_bootstrap_cache",
    "crowd_kit_available",
    "dawid_skene",
    "estimate_from_sums",
    "likert_summary",
    "mace",
    "majority_vote",
    "modal_labels",
    "pairwise_win_rates",
    "percentile_interval",
    "pivot_labels",
    "position_bias",
    "prioritisation_check",
    "soft_vote",
]


SeedLike = int | np.random.Generator | None

BOOTSTRAP_CACHE_CELLS = 10_000_000
"""Bootstrap weight matrices of at most this many cells are memoised (integer seeds only)."""


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
# Data model
# --------------------------------------------------------------------------------------------


def _sorted_labels(values: np.ndarray) -> pd.Index:
    """Observed labels, sorted (numbers numerically, anything else by its text)."""
    uniq = list(pd.unique(np.asarray(values, dtype=object)))
    try:
        return pd.Index(sorted(uniq))
    except TypeError:
        return pd.Index(sorted(uniq, key=str))


def _numeric_values(labels: pd.Index) -> np.ndarray | None:
    if labels.dtype.kind in "iuf":
        return labels.to_numpy(dtype=float)
    return None


def _label_codes(values: pd.Series, labels: pd.Index, what: str) -> np.ndarray:
    codes = labels.get_indexer(values.to_numpy())
    if (codes < 0).any():
        unknown = pd.unique(values.to_numpy()[codes < 0])[:5]
        raise ValueError(
            f"{what} contain labels outside the declared label set {list(labels)}: {list(unknown)}"
        )
    return codes.astype(np.int64)


def _factorize_sorted(values: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """Codes and sorted unique values (factorising unsorted, then sorting the uniques, is
    faster than ``pd.factorize(sort=True)`` on long string columns)."""
    codes, uniques = pd.factorize(values, sort=False)
    uniques = pd.Index(uniques, name="item")
    try:
        order = np.argsort(uniques.to_numpy(), kind="stable")
    except TypeError:
        order = np.argsort(uniques.astype(str).to_numpy(), kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[codes], uniques[order]


def _counts(item_code: np.ndarray, label_code: np.ndarray, n_items: int, k: int) -> np.ndarray:
    flat = np.bincount(item_code * k + label_code, minlength=n_items * k)
    return flat.reshape(n_items, k)


@dataclass(frozen=True, eq=False)
class LabelCounts:
    """Per-item label counts for the humans and each judge, on a shared item and label index.

    Attributes
    ----------
    items:
        Item ids, in the row order of the count matrices.
    labels:
        The declared (or observed, sorted) label set, in column order.
    human:
        ``(n_items, n_labels)`` integer matrix: how many humans gave each label to each item.
    judges:
        Judge name -> ``(n_items, n_labels)`` counts of that judge's labels (zero rows for items
        the judge did not label).
    """

    items: pd.Index
    labels: pd.Index
    human: np.ndarray
    judges: Mapping[str, np.ndarray] = field(default_factory=dict)
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_frames(
        cls,
        annotations: pd.DataFrame,
        judges: pd.DataFrame | None = None,
        *,
        labels: Sequence[Hashable] | None = None,
    ) -> LabelCounts:
        """Encode the long annotation frame (and optional judge frame); see the module docstring."""
        for col in ("item", "label"):
            if col not in annotations.columns:
                raise ValueError(f"annotations need an {col!r} column")
        ann = annotations.loc[annotations["label"].notna(), ["item", "label"]]
        jud = None
        if judges is not None:
            for col in ("item", "label"):
                if col not in judges.columns:
                    raise ValueError(f"judge labels need an {col!r} column")
            cols = ["item", "label"] + (["judge"] if "judge" in judges.columns else [])
            jud = judges.loc[judges["label"].notna(), cols]
        if labels is None:
            observed = ann["label"]
            if jud is not None:
                observed = pd.concat([observed, jud["label"]], ignore_index=True)
            label_index = _sorted_labels(observed.unique())
        else:
            label_index = pd.Index(list(labels))
            if label_index.has_duplicates:
                raise ValueError(f"declared labels contain duplicates: {list(labels)}")
        k = len(label_index)
        item_code, items = _factorize_sorted(ann["item"])
        human = _counts(
            item_code, _label_codes(ann["label"], label_index, "annotations"), len(items), k
        )
        judge_counts: dict[str, np.ndarray] = {}
        if jud is not None:
            codes = _label_codes(jud["label"], label_index, "judge labels")
            rows = items.get_indexer(jud["item"].to_numpy())
            names = jud["judge"].to_numpy() if "judge" in jud.columns else None
            keep = rows >= 0
            if names is None:
                judge_counts["judge"] = _counts(rows[keep], codes[keep], len(items), k)
            else:
                name_code, name_index = pd.factorize(names, sort=True)
                for j, name in enumerate(name_index):
                    sel = keep & (name_code == j)
                    judge_counts[str(name)] = _counts(rows[sel], codes[sel], len(items), k)
        return cls(items=items, labels=label_index, human=human, judges=judge_counts)

    @property
    def n_items(self) -> int:
        """Number of items with at least one human label."""
        return len(self.items)

    @property
    def values(self) -> np.ndarray | None:
        """Numeric label values (for ordinal/interval statistics), or ``None``."""
        return _numeric_values(self.labels)

    def ordinal_values(self) -> np.ndarray:
        """Numeric label values, checked to be strictly increasing (required for medians)."""
        vals = self.values
        if vals is None:
            raise ValueError(
                f"ordinal statistics need numeric labels, got {list(self.labels)}; "
                "declare e.g. labels=[1, 2, 3, 4, 5]"
            )
        if np.any(np.diff(vals) <= 0):
            raise ValueError(f"declared labels must be increasing for ordinal data: {list(vals)}")
        return vals

    def judge_counts(self, judge: str | None) -> tuple[str, np.ndarray]:
        """Select one judge: by name, or the only one when ``judge`` is None."""
        if not self.judges:
            raise ValueError("no judge labels were given")
        if judge is None:
            if len(self.judges) > 1:
                raise ValueError(f"several judges present {sorted(self.judges)}; pass judge=NAME")
            judge = next(iter(self.judges))
        if judge not in self.judges:
            raise ValueError(f"unknown judge {judge!r}; known: {sorted(self.judges)}")
        return judge, self.judges[judge]

    def patterns(self, judge: str | None = None) -> Patterns:
        """Distinct per-item count patterns (human counts, plus one judge's counts if named).

        Cached: every statistic on these counts shares the same pattern table.
        """
        key = ("patterns", judge)
        if key not in self._cache:
            blocks = [self.human] if judge is None else [self.human, self.judge_counts(judge)[1]]
            self._cache[key] = find_patterns(np.hstack(blocks))
        return self._cache[key]


def as_label_counts(
    data: pd.DataFrame | LabelCounts,
    judges: pd.DataFrame | None = None,
    labels: Sequence[Hashable] | None = None,
) -> LabelCounts:
    """Return ``data`` unchanged if already encoded, else encode the frames."""
    if isinstance(data, LabelCounts):
        if judges is not None:
            raise ValueError("pass judge labels to LabelCounts.from_frames, not alongside it")
        if labels is not None and list(labels) != list(data.labels):
            raise ValueError("labels differ from the label set the LabelCounts was built with")
        return data
    return LabelCounts.from_frames(data, judges, labels=labels)


# --------------------------------------------------------------------------------------------
# Patterns and the item bootstrap
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Patterns:
    """Distinct rows of an integer item matrix.

    ``rows[p]`` is pattern ``p``; ``inverse[i]`` is the pattern of item ``i``; ``freq[p]`` is how
    many items share pattern ``p``.
    """

    rows: np.ndarray
    inverse: np.ndarray
    freq: np.ndarray


def find_patterns(matrix: np.ndarray) -> Patterns:
    """Group the rows of an integer ``(n, q)`` matrix into distinct patterns."""
    m = np.ascontiguousarray(matrix)
    if m.ndim != 2:
        raise ValueError("expected a 2-d matrix")
    if m.shape[0] == 0:
        return Patterns(m[:0], np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    if m.dtype.kind in "iu" and m.min() >= 0:
        radix = m.max(axis=0).astype(np.float64) + 1.0
        if np.prod(radix) < 2.0**62:
            mult = np.ones(m.shape[1], dtype=np.int64)
            mult[1:] = np.cumprod(radix[:-1].astype(np.int64))
            key = m.astype(np.int64) @ mult
            _, first, inverse, freq = np.unique(
                key, return_index=True, return_inverse=True, return_counts=True
            )
            return Patterns(m[first], inverse.ravel(), freq)
    rows, inverse, freq = np.unique(m, axis=0, return_inverse=True, return_counts=True)
    return Patterns(rows, inverse.ravel(), freq)


def as_generator(seed: SeedLike) -> np.random.Generator:
    """``seed`` itself if it is a :class:`numpy.random.Generator`, else a new one from it."""
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _multinomial_chunks(freq: np.ndarray, n_boot: int, rng: np.random.Generator) -> Iterable:
    n = int(freq.sum())
    pvals = freq / n
    step = max(1, BOOTSTRAP_CACHE_CELLS // max(1, len(freq)))
    for start in range(0, n_boot, step):
        yield rng.multinomial(n, pvals, size=min(step, n_boot - start)).astype(np.float64)


@functools.lru_cache(maxsize=8)
def _cached_weights(digest: bytes, freq_bytes: bytes, n_boot: int, seed: int) -> np.ndarray:
    freq = np.frombuffer(freq_bytes, dtype=np.int64)
    rng, n = np.random.default_rng(seed), int(freq.sum())
    pvals, w = freq / n, np.empty((n_boot, len(freq)))
    for start in range(0, n_boot, 100):  # the same draws as one call, without an int64 copy
        w[start : start + 100] = rng.multinomial(n, pvals, size=min(100, n_boot - start))
    w.flags.writeable = False
    return w


def _weight_chunks(freq: np.ndarray, n_boot: int, seed: SeedLike) -> Iterable[np.ndarray]:
    if isinstance(seed, int | np.integer) and n_boot * len(freq) <= BOOTSTRAP_CACHE_CELLS:
        fb = freq.tobytes()
        yield _cached_weights(hashlib.blake2b(fb).digest(), fb, int(n_boot), int(seed))
    else:
        yield from _multinomial_chunks(freq, n_boot, as_generator(seed))


def clear_bootstrap_cache() -> None:
    """Forget the memoised bootstrap weights (for timing runs that must start cold)."""
    _cached_weights.cache_clear()


def bootstrap_counts(freq: np.ndarray, n_boot: int = 1000, seed: SeedLike = 0) -> np.ndarray:
    """``(n_boot, P)`` bootstrap multiplicities of ``P`` item patterns with counts ``freq``.

    Resampling ``n = freq.sum()`` items with replacement gives pattern counts
    ``Multinomial(n, freq / n)``; row ``b`` holds the counts of resample ``b``. With an integer
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


# --------------------------------------------------------------------------------------------
# Shared per-item helpers (vectorised over rows of a count matrix)
# --------------------------------------------------------------------------------------------


def soft_mode(counts: np.ndarray) -> np.ndarray:
    """Uniform distribution over each row's most frequent labels (zeros for empty rows)."""
    counts = np.asarray(counts)
    top = counts.max(axis=1, keepdims=True)
    is_mode = (counts == top) & (top > 0)
    n_modes = is_mode.sum(axis=1, keepdims=True)
    return np.divide(is_mode, n_modes, out=np.zeros(counts.shape), where=n_modes > 0)


def median_positions(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Label positions of the lower and upper median of each row of ordered counts."""
    counts = np.asarray(counts)
    m = counts.sum(axis=1)
    cum = counts.cumsum(axis=1)
    lo = (cum < ((m + 1) // 2)[:, None]).sum(axis=1)
    hi = (cum < (m // 2 + 1)[:, None]).sum(axis=1)
    k = counts.shape[1]
    return np.minimum(lo, k - 1), np.minimum(hi, k - 1)


def median_bins(counts: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Label positions enclosing each row's median value (Beyond Correlation Eq. 1 bins).

    The median is the mean of the lower and upper median rating. When it equals a label (as for
    [2, 2, 3] or [2, 4] -> 3) both positions are that label's; otherwise (as for [2, 3] -> 2.5)
    they are the labels just below and just above it. Rows without labels give -1.
    """
    lo, hi = median_positions(counts)
    med = (values[lo] + values[hi]) / 2.0
    above = np.searchsorted(values, med, side="left")
    exact = values[np.minimum(above, len(values) - 1)] == med
    below = np.where(exact, above, above - 1)
    empty = np.asarray(counts).sum(axis=1) == 0
    return np.where(empty, -1, below), np.where(empty, -1, above)


def soft_median(counts: np.ndarray, values: np.ndarray) -> np.ndarray:
    """One-hot of each row's median label; a median between two labels is split ½/½ between
    the labels just below and above it (see :func:`median_bins`)."""
    below, above = median_bins(counts, values)
    out = np.zeros(np.shape(counts))
    has = np.flatnonzero(below >= 0)
    np.add.at(out, (has, below[has]), 0.5)
    np.add.at(out, (has, above[has]), 0.5)
    return out


def nullable_floats(frame: pd.DataFrame, columns: Iterable[str]) -> pd.DataFrame:
    """Store ``columns`` as pandas' nullable ``Float64``: an undefined value is ``<NA>``
    (explained by the frame's ``reason`` column), never a NaN produced by arithmetic."""
    for col in columns:
        if col in frame.columns:
            frame[col] = pd.array(
                [
                    None if v is None or (isinstance(v, float) and math.isnan(v)) else v
                    for v in frame[col]
                ],
                dtype="Float64",
            )
    return frame


# --------------------------------------------------------------------------------------------
# Pivot
# --------------------------------------------------------------------------------------------


def pivot_labels(annotations: pd.DataFrame, rater: str = "annotator") -> pd.DataFrame:
    """Items x raters matrix of labels, NaN where a rater did not label an item.

    Raises :class:`ValueError` if a rater labelled the same item twice.
    """
    ann = annotations.loc[annotations["label"].notna()]
    item_code, items = pd.factorize(ann["item"], sort=True)
    rater_code, raters = pd.factorize(ann[rater], sort=True)
    flat = item_code.astype(np.int64) * len(raters) + rater_code
    if len(np.unique(flat)) != len(flat):
        raise ValueError(f"some ({'item'}, {rater}) pairs have more than one label")
    labels = ann["label"].to_numpy()
    numeric = labels.dtype.kind in "iufb"
    out = np.full(
        len(items) * len(raters), np.nan if numeric else None, dtype=float if numeric else object
    )
    out[flat] = labels
    return pd.DataFrame(
        out.reshape(len(items), len(raters)),
        index=pd.Index(items, name="item"),
        columns=pd.Index(raters, name=rater),
    )


# --------------------------------------------------------------------------------------------
# Majority vote and Likert summaries
# --------------------------------------------------------------------------------------------


def majority_vote(
    data: pd.DataFrame | LabelCounts, *, labels: Sequence[Hashable] | None = None
) -> pd.DataFrame:
    """Most frequent human label per item, with ties reported rather than broken.

    Returns one row per item: ``item``, ``label`` (the unique mode, or missing when tied), ``n``
    (annotations), ``top_count``, ``share`` (``top_count / n``), ``n_modes`` and ``tied``.
    The tied labels themselves are listed by :func:`modal_labels`.
    """
    lc = as_label_counts(data, labels=labels)
    c = lc.human
    top = c.max(axis=1)
    is_mode = c == top[:, None]
    n_modes = is_mode.sum(axis=1)
    code = np.where(n_modes == 1, is_mode.argmax(axis=1), -1)
    n = c.sum(axis=1)
    return pd.DataFrame(
        {
            "item": lc.items,
            "label": pd.Categorical.from_codes(code, categories=lc.labels),
            "n": n,
            "top_count": top,
            "share": top / n,
            "n_modes": n_modes,
            "tied": n_modes > 1,
        }
    )


def modal_labels(
    data: pd.DataFrame | LabelCounts, *, labels: Sequence[Hashable] | None = None
) -> pd.DataFrame:
    """All most-frequent labels of each item, one row per (item, label): the set of tied modes."""
    lc = as_label_counts(data, labels=labels)
    c = lc.human
    rows, cols = np.nonzero(c == c.max(axis=1, keepdims=True))
    return pd.DataFrame(
        {
            "item": lc.items[rows],
            "label": lc.labels[cols],
            "count": c[rows, cols],
            "n_modes": np.bincount(rows, minlength=c.shape[0])[rows],
        }
    )


def likert_summary(
    data: pd.DataFrame | LabelCounts, *, labels: Sequence[Hashable] | None = None
) -> pd.DataFrame:
    """Per-item mean and median of numeric (Likert) labels.

    Returns ``item``, ``n``, ``mean``, ``median`` (average of the two middle ratings when ``n`` is
    even), ``median_low``, ``median_high`` and ``std`` (population standard deviation).
    """
    lc = as_label_counts(data, labels=labels)
    vals = lc.ordinal_values()
    c = lc.human.astype(np.float64)
    n = c.sum(axis=1)
    mean = (c @ vals) / n
    var = (c @ vals**2) / n - mean**2
    lo, hi = median_positions(lc.human)
    return pd.DataFrame(
        {
            "item": lc.items,
            "n": n.astype(np.int64),
            "mean": mean,
            "median": (vals[lo] + vals[hi]) / 2.0,
            "median_low": vals[lo],
            "median_high": vals[hi],
            "std": np.sqrt(np.maximum(var, 0.0)),
        }
    )


# --------------------------------------------------------------------------------------------
# Pairwise preferences: soft voting and win rates
# --------------------------------------------------------------------------------------------


def soft_vote(data: pd.DataFrame | LabelCounts, *, threshold: float = 0.1) -> pd.DataFrame:
    """Soft-voting aggregation of pairwise preferences (ORA, Section 3.4 "Aggregation").

    Each annotation is a distribution over {A, B}: ``A`` = (1, 0), ``B`` = (0, 1) and ``tie``,
    ``both_good``, ``both_bad`` = (½, ½). Per item the distributions are averaged into
    ``p_a`` and ``p_b``; the item is a tie when ``|p_a - p_b| <= threshold`` (0.1 between model
    families, 0.2 within one), else the larger side wins. Since ``p_a - p_b = (n_A - n_B) / n``
    the comparison is made on counts, so it is exact at the threshold.

    Returns ``item``, ``n``, ``n_a``, ``n_b``, ``n_tie``, ``p_a``, ``p_b`` and ``outcome`` in
    {"A", "B", "tie"}.
    """
    if not 0 <= threshold <= 1:
        raise ValueError("threshold must be within [0, 1]")
    lc = as_label_counts(data, labels=PAIRWISE_LABELS)
    c = lc.human
    n_a, n_b = c[:, 0], c[:, 1]
    n_tie = c[:, 2:].sum(axis=1)
    n = c.sum(axis=1)
    p_a = (n_a + 0.5 * n_tie) / n
    p_b = (n_b + 0.5 * n_tie) / n
    is_tie = np.abs(n_a - n_b) <= threshold * n + 1e-9
    outcome = np.where(is_tie, "tie", np.where(n_a > n_b, "A", "B"))
    return pd.DataFrame(
        {
            "item": lc.items,
            "n": n,
            "n_a": n_a,
            "n_b": n_b,
            "n_tie": n_tie,
            "p_a": p_a,
            "p_b": p_b,
            "outcome": outcome,
        }
    )


def pairwise_win_rates(
    outcomes: pd.DataFrame,
    pairs: pd.DataFrame,
    *,
    n_boot: int = 1000,
    seed: SeedLike = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Win, tie and expected win rates per system pair (HREF Section 3 "Expected Win Rate").

    ``outcomes``: ``item``, ``outcome`` in {"A", "B", "tie"} (e.g. :func:`soft_vote`'s output);
    ``pairs``: ``item``, ``system_a``, ``system_b``. Each pair is reported in a canonical
    orientation (``system_1`` < ``system_2``), outcomes flipped where needed. One row per pair:
    ``n_items``, ``wins_1``, ``wins_2``, ``ties``, ``win_rate``, ``loss_rate``, ``tie_rate`` and
    ``expected_win_rate`` = (wins + ½ ties) / n with its bootstrap interval
    (``expected_win_rate_low``/``_high``).
    """
    merged = outcomes[["item", "outcome"]].merge(
        pairs[["item", "system_a", "system_b"]], on="item", how="inner", validate="one_to_one"
    )
    bad = ~merged["outcome"].isin(["A", "B", "tie"])
    if bad.any():
        raise ValueError(
            f"outcomes must be 'A', 'B' or 'tie', got {merged['outcome'][bad].unique()[:5]}"
        )
    a = merged["system_a"].astype(str).to_numpy()
    b = merged["system_b"].astype(str).to_numpy()
    swap = a > b
    first = np.where(swap, b, a)
    second = np.where(swap, a, b)
    out = merged["outcome"].to_numpy()
    win1 = np.where(swap, out == "B", out == "A")
    win2 = np.where(swap, out == "A", out == "B")
    tie = out == "tie"
    frame = pd.DataFrame({"system_1": first, "system_2": second, "w1": win1, "w2": win2, "t": tie})
    g = frame.groupby(["system_1", "system_2"], sort=True)[["w1", "w2", "t"]].sum()
    w1 = g["w1"].to_numpy(np.int64)
    w2 = g["w2"].to_numpy(np.int64)
    t = g["t"].to_numpy(np.int64)
    n = w1 + w2 + t
    ewr = (w1 + 0.5 * t) / n
    low = np.full(len(g), np.nan)
    high = np.full(len(g), np.nan)
    rng = as_generator(seed)
    for j in range(len(g)):  # loop over system pairs, not items
        freq = np.array([w1[j], w2[j], t[j]])
        keep = freq > 0
        vals = np.array([[1.0], [0.0], [0.5]])[keep]
        sums = bootstrap_sums(vals, freq[keep], n_boot, rng)
        lo, hi, _ = percentile_interval(sums[:, 0] / n[j], confidence)
        low[j] = np.nan if lo is None else lo
        high[j] = np.nan if hi is None else hi
    res = g.reset_index()[["system_1", "system_2"]]
    res["n_items"] = n
    res["wins_1"] = w1
    res["wins_2"] = w2
    res["ties"] = t
    res["win_rate"] = w1 / n
    res["loss_rate"] = w2 / n
    res["tie_rate"] = t / n
    res["expected_win_rate"] = ewr
    res["expected_win_rate_low"] = low
    res["expected_win_rate_high"] = high
    return res


# --------------------------------------------------------------------------------------------
# Position bias and the ORA prioritisation check
# --------------------------------------------------------------------------------------------


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (Holm 1979, "A simple sequentially rejective multiple
    test procedure"): with the ``m`` p-values sorted ascending, ``p_(i) × (m − i + 1)``, made
    non-decreasing by a running maximum and capped at 1; returned in the input order. The same
    values as ``statsmodels.stats.multitest.multipletests(method="holm")``, which also runs a
    full garbage collection on every call.

    >>> holm([0.01, 0.04, 0.03]).round(2).tolist()
    [0.03, 0.06, 0.06]
    """
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p, kind="stable")
    adjusted = np.maximum.accumulate(p[order] * np.arange(len(p), 0, -1))
    out = np.empty_like(p)
    out[order] = np.minimum(adjusted, 1.0)
    return out


def position_bias(annotations: pd.DataFrame, *, rater: str = "annotator") -> pd.DataFrame:
    """Share of left-hand choices overall and per rater, with a two-sided binomial test vs ½.

    Input has ``rater`` and either a boolean ``chose_left`` column (missing = no side chosen) or
    a ``raw`` column with ``"left"``/``"right"`` for a side (also graded, ``"left>>"`` …
    ``"right>>"``: a pairwise criterion's five-point answer) and anything else (``"tie"``,
    ``"="``, ``"both_good"``, ...) for no side. Choices without a side are excluded from the
    test and counted in ``n_excluded``. Uses :func:`scipy.stats.binomtest` (exact test).

    Returns rows ``scope`` ("overall" or "rater"), ``rater``, ``n`` (sided choices), ``n_left``,
    ``share_left``, ``p_value``, ``n_excluded`` and ``reason`` (why share/p are missing).
    """
    from scipy.stats import binomtest

    if "chose_left" in annotations.columns:
        col = annotations["chose_left"]
        sided = col.notna().to_numpy()
        left = np.zeros(len(col), dtype=bool)
        left[sided] = col[sided].astype(bool).to_numpy()
    elif "raw" in annotations.columns:
        raw = annotations["raw"].astype("string").str.lower().str.rstrip(">").to_numpy()
        left = raw == "left"
        sided = left | (raw == "right")
    else:
        raise ValueError("position_bias needs a 'chose_left' or a 'raw' column")
    code, raters = pd.factorize(annotations[rater], sort=True)
    n_r = np.bincount(code, weights=sided, minlength=len(raters)).astype(np.int64)
    left_r = np.bincount(code, weights=left & sided, minlength=len(raters)).astype(np.int64)
    excl_r = np.bincount(code, weights=~sided, minlength=len(raters)).astype(np.int64)
    scopes = ["overall"] + ["rater"] * len(raters)
    names: list[object] = [None, *raters]
    ns = np.concatenate([[n_r.sum()], n_r])
    lefts = np.concatenate([[left_r.sum()], left_r])
    excl = np.concatenate([[excl_r.sum()], excl_r])
    share = np.full(len(ns), np.nan)
    pval = np.full(len(ns), np.nan)
    reasons = [""] * len(ns)
    for j in range(len(ns)):  # loop over raters, not items
        if ns[j] == 0:
            reasons[j] = "no choice of a side: nothing to test"
            continue
        share[j] = lefts[j] / ns[j]
        pval[j] = binomtest(int(lefts[j]), int(ns[j]), 0.5, alternative="two-sided").pvalue
    frame = pd.DataFrame(
        {
            "scope": scopes,
            "rater": names,
            "n": ns,
            "n_left": lefts,
            "share_left": share,
            "p_value": pval,
            "n_excluded": excl,
            "reason": reasons,
        }
    )
    return nullable_floats(frame, ["share_left", "p_value"])


def prioritisation_check(
    frame: pd.DataFrame,
    *,
    priority: str = "priority",
    is_tie: str = "is_tie",
    percents: Sequence[float] = tuple(range(10, 101, 10)),
    n_orders: int = 1000,
    seed: SeedLike = 0,
) -> pd.DataFrame:
    """Tie rate among the top k% by priority vs random orders (ORA, Section 3.4 "Random Baseline").

    Items are sorted by decreasing ``priority`` (e.g. the KL divergence or cross-entropy between
    the two outputs; ties in the score keep input order). For each k the top
    ``ceil(k/100 * n)`` items are taken and their share of observed ties is compared with the
    share in the top of ``n_orders`` seeded random orders. In a uniformly random order the number
    of ties among the first ``m`` items is hypergeometric, so the random orders are simulated
    per k by hypergeometric draws, which have exactly the distribution of permutations; the exact
    expectation ``T/n`` is given as well. A useful priority shows ``tie_rate`` below
    ``random_mean`` at small k.

    Returns ``k_percent``, ``n_top``, ``tie_rate``, ``random_mean``, ``random_std`` (sample
    standard deviation over the orders), ``random_expected`` and ``n_orders``.
    """
    score = pd.to_numeric(frame[priority]).to_numpy(dtype=np.float64)
    ties = frame[is_tie].astype(bool).to_numpy()
    if np.isnan(score).any():
        raise ValueError(f"{priority!r} has missing values")
    n = len(score)
    if n == 0:
        raise ValueError("no items")
    order = np.argsort(-score, kind="stable")
    cum = np.cumsum(ties[order])
    total = int(ties.sum())
    rng = as_generator(seed)
    rows = []
    for k in percents:  # loop over the few k values
        if not 0 < k <= 100:
            raise ValueError("percents must lie in (0, 100]")
        m = max(1, math.ceil(k * n / 100 - 1e-9))
        draws = rng.hypergeometric(total, n - total, m, size=n_orders) / m if n_orders else []
        rows.append(
            {
                "k_percent": float(k),
                "n_top": m,
                "tie_rate": cum[m - 1] / m,
                "random_mean": float(np.mean(draws)) if n_orders else np.nan,
                "random_std": float(np.std(draws, ddof=1)) if n_orders > 1 else np.nan,
                "random_expected": total / n,
                "n_orders": n_orders,
            }
        )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# Worker-weighted labels: Dawid-Skene and MACE (crowd-kit, an optional extra)
# --------------------------------------------------------------------------------------------

CROWD_KIT_MISSING = (
    "Dawid-Skene and MACE need crowd-kit, an optional extra: pip install 'humeval[crowd]'"
)


def crowd_kit_available() -> bool:
    """Whether :mod:`crowdkit` can be imported (``pip install 'humeval[crowd]'``)."""
    import importlib.util

    return importlib.util.find_spec("crowdkit") is not None


@dataclass(frozen=True)
class WorkerModel:
    """Labels and worker reliabilities estimated by a worker-quality model.

    ``labels``: one row per item with ``item`` and ``label``. ``workers``: one row per worker
    with ``worker``, ``n_labels`` and ``reliability`` in [0, 1].
    """

    labels: pd.DataFrame
    workers: pd.DataFrame


def _crowd_frame(annotations: pd.DataFrame, rater: str) -> pd.DataFrame:
    for col in ("item", rater, "label"):
        if col not in annotations.columns:
            raise ValueError(f"annotations need a {col!r} column")
    ann = annotations.loc[annotations["label"].notna()]
    return pd.DataFrame(
        {
            "task": ann["item"].to_numpy(),
            "worker": ann[rater].astype(str).to_numpy(),
            "label": ann["label"].to_numpy(),
        }
    )


def _import_crowdkit() -> ModuleType:
    try:
        from crowdkit import aggregation
    except ImportError as exc:
        raise ImportError(CROWD_KIT_MISSING) from exc
    return aggregation


def _model(frame: pd.DataFrame, labels: pd.Series, reliability: pd.Series) -> WorkerModel:
    out = pd.DataFrame({"item": labels.index.to_numpy(), "label": labels.to_numpy()})
    n = frame.groupby("worker").size()
    workers = pd.DataFrame(
        {"worker": n.index.to_numpy(), "n_labels": n.to_numpy(), "reliability": 0.0}
    )
    workers["reliability"] = reliability.reindex(workers["worker"]).to_numpy(dtype=np.float64)
    return WorkerModel(out.sort_values("item", ignore_index=True), workers)


def dawid_skene(
    annotations: pd.DataFrame, *, rater: str = "annotator", n_iter: int = 100
) -> WorkerModel:
    """Dawid & Skene (1979) labels by EM over per-worker confusion matrices, via crowd-kit's
    ``DawidSkene`` (initialised from the majority vote, so deterministic).

    A worker's ``reliability`` is the prior-weighted diagonal of its confusion matrix,
    ``sum_c p_c P(label c | true c)`` (Dawid & Skene 1979, Section 2): the chance that its
    label is right. A worker labelling at random among two labels gets about 0.5.
    """
    agg = _import_crowdkit()
    frame = _crowd_frame(annotations, rater)
    with warnings.catch_warnings():  # crowd-kit's pandas deprecations, not ours
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        ds = agg.DawidSkene(n_iter=n_iter).fit(frame)
    errors, priors = ds.errors_, ds.priors_
    rel = {}
    for worker, block in errors.groupby(level=0):  # one confusion matrix per worker
        m = block.droplevel(0)
        rel[worker] = float(
            sum(priors[c] * m.at[c, c] for c in priors.index if c in m.index and c in m.columns)
        )
    return _model(frame, ds.labels_, pd.Series(rel, dtype=np.float64))


def mace(
    annotations: pd.DataFrame, *, rater: str = "annotator", seed: int = 0, n_restarts: int = 10
) -> WorkerModel:
    """MACE labels (Hovy et al. 2013, "Learning Whom to Trust with MACE", Section 2) via
    crowd-kit's ``MACE`` (variational Bayes, ``n_restarts`` seeded restarts).

    A worker's ``reliability`` is its competence, the posterior probability that it is not
    spamming (``1 - theta_j`` in the paper's notation): the share of its labels that copy the
    true label rather than a draw from its own spamming distribution.
    """
    agg = _import_crowdkit()
    frame = _crowd_frame(annotations, rater)
    with warnings.catch_warnings():  # crowd-kit's pandas deprecations, not ours
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        model = _fast_mace(agg.MACE)(n_restarts=n_restarts, random_state=seed).fit(frame)
    _, worker_names = pd.factorize(frame["worker"])  # crowd-kit's worker order
    competence = pd.Series(model.spamming_[:, 1], index=pd.Index(worker_names, name="worker"))
    return _model(frame, model.labels_, competence)


def _fast_mace(base: type) -> type:
    """crowd-kit's ``MACE`` with its E-step in NumPy instead of one pandas ``groupby`` per
    label and iteration (about 500 E-steps for 10 restarts): the same arithmetic on the same
    arrays, in the same layout — the gold-label marginals by task in ``factorize`` order,
    the strategy counts by worker and label in *sorted* order (crowd-kit's ``unstack``), the
    knowing counts by worker in ``factorize`` order — so its labels and competences equal
    crowd-kit's (``tests/unit/analysis/test_worker_models.py``)."""

    class FastMACE(base):  # type: ignore[misc, valid-type]
        def _e_step(
            self,
            annotation: pd.DataFrame,
            task_names: pd.Index,
            worker_names: pd.Index,
            label_names: pd.Index,
            tasks: np.ndarray,
            workers: np.ndarray,
            labels: np.ndarray,
        ) -> tuple[float, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
            n_tasks, n_labels, n_workers = len(task_names), len(label_names), len(worker_names)
            s0 = self.spamming_[workers, 0]
            s1 = self.spamming_[workers, 1]
            copy = s0 * self.thetas_[workers, labels]  # P(label | worker strategy), per row
            # per label: the row's likelihood if that label is the gold one
            each = copy[:, None] + s1[:, None] * (labels[:, None] == np.arange(n_labels))
            gold = np.ones((n_tasks, n_labels))
            np.multiply.at(gold, tasks, each)
            gold /= n_labels
            instance = gold.sum(axis=1)
            log_ml = float(np.log(instance + 1e-8).sum())
            strategy = (gold[tasks] / each).sum(axis=1) * copy / instance[tasks]
            knowing1 = gold[tasks, labels] * s1 / (copy + s1) / instance[tasks]
            w_order = np.argsort(np.asarray(pd.Index(worker_names).argsort()))  # code -> rank
            l_order = np.argsort(np.asarray(pd.Index(label_names).argsort()))
            strat = np.zeros((n_workers, n_labels))
            np.add.at(strat, (w_order[workers], l_order[labels]), strategy)
            know = np.zeros((n_workers, 2))
            np.add.at(know[:, 0], workers, strategy)
            np.add.at(know[:, 1], workers, knowing1)
            gold_frame = pd.DataFrame(gold, index=task_names, columns=label_names)
            strategy_frame = pd.DataFrame(strat)
            knowing_frame = pd.DataFrame(
                know,
                index=worker_names,
                columns=["knowing_expected_count_0", "knowing_expected_count_1"],
            )
            return log_ml, gold_frame, strategy_frame, knowing_frame

    return FastMACE
