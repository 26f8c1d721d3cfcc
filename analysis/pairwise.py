"""Pairwise statistics: expected win rates, Holm's adjustment, position bias and the ORA
prioritisation check. Outcomes come from :func:`analysis.aggregation.soft_vote`.
Users' view: ``docs/analysis.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from analysis.aggregation import nullable_floats
from analysis.estimates import SeedLike, as_generator, bootstrap_sums, percentile_interval

__all__ = [
    "holm",
    "pairwise_win_rates",
    "position_bias",
    "prioritisation_check",
]


# --------------------------------------------------------------------------------------------
# Win rates
# --------------------------------------------------------------------------------------------


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
    test and counted in ``n_excluded``. The test is exact, as :func:`scipy.stats.binomtest`'s:
    at ½ the binomial is symmetric, so ``p = min(1, 2 P(X ≤ min(k, n − k)))``.

    Returns rows ``scope`` ("overall" or "rater"), ``rater``, ``n`` (sided choices), ``n_left``,
    ``share_left``, ``p_value``, ``n_excluded`` and ``reason`` (why share/p are missing).
    """
    from scipy.stats import binom

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
    tested = ns > 0
    share = np.where(tested, lefts / np.maximum(ns, 1), np.nan)
    tail = binom.cdf(np.minimum(lefts, ns - lefts), ns, 0.5)
    pval = np.where(tested, np.minimum(1.0, 2.0 * tail), np.nan)
    reasons = ["" if t else "no choice of a side: nothing to test" for t in tested]
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
        draws: np.ndarray | list[float] = (
            rng.hypergeometric(total, n - total, m, size=n_orders) / m if n_orders else []
        )
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
