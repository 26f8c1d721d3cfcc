"""Agreement and reliability of human and machine labels.

Human-human: leave-one-out agreement (HREF), percentage agreement (Beyond Correlation A.4),
Krippendorff's alpha, Fleiss' and Randolph's kappa. Human-machine: leave-one-out agreement of a
judge, agreement and Cohen's kappa with the human majority, rank and linear correlations with
the human median or mean, all also stratified by human uncertainty (Beyond Correlation 3.1).
Every estimate carries a percentile bootstrap interval over items (:mod:`analysis.aggregation`).

Where one label per item is needed (majorities H^w and M^w, the human median, one random human
H'), ties are not broken at random: the item casts a fractional vote over the tied labels, so
agreement equals its expectation over a uniform tie-break and every figure is deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import Literal

import numpy as np
import pandas as pd

from analysis.aggregation import (
    BOOTSTRAP_CACHE_CELLS,
    Estimate,
    LabelCounts,
    SeedLike,
    as_generator,
    as_label_counts,
    bootstrap_counts,
    bootstrap_sums,
    estimate_from_sums,
    find_patterns,
    median_bins,
    median_positions,
    nullable_floats,
    percentile_interval,
    soft_median,
    soft_mode,
)
from analysis.perception import bin_weights, jsd_reducer, jsd_terms

__all__ = [
    "Estimate",
    "cohens_kappa",
    "correlation",
    "fleiss_kappa",
    "correlation_p_value",
    "judge_correlations",
    "judge_sample_agreement",
    "judge_vs_majority",
    "krippendorff_alpha",
    "loo_agreement_inner",
    "loo_agreement_outer",
    "loo_agreement_per_item",
    "percentage_agreement",
    "percentage_agreement_per_item",
    "random_labeller",
    "randolph_kappa",
    "stratified_agreement",
]

Level = Literal["nominal", "ordinal", "interval", "ratio"]
TieBreak = Literal["expected", "random"]
Reducer = Callable[[np.ndarray], np.ndarray]

_NO_PAIRS = "no item has two or more labels: agreement cannot be observed"
_ONE_VALUE = "only one label value observed: expected disagreement is zero"


def _mean_terms(values: np.ndarray, defined: np.ndarray) -> np.ndarray:
    d = np.asarray(defined, dtype=np.float64)
    return np.column_stack([np.where(d > 0, values, 0.0) * d, d])


def _mean_reduce(s: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return s[:, 0] / s[:, 1]


# --------------------------------------------------------------------------------------------
# Leave-one-out agreement (HREF, Section 2.3 and Appendix D.4, Algorithm 1)
# --------------------------------------------------------------------------------------------


def _loo_match(counts: np.ndarray, held_out: int) -> np.ndarray:
    """Soft mode of the other labels when one ``held_out`` label is removed from each row."""
    others = counts.copy()
    others[:, held_out] -= 1
    return soft_mode(np.maximum(others, 0))


def _loo_expected(counts: np.ndarray, target: np.ndarray | None) -> np.ndarray:
    """Expected LOO agreement per row; ``target`` None = inner, else judge label distribution."""
    counts = np.asarray(counts, dtype=np.int64)
    m = counts.sum(axis=1)
    hits = np.zeros(counts.shape[0])
    for c in range(counts.shape[1]):  # loop over labels, not items
        has = counts[:, c] > 0
        if not has.any():
            continue
        mode = _loo_match(counts[has], c)
        match = mode[:, c] if target is None else (mode * target[has]).sum(axis=1)
        hits[has] += counts[has, c] * match
    with np.errstate(divide="ignore", invalid="ignore"):
        return hits / m


def _loo_random(
    counts: np.ndarray, target_code: np.ndarray | None, rng: np.random.Generator
) -> np.ndarray:
    """Number of LOO matches per row with the paper's random choice among tied modes."""
    counts = np.asarray(counts, dtype=np.int64)
    hits = np.zeros(counts.shape[0], dtype=np.int64)
    rows = np.arange(counts.shape[0])
    for c in range(counts.shape[1]):  # loop over labels, not items
        mode = _loo_match(counts, c)
        if target_code is None:
            p = mode[:, c]
        else:
            p = np.where(target_code >= 0, mode[rows, np.maximum(target_code, 0)], 0.0)
        hits += rng.binomial(counts[:, c], np.clip(p, 0.0, 1.0))
    return hits


def loo_agreement_per_item(
    data: pd.DataFrame | LabelCounts,
    judges: pd.DataFrame | None = None,
    *,
    labels: Sequence[Hashable] | None = None,
) -> pd.DataFrame:
    """Per-item expected leave-one-out agreement: ``item``, ``n``, ``inner`` and one column per
    judge (``outer_<judge>``). Items with fewer than two human labels have missing values."""
    lc = as_label_counts(data, judges, labels)
    m = lc.human.sum(axis=1)
    out = pd.DataFrame({"item": lc.items, "n": m})
    inner = _loo_expected(lc.human, None)
    out["inner"] = np.where(m >= 2, inner, np.nan)
    for name, jc in lc.judges.items():
        mj = jc.sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            target = jc / mj[:, None]
        outer = _loo_expected(lc.human, np.nan_to_num(target))
        out[f"outer_{name}"] = np.where((m >= 2) & (mj > 0), outer, np.nan)
    return out


def loo_agreement_inner(
    data: pd.DataFrame | LabelCounts,
    *,
    labels: Sequence[Hashable] | None = None,
    tie_break: TieBreak = "expected",
    n_boot: int = 1000,
    seed: SeedLike = 0,
    confidence: float = 0.95,
) -> Estimate:
    """Inner leave-one-out agreement among humans (HREF Appendix D.4, Algorithm 1, inner).

    For each item and each annotation, the held-out label is compared with the mode of the
    item's other labels; the item's rate is the share of matches, and the estimate is the mean
    over items with at least two labels. When the others' mode is tied among ``t`` labels the
    paper picks one at random; ``tie_break="expected"`` (default) counts the match as ``1/t`` if
    the held-out label is among them (the exact expectation, deterministic), ``"random"`` draws
    the pick with ``seed``. E.g. labels [1, 1, 2, 2] give 0 and [1, 1, 2] give 1/3.
    """
    lc = as_label_counts(data, labels=labels)
    if tie_break == "random":
        return _loo_random_estimate(lc, None, seed, n_boot, confidence)
    if tie_break != "expected":
        raise ValueError(f"tie_break must be 'expected' or 'random', got {tie_break!r}")
    pat = lc.patterns()
    c = pat.rows
    defined = c.sum(axis=1) >= 2
    vp = _mean_terms(_loo_expected(c, None), defined)
    n = int(pat.freq @ defined)
    if n == 0:
        return Estimate.undefined(_NO_PAIRS)
    return estimate_from_sums(
        vp, pat.freq, _mean_reduce, n=n, n_boot=n_boot, seed=seed, confidence=confidence
    )


def loo_agreement_outer(
    data: pd.DataFrame | LabelCounts,
    judges: pd.DataFrame | None = None,
    *,
    judge: str | None = None,
    labels: Sequence[Hashable] | None = None,
    tie_break: TieBreak = "expected",
    n_boot: int = 1000,
    seed: SeedLike = 0,
    confidence: float = 0.95,
) -> Estimate:
    """Outer leave-one-out agreement of a judge with the humans (HREF Algorithm 1, outer).

    For each of the ``n`` human labels of an item, the judge's label is compared with the mode
    of the other ``n - 1`` human labels; the item's rate is the share of matches and the estimate
    the mean over items with at least two human labels and a judge label. Ties as in
    :func:`loo_agreement_inner`. A judge with several labels for an item is scored on each,
    weighted equally. E.g. humans [1, 1, 2, 2] with judge 1 give ½; [1, 1, 2] with judge 1, ⅔.
    """
    lc = as_label_counts(data, judges, labels)
    name, _ = lc.judge_counts(judge)
    if tie_break == "random":
        return _loo_random_estimate(lc, name, seed, n_boot, confidence)
    if tie_break != "expected":
        raise ValueError(f"tie_break must be 'expected' or 'random', got {tie_break!r}")
    pat = lc.patterns(name)
    k = len(lc.labels)
    c, jc = pat.rows[:, :k], pat.rows[:, k:]
    mj = jc.sum(axis=1)
    defined = (c.sum(axis=1) >= 2) & (mj > 0)
    target = np.divide(jc, mj[:, None], out=np.zeros(jc.shape), where=mj[:, None] > 0)
    vp = _mean_terms(_loo_expected(c, target), defined)
    n = int(pat.freq @ defined)
    if n == 0:
        return Estimate.undefined(f"no item has two or more human labels and a label from {name!r}")
    return estimate_from_sums(
        vp, pat.freq, _mean_reduce, n=n, n_boot=n_boot, seed=seed, confidence=confidence
    )


def _loo_random_estimate(
    lc: LabelCounts, judge: str | None, seed: SeedLike, n_boot: int, confidence: float
) -> Estimate:
    rng = as_generator(seed)
    m = lc.human.sum(axis=1)
    defined = m >= 2
    target = None
    if judge is not None:
        jc = lc.judges[judge]
        target = np.where(jc.sum(axis=1) > 0, _pick(jc, rng), -1)
        defined &= target >= 0
    hits = _loo_random(lc.human, target, rng)
    pat = find_patterns(np.column_stack([hits, m, defined]).astype(np.int64))
    d = pat.rows[:, 2] > 0
    rate = np.divide(pat.rows[:, 0], pat.rows[:, 1], out=np.zeros(len(d)), where=d)
    n = int(pat.freq @ d)
    if n == 0:
        return Estimate.undefined(_NO_PAIRS)
    return estimate_from_sums(
        _mean_terms(rate, d),
        pat.freq,
        _mean_reduce,
        n=n,
        n_boot=n_boot,
        seed=rng,
        confidence=confidence,
    )


def _pick(counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    cum = np.cumsum(counts, axis=1)
    u = rng.random(counts.shape[0]) * cum[:, -1]
    return np.minimum((cum <= u[:, None]).sum(axis=1), counts.shape[1] - 1)


# --------------------------------------------------------------------------------------------
# Percentage agreement (Beyond Correlation, Appendix A.4, Eq. 3; Section 3.1)
# --------------------------------------------------------------------------------------------


def _pa_values(counts: np.ndarray, reference: str, values: np.ndarray | None = None) -> np.ndarray:
    counts = np.asarray(counts)
    m = counts.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        if reference == "mode":
            top = counts.max(axis=1)
            return np.where(top > 1, top / m, 0.0)
        if reference == "median":
            below, above = median_bins(counts, values)
            rows = np.arange(len(m))
            share = np.maximum(counts[rows, below], counts[rows, above]) / m
            return np.where(below >= 0, share, np.nan)
    raise ValueError(f"reference must be 'mode' or 'median', got {reference!r}")


def percentage_agreement_per_item(
    data: pd.DataFrame | LabelCounts,
    *,
    labels: Sequence[Hashable] | None = None,
    reference: Literal["mode", "median"] = "mode",
) -> pd.DataFrame:
    """Per-item percentage agreement, number of labels and of distinct labels.

    ``reference="mode"`` is Eq. 3 of Beyond Correlation A.4: the share of the most frequent
    label if it has more than one vote, else 0. ``"median"`` is the ordinal variant of Section
    3.1: the share of labels equal to the median value; when the median falls between two
    labels (e.g. 2.5), the larger share of those two labels.
    Items with fewer than two labels have a missing value (no agreement can be observed).
    """
    lc = as_label_counts(data, labels=labels)
    values = lc.ordinal_values() if reference == "median" else None
    m = lc.human.sum(axis=1)
    pa = _pa_values(lc.human, reference, values)
    return pd.DataFrame(
        {
            "item": lc.items,
            "n": m,
            "n_unique": (lc.human > 0).sum(axis=1),
            "percentage_agreement": np.where(m >= 2, pa, np.nan),
        }
    )


def percentage_agreement(
    data: pd.DataFrame | LabelCounts,
    *,
    labels: Sequence[Hashable] | None = None,
    reference: Literal["mode", "median"] = "mode",
    n_boot: int = 1000,
    seed: SeedLike = 0,
    confidence: float = 0.95,
) -> Estimate:
    """Mean percentage agreement over items with two or more labels (Beyond Correlation A.4,
    Eq. 3); see :func:`percentage_agreement_per_item` for the per-item definition."""
    lc = as_label_counts(data, labels=labels)
    values = lc.ordinal_values() if reference == "median" else None
    pat = lc.patterns()
    defined = pat.rows.sum(axis=1) >= 2
    n = int(pat.freq @ defined)
    if n == 0:
        return Estimate.undefined(_NO_PAIRS)
    vp = _mean_terms(_pa_values(pat.rows, reference, values), defined)
    return estimate_from_sums(
        vp, pat.freq, _mean_reduce, n=n, n_boot=n_boot, seed=seed, confidence=confidence
    )


# --------------------------------------------------------------------------------------------
# Krippendorff's alpha
# --------------------------------------------------------------------------------------------


def _alpha_terms(counts: np.ndarray) -> np.ndarray:
    """Coincidence terms of items with >= 2 values: o_cd for c < d, then the value marginals."""
    c = np.asarray(counts, dtype=np.float64)
    m = c.sum(axis=1)
    pairable = m >= 2
    scale = np.divide(1.0, m - 1.0, out=np.zeros(len(m)), where=pairable)
    iu, ju = np.triu_indices(c.shape[1], k=1)
    pair = c[:, iu] * c[:, ju] * scale[:, None]
    return np.hstack([pair, c * pairable[:, None]])


def _alpha_terms_two(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Expected coincidence terms of two raters with label distributions ``x`` and ``y``."""
    iu, ju = np.triu_indices(x.shape[1], k=1)
    pair = x[:, iu] * y[:, ju] + x[:, ju] * y[:, iu]
    return np.hstack([pair, x + y])


def _alpha_reducer(level: Level, values: np.ndarray | None, k: int) -> Reducer:
    """Alpha = 1 - (n - 1) sum o_cd d_cd / sum n_c n_d d_cd over c < d (Krippendorff 2011)."""
    iu, ju = np.triu_indices(k, k=1)
    if level in ("interval", "ratio"):
        if values is None:
            raise ValueError(f"{level} alpha needs numeric labels")
        v1, v2 = values[iu], values[ju]
        if level == "interval":
            fixed = (v1 - v2) ** 2
        else:
            s = v1 + v2
            fixed = np.divide(v1 - v2, s, out=np.zeros(len(s)), where=s != 0) ** 2
    elif level == "nominal":
        fixed = np.ones(len(iu))
    elif level == "ordinal":
        fixed = None
    else:
        raise ValueError(f"unknown level of measurement {level!r}")
    t = len(iu)

    def reduce(s: np.ndarray) -> np.ndarray:
        o = s[:, :t]
        nv = s[:, t : t + k]
        n = nv.sum(axis=1)
        if fixed is None:
            cum = np.concatenate([np.zeros((len(s), 1)), np.cumsum(nv, axis=1)], axis=1)
            between = cum[:, ju + 1] - cum[:, iu]
            dist = (between - (nv[:, iu] + nv[:, ju]) / 2.0) ** 2
        else:
            dist = np.broadcast_to(fixed, o.shape)
        observed = (o * dist).sum(axis=1)
        expected = (nv[:, iu] * nv[:, ju] * dist).sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return 1.0 - (n - 1.0) * observed / expected

    return reduce


def krippendorff_alpha(
    data: pd.DataFrame | LabelCounts,
    *,
    level: Level = "nominal",
    labels: Sequence[Hashable] | None = None,
    n_boot: int = 1000,
    seed: SeedLike = 0,
    confidence: float = 0.95,
) -> Estimate:
    """Krippendorff's alpha among the human labels, via the ``krippendorff`` package.

    Levels ``nominal``, ``ordinal``, ``interval`` and ``ratio`` (Krippendorff 2011, "Computing
    Krippendorff's alpha-reliability"; used for human-human agreement by Judge-Bench, Section 4,
    and Beyond Correlation, Section 2). Items with a single label are not pairable and do not
    count. Ordinal and interval levels need numeric, increasing labels (ordinal uses only their
    order). Undefined when no item has two labels or when a single label value is pairable.
    """
    import krippendorff

    lc = as_label_counts(data, labels=labels)
    k = len(lc.labels)
    if level in ("interval", "ratio") or (level == "ordinal" and lc.values is not None):
        values = lc.ordinal_values()
    else:  # nominal, or ordinal on non-numeric labels in their declared order
        values = None
    pat = lc.patterns()
    pairable = pat.rows.sum(axis=1) >= 2
    n = int(pat.freq @ pairable)
    if n == 0:
        return Estimate.undefined(_NO_PAIRS)
    used = (pat.rows[pairable] > 0).any(axis=0)
    if used.sum() < 2:
        return Estimate.undefined(_ONE_VALUE, n=n)
    domain = values if values is not None else np.arange(k, dtype=np.float64)
    point = float(
        krippendorff.alpha(value_counts=lc.human, value_domain=domain, level_of_measurement=level)
    )
    vp = _alpha_terms(pat.rows)
    reduce = _alpha_reducer(level, domain, k)
    est = estimate_from_sums(
        vp, pat.freq, reduce, n=n, n_boot=n_boot, seed=seed, confidence=confidence
    )
    return Estimate(point, est.low, est.high, n, est.n_boot, est.reason)


# --------------------------------------------------------------------------------------------
# Fleiss' and Randolph's kappa
# --------------------------------------------------------------------------------------------


def _fleiss_terms(counts: np.ndarray, m: float) -> np.ndarray:
    c = np.asarray(counts, dtype=np.float64)
    p_i = ((c**2).sum(axis=1) - m) / (m * (m - 1.0))
    return np.column_stack([p_i, np.ones(len(c)), c])


def _fleiss_terms_two(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.column_stack([(x * y).sum(axis=1), np.ones(len(x)), x + y])


def _kappa_reducer(method: str, m: float, k: int) -> Reducer:
    """Fleiss 1971: (P - Pe) / (1 - Pe); Randolph 2005: Pe = 1 / k (free marginals)."""

    def reduce(s: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            p_bar = s[:, 0] / s[:, 1]
            if method == "fleiss":
                p_cat = s[:, 2 : 2 + k] / (s[:, [1]] * m)
                p_e = (p_cat**2).sum(axis=1)
            else:
                p_e = np.full(len(s), 1.0 / k)
            out = (p_bar - p_e) / (1.0 - p_e)
        return np.where(np.isclose(p_e, 1.0), np.nan, out)

    return reduce


def _gwet_terms(counts: np.ndarray) -> np.ndarray:
    """Per-item terms of Gwet's (2014, Eq. 2.8-2.9) generalised kappa: ``[p_i, r_i >= 2,
    r_i >= 1, r_ik / r_i ...]`` with ``p_i = sum_k r_ik (r_ik - 1) / (r_i (r_i - 1))`` (0 when
    ``r_i < 2``)."""
    c = np.asarray(counts, dtype=np.float64)
    r = c.sum(axis=1)
    rated, seen = r >= 2, r >= 1
    with np.errstate(divide="ignore", invalid="ignore"):
        p_i = np.where(rated, (c * (c - 1.0)).sum(axis=1) / (r * (r - 1.0)), 0.0)
        share = np.where(seen[:, None], c / r[:, None], 0.0)
    return np.column_stack([p_i, rated, seen, share])


def _gwet_reducer(method: str, k: int) -> Reducer:
    """kappa = (p_a - p_e) / (1 - p_e) with p_a the mean of the per-item agreements over items
    with two or more labels and p_e = sum_k pi_k^2, pi_k the mean share of label k over all
    labelled items (Fleiss), or 1/k (Randolph)."""

    def reduce(s: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            p_a = s[:, 0] / s[:, 1]
            if method == "fleiss":
                p_e = ((s[:, 3 : 3 + k] / s[:, [2]]) ** 2).sum(axis=1)
            else:
                p_e = np.full(len(s), 1.0 / k)
            out = (p_a - p_e) / (1.0 - p_e)
        return np.where(np.isclose(p_e, 1.0), np.nan, out)

    return reduce


def _multi_kappa(
    data: pd.DataFrame | LabelCounts,
    method: Literal["fleiss", "randolph"],
    labels: Sequence[Hashable] | None,
    n_boot: int,
    seed: SeedLike,
    confidence: float,
) -> Estimate:
    from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

    lc = as_label_counts(data, labels=labels)
    k = len(lc.labels)
    pat = lc.patterns()
    m = pat.rows.sum(axis=1)
    rated = m >= 2
    n = int(pat.freq @ rated)
    if n == 0:
        return Estimate.undefined(_NO_PAIRS)
    if method == "randolph" and k < 2:
        return Estimate.undefined("Randolph's kappa needs at least two declared labels", n=n)
    table = lc.human[lc.human.sum(axis=1) >= 2]
    if method == "fleiss" and (table.sum(axis=0) > 0).sum() < 2:
        return Estimate.undefined("only one label value observed: chance agreement is one", n=n)
    est = estimate_from_sums(
        _gwet_terms(pat.rows),
        pat.freq,
        _gwet_reducer(method, k),
        n=n,
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
    )
    if len(np.unique(m[m > 0])) == 1:  # the classic statistic: statsmodels gives the point
        point = float(sm_fleiss_kappa(table, method=method))
        return Estimate(point, est.low, est.high, n, est.n_boot, est.reason)
    return est


def fleiss_kappa(
    data: pd.DataFrame | LabelCounts,
    *,
    labels: Sequence[Hashable] | None = None,
    n_boot: int = 1000,
    seed: SeedLike = 0,
    confidence: float = 0.95,
) -> Estimate:
    """Fleiss' kappa (Fleiss 1971), generalised to items with different numbers of labels
    (Gwet 2014, *Handbook of Inter-Rater Reliability*, Eq. 2.8-2.9; irrCAC ``fleiss()``).

    ``p_a`` is the mean over items with two or more labels of
    ``sum_k r_ik (r_ik - 1) / (r_i (r_i - 1))``; chance ``p_e = sum_k pi_k^2`` with ``pi_k``
    the mean over all labelled items of ``r_ik / r_i`` (Beyond Correlation, Section 2.1). With
    the same number of labels on every item this is Fleiss' kappa and the point comes from
    statsmodels. Example:
    items {1,1,2}, {1,2}: p_a = (1/3 + 0) / 2 = 1/6, pi = (7/12, 5/12), p_e = 74/144, kappa =
    -0.7143. Undefined when a single label was used.
    """
    return _multi_kappa(data, "fleiss", labels, n_boot, seed, confidence)


def randolph_kappa(
    data: pd.DataFrame | LabelCounts,
    *,
    labels: Sequence[Hashable] | None = None,
    n_boot: int = 1000,
    seed: SeedLike = 0,
    confidence: float = 0.95,
) -> Estimate:
    """Randolph's free-marginal kappa (Randolph 2005): chance agreement 1/k, with k the size of
    the declared label set (not the observed one), via statsmodels ``method='randolph'``; with
    different numbers of labels per item ``p_a`` is generalised as in :func:`fleiss_kappa`
    (Gwet 2014's Brennan-Prediger coefficient, irrCAC ``bp()``)."""
    return _multi_kappa(data, "randolph", labels, n_boot, seed, confidence)


# --------------------------------------------------------------------------------------------
# Cohen's kappa
# --------------------------------------------------------------------------------------------

Weights = Literal["linear", "quadratic"] | None


def _weight_matrix(k: int, weights: Weights) -> np.ndarray:
    idx = np.arange(k)
    diff = np.abs(idx[:, None] - idx[None, :]).astype(np.float64)
    if weights is None:
        return (diff > 0).astype(np.float64)
    if weights == "linear":
        return diff
    if weights == "quadratic":
        return diff**2
    raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")


def _cohen_reducer(k: int, weights: Weights) -> Reducer:
    """kappa_w = 1 - sum w_ij o_ij / sum w_ij e_ij (Cohen 1960, 1968)."""
    w = _weight_matrix(k, weights)

    def reduce(s: np.ndarray) -> np.ndarray:
        o = s[:, : k * k].reshape(-1, k, k)
        n = o.sum(axis=(1, 2))
        e = o.sum(axis=2)[:, :, None] * o.sum(axis=1)[:, None, :] / n[:, None, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            return 1.0 - (o * w).sum(axis=(1, 2)) / (e * w).sum(axis=(1, 2))

    return reduce


def cohens_kappa(
    rater1: Sequence[Hashable] | np.ndarray | pd.Series,
    rater2: Sequence[Hashable] | np.ndarray | pd.Series,
    *,
    labels: Sequence[Hashable] | None = None,
    weights: Weights = None,
    n_boot: int = 1000,
    seed: SeedLike = 0,
    confidence: float = 0.95,
) -> Estimate:
    """Cohen's kappa of two raters over the same items (Cohen 1960; weighted: Cohen 1968).

    ``weights=None`` is the unweighted kappa; ``"linear"`` and ``"quadratic"`` weigh a
    disagreement by ``|i - j|`` or ``(i - j)**2`` with ``i, j`` the positions of the labels in
    ``labels`` (which must then be ordered). Pairs with a missing label are dropped. Judge-Bench
    (Section 4) uses it for categorical judge-vs-human agreement. Undefined when chance
    disagreement is zero (both raters used one and the same label).
    """
    a = pd.Series(np.asarray(rater1, dtype=object))
    b = pd.Series(np.asarray(rater2, dtype=object))
    if len(a) != len(b):
        raise ValueError("the two raters must label the same items")
    keep = (a.notna() & b.notna()).to_numpy()
    a, b = a[keep], b[keep]
    if labels is None:
        label_index = pd.Index(sorted(pd.unique(pd.concat([a, b]).to_numpy()), key=_sort_key))
    else:
        label_index = pd.Index(list(labels))
    ca, cb = label_index.get_indexer(a.to_numpy()), label_index.get_indexer(b.to_numpy())
    if (ca < 0).any() or (cb < 0).any():
        raise ValueError(f"labels outside the declared set {list(label_index)}")
    k = len(label_index)
    n = len(ca)
    if n == 0:
        return Estimate.undefined("no item labelled by both raters")
    cell = ca.astype(np.int64) * k + cb
    pat = find_patterns(cell[:, None])
    vp = np.zeros((len(pat.freq), k * k))
    vp[np.arange(len(pat.freq)), pat.rows[:, 0]] = 1.0
    return estimate_from_sums(
        vp,
        pat.freq,
        _cohen_reducer(k, weights),
        n=n,
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
        undefined="chance disagreement is zero: both raters gave one and the same label",
    )


def _sort_key(x: object) -> tuple[int, object]:
    return (0, x) if isinstance(x, int | float | np.number) else (1, str(x))


# --------------------------------------------------------------------------------------------
# Correlations
# --------------------------------------------------------------------------------------------

Method = Literal["spearman", "kendall", "pearson"]
_TABLE_LIMIT = 2_000_000


def _weighted_pearson(t: np.ndarray, xv: np.ndarray, yv: np.ndarray) -> np.ndarray:
    """Pearson r of the (b, Lx, Ly) count tables with level scores xv (b, Lx), yv (b, Ly)."""
    n = t.sum(axis=(1, 2))
    rx, cy = t.sum(axis=2), t.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mx = (rx * xv).sum(axis=1) / n
        my = (cy * yv).sum(axis=1) / n
        dx = xv - mx[:, None]
        dy = yv - my[:, None]
        cov = np.einsum("bij,bi,bj->b", t, dx, dy)
        vx = (rx * dx**2).sum(axis=1)
        vy = (cy * dy**2).sum(axis=1)
        return cov / np.sqrt(vx * vy)


def _midranks(margin: np.ndarray) -> np.ndarray:
    return np.cumsum(margin, axis=1) - margin + (margin + 1.0) / 2.0


def _table_correlation(t: np.ndarray, xv: np.ndarray, yv: np.ndarray, method: Method) -> np.ndarray:
    """Correlation from contingency tables of distinct x and y values (exact, with ties)."""
    b = t.shape[0]
    if method == "pearson":
        return _weighted_pearson(
            t, np.broadcast_to(xv, (b, len(xv))), np.broadcast_to(yv, (b, len(yv)))
        )
    if method == "spearman":
        return _weighted_pearson(t, _midranks(t.sum(axis=2)), _midranks(t.sum(axis=1)))
    if method == "kendall":  # tau-b: (P - Q) / sqrt((n0 - n1)(n0 - n2))
        below = np.cumsum(t[:, ::-1, :], axis=1)[:, ::-1, :] - t  # sum over rows a' > a
        right = np.cumsum(below[:, :, ::-1], axis=2)[:, :, ::-1] - below  # b' > b
        left = np.cumsum(below, axis=2) - below  # b' < b
        s = (t * (right - left)).sum(axis=(1, 2))
        n = t.sum(axis=(1, 2))
        n0 = n * (n - 1) / 2.0
        rx, cy = t.sum(axis=2), t.sum(axis=1)
        n1 = (rx * (rx - 1) / 2.0).sum(axis=1)
        n2 = (cy * (cy - 1) / 2.0).sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return s / np.sqrt((n0 - n1) * (n0 - n2))
    raise ValueError(f"method must be 'spearman', 'kendall' or 'pearson', got {method!r}")


def correlation(
    x: Sequence[float] | np.ndarray | pd.Series,
    y: Sequence[float] | np.ndarray | pd.Series,
    *,
    method: Method = "spearman",
    n_boot: int = 1000,
    seed: SeedLike = 0,
    confidence: float = 0.95,
) -> Estimate:
    """Spearman's rho, Kendall's tau-b or Pearson's r of paired values (scipy.stats).

    For graded human-vs-judge comparisons (Judge-Bench Section 4 uses Spearman; Beyond
    Correlation Section 2.3 discusses the ties these scales produce). The point value comes from
    :mod:`scipy.stats`; the bootstrap recomputes it exactly from contingency tables of the
    distinct values, which handles ties as scipy does. Pairs with a missing value are dropped.
    """
    return _correlation(x, y, method, n_boot, seed, confidence)[0]


def _correlation(
    x: Sequence[float] | np.ndarray | pd.Series,
    y: Sequence[float] | np.ndarray | pd.Series,
    method: Method,
    n_boot: int,
    seed: SeedLike,
    confidence: float,
) -> tuple[Estimate, float | None]:
    """:func:`correlation` and :func:`correlation_p_value` from one scipy call."""
    from scipy import stats

    xa = np.asarray(x, dtype=np.float64)
    ya = np.asarray(y, dtype=np.float64)
    if xa.shape != ya.shape:
        raise ValueError("x and y must have the same length")
    keep = np.isfinite(xa) & np.isfinite(ya)
    xa, ya = xa[keep], ya[keep]
    n = len(xa)
    if n < 3:
        return Estimate.undefined("fewer than three pairs: correlation not estimable", n=n), None
    if np.all(xa == xa[0]) or np.all(ya == ya[0]):
        which = "x" if np.all(xa == xa[0]) else "y"
        return Estimate.undefined(f"{which} is constant: correlation undefined", n=n), None
    if method == "spearman":
        res = stats.spearmanr(xa, ya)
    elif method == "kendall":
        res = stats.kendalltau(xa, ya, variant="b")
    elif method == "pearson":
        res = stats.pearsonr(xa, ya)
    else:
        raise ValueError(f"method must be 'spearman', 'kendall' or 'pearson', got {method!r}")
    point, p = float(res.statistic), float(res.pvalue)
    p = p if math.isfinite(p) else None
    if n_boot <= 0:
        return Estimate(point, n=n, reason="no bootstrap interval: n_boot=0"), p
    xl, xi = np.unique(xa, return_inverse=True)
    yl, yi = np.unique(ya, return_inverse=True)
    lx, ly = len(xl), len(yl)
    pat = find_patterns(np.column_stack([xi, yi]).astype(np.int64))
    if lx * ly <= _TABLE_LIMIT and n_boot * len(pat.freq) <= 10 * _TABLE_LIMIT:
        counts = bootstrap_counts(pat.freq, n_boot, seed)
        cells = pat.rows[:, 0] * ly + pat.rows[:, 1]
        step = max(1, _TABLE_LIMIT // (lx * ly))
        parts = []
        for start in range(0, n_boot, step):  # chunks of replicates, bounded memory
            chunk = counts[start : start + step]
            t = np.zeros((len(chunk), lx * ly))
            t[:, cells] = chunk
            parts.append(_table_correlation(t.reshape(-1, lx, ly), xl, yl, method))
        reps_arr = np.concatenate(parts)
    else:  # nearly continuous data: resample indices, one scipy call per replicate
        rng = as_generator(seed)
        fn = {"spearman": stats.spearmanr, "kendall": stats.kendalltau, "pearson": stats.pearsonr}
        reps_arr = np.array(
            [fn[method](xa[i], ya[i]).statistic for i in rng.integers(0, n, size=(n_boot, n))]
        )
    low, high, n_ok = percentile_interval(reps_arr, confidence)
    reason = ""
    if n_ok < n_boot:
        reason = f"interval from the {n_ok} of {n_boot} resamples in which it was defined"
    return Estimate(point, low, high, n=n, n_boot=n_ok, reason=reason), p


# --------------------------------------------------------------------------------------------
# Human vs judge
# --------------------------------------------------------------------------------------------


def _aggregate(counts: np.ndarray, values: np.ndarray, how: str) -> np.ndarray:
    m = counts.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        if how == "mean":
            return np.where(m > 0, (counts @ values) / m, np.nan)
        if how == "median":
            lo, hi = median_positions(counts)
            return np.where(m > 0, (values[lo] + values[hi]) / 2.0, np.nan)
    raise ValueError(f"aggregate must be 'median' or 'mean', got {how!r}")


def judge_correlations(
    data: pd.DataFrame | LabelCounts,
    judges: pd.DataFrame | None = None,
    *,
    judge: str | None = None,
    labels: Sequence[Hashable] | None = None,
    aggregate: Literal["median", "mean"] = "median",
    methods: Sequence[Method] = ("spearman", "kendall", "pearson"),
    n_boot: int = 1000,
    seed: SeedLike = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Item-level correlation of the human median (or mean) with the judge's label (its median
    or mean over samples), for graded labels (Judge-Bench Section 4; Beyond Correlation Table 2
    H̄M̄ and HμMμ). One row per method with the :class:`Estimate` fields and the two-sided
    ``p_value`` of :func:`correlation_p_value`."""
    lc = as_label_counts(data, judges, labels)
    name, _ = lc.judge_counts(judge)
    values = lc.ordinal_values()
    pat, k = lc.patterns(name), len(lc.labels)  # aggregate each distinct pattern once
    x = _aggregate(pat.rows[:, :k], values, aggregate)[pat.inverse]
    y = _aggregate(pat.rows[:, k:], values, aggregate)[pat.inverse]
    rows = []
    for method in methods:
        est, p = _correlation(x, y, method, n_boot, seed, confidence)
        rows.append(
            {
                "judge": name,
                "aggregate": aggregate,
                "metric": method,
                **est.as_dict(),
                "p_value": p,
            }
        )
    return nullable_floats(pd.DataFrame(rows), ["value", "low", "high", "p_value"])


def correlation_p_value(
    x: Sequence[float] | np.ndarray | pd.Series,
    y: Sequence[float] | np.ndarray | pd.Series,
    *,
    method: Method = "spearman",
) -> float | None:
    """Two-sided p-value of H0 "no correlation" from :mod:`scipy.stats` (``pearsonr``: exact t
    test; ``spearmanr``: t approximation; ``kendalltau``: exact for small n without ties, else
    normal), as Judge-Bench reports. Pairs with a missing value are dropped; ``None`` when the
    correlation is undefined (fewer than three pairs or a constant side)."""
    from scipy import stats

    xa = np.asarray(x, dtype=np.float64)
    ya = np.asarray(y, dtype=np.float64)
    keep = np.isfinite(xa) & np.isfinite(ya)
    xa, ya = xa[keep], ya[keep]
    if len(xa) < 3 or np.all(xa == xa[0]) or np.all(ya == ya[0]):
        return None
    fn = {"spearman": stats.spearmanr, "kendall": stats.kendalltau, "pearson": stats.pearsonr}
    if method not in fn:
        raise ValueError(f"method must be 'spearman', 'kendall' or 'pearson', got {method!r}")
    p = float(fn[method](xa, ya).pvalue)
    return p if math.isfinite(p) else None


def random_labeller(
    data: pd.DataFrame | LabelCounts,
    *,
    labels: Sequence[Hashable] | None = None,
    distribution: Literal["human", "uniform"] = "human",
    n_boot: int = 1000,
    seed: SeedLike = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Expected agreement of a random labeller with the humans, in closed form (Beyond
    Correlation Section 3.1, Fig. 2, the baseline R^w of Fig. 1).

    The labeller draws label ``c`` with probability ``pi_c``: the share of ``c`` among all human
    labels (``distribution="human"``) or ``1/k`` (``"uniform"``, the paper's choice). Rows:
    ``accuracy`` = mean over items of ``sum_c pi_c h_ic`` with ``h_i`` the human majority (tied
    modes share the vote), the expectation of :func:`judge_vs_majority`'s accuracy; and
    ``loo_outer`` = :func:`loo_agreement_outer` with the judge's label distribution set to
    ``pi`` on every item. ``pi`` is held fixed; the interval resamples items. Example: humans
    [A, A], [A, B], pi = (3/4, 1/4): accuracy = (3/4 + 1/2) / 2 = 0.625.
    """
    lc = as_label_counts(data, labels=labels)
    k = len(lc.labels)
    totals = lc.human.sum(axis=0).astype(np.float64)
    if distribution == "human":
        pi = totals / totals.sum() if totals.sum() else np.full(k, np.nan)
    elif distribution == "uniform":
        pi = np.full(k, 1.0 / k)
    else:
        raise ValueError(f"distribution must be 'human' or 'uniform', got {distribution!r}")
    pat = lc.patterns()
    m = pat.rows.sum(axis=1)
    rows = []
    seen = m >= 1
    n = int(pat.freq @ seen)
    acc = (
        estimate_from_sums(
            _mean_terms(soft_mode(pat.rows) @ pi, seen),
            pat.freq,
            _mean_reduce,
            n=n,
            n_boot=n_boot,
            seed=seed,
            confidence=confidence,
        )
        if n
        else Estimate.undefined("no human labels")
    )
    rows.append({"metric": "accuracy", **acc.as_dict()})
    rated = m >= 2
    n2 = int(pat.freq @ rated)
    target = np.broadcast_to(pi, pat.rows.shape)
    loo = (
        estimate_from_sums(
            _mean_terms(_loo_expected(pat.rows, target), rated),
            pat.freq,
            _mean_reduce,
            n=n2,
            n_boot=n_boot,
            seed=seed,
            confidence=confidence,
        )
        if n2
        else Estimate.undefined(_NO_PAIRS)
    )
    rows.append({"metric": "loo_outer", **loo.as_dict()})
    out = pd.DataFrame(rows)
    out.insert(0, "distribution", distribution)
    return nullable_floats(out, ["value", "low", "high"])


def judge_sample_agreement(
    judges: pd.DataFrame,
    *,
    labels: Sequence[Hashable] | None = None,
    level: Level = "nominal",
    key: Sequence[str] = ("item",),
    n_boot: int = 1000,
    seed: SeedLike = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Machine-vs-machine agreement: how far several samples of one judge agree on each item
    (Beyond Correlation Section 2 and Table 1, MM beside HH).

    ``judges``: one row per sample, with ``judge``, ``label`` (or ``value``), the item ``key``
    columns (``item``, or e.g. ``("input", "pair")``) and optionally ``sample``. The samples of
    an item are treated as its raters: percentage agreement (A.4, Eq. 3) and Krippendorff's
    alpha at ``level``, over items with two or more samples. A judge with one sample per item
    gets a row whose ``reason`` says it needs two or more. One row per (judge, metric) with
    ``judge``, ``metric``, ``n_samples`` (most samples on an item) and the :class:`Estimate`
    fields.
    """
    value_col = "label" if "label" in judges.columns else "value"
    for col in ("judge", value_col, *key):
        if col not in judges.columns:
            raise ValueError(f"judge samples need a {col!r} column")
    frame = judges.loc[judges[value_col].notna()]
    if "sample" in frame.columns and frame.duplicated(["judge", *key, "sample"]).any():
        raise ValueError("some (judge, item, sample) rows occur more than once")
    item = (
        frame[key[0]]
        if len(key) == 1
        else pd.Series(list(zip(*(frame[c] for c in key), strict=True)), index=frame.index)
    )
    long = pd.DataFrame(
        {"judge": frame["judge"].astype(str), "item": item, "label": frame[value_col]}
    )
    rows = []
    for name, part in long.groupby("judge", sort=True):
        lc = LabelCounts.from_frames(part, labels=labels)
        n_samples = int(lc.human.sum(axis=1).max()) if lc.n_items else 0
        if n_samples < 2:
            why = "needs two or more samples per item; this judge has one"
            ests = {m: Estimate.undefined(why) for m in ("percentage_agreement", "alpha")}
        else:
            kw = {"n_boot": n_boot, "seed": seed, "confidence": confidence}
            ests = {
                "percentage_agreement": percentage_agreement(lc, **kw),
                "alpha": krippendorff_alpha(lc, level=level, **kw),
            }
        for metric, est in ests.items():
            metric_name = "krippendorff_alpha" if metric == "alpha" else metric
            rows.append(
                {"judge": name, "metric": metric_name, "n_samples": n_samples, **est.as_dict()}
            )
    out = pd.DataFrame(
        rows,
        columns=["judge", "metric", "n_samples", "value", "low", "high", "n", "n_boot", "reason"],
    )
    return nullable_floats(out, ["value", "low", "high"])


def judge_vs_majority(
    data: pd.DataFrame | LabelCounts,
    judges: pd.DataFrame | None = None,
    *,
    judge: str | None = None,
    labels: Sequence[Hashable] | None = None,
    weights: Weights = None,
    n_boot: int = 1000,
    seed: SeedLike = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Categorical agreement of a judge with the human majority (H^w M^w).

    ``accuracy`` is the share of items where the judge's (majority) label equals the human
    majority; ``cohen_kappa`` is Cohen's kappa of the two (Judge-Bench Section 4). Tied
    majorities count as fractional votes (module docstring). One row per metric.
    """
    lc = as_label_counts(data, judges, labels)
    name, _ = lc.judge_counts(judge)
    pat = lc.patterns(name)
    k = len(lc.labels)
    hw = soft_mode(pat.rows[:, :k])
    mw = soft_mode(pat.rows[:, k:])
    both = (pat.rows[:, :k].sum(axis=1) > 0) & (pat.rows[:, k:].sum(axis=1) > 0)
    n = int(pat.freq @ both)
    if n == 0:
        empty = Estimate.undefined(f"no item has both human labels and a label from {name!r}")
        rows = [
            {"judge": name, "metric": mt, **empty.as_dict()} for mt in ("accuracy", "cohen_kappa")
        ]
        return nullable_floats(pd.DataFrame(rows), ["value", "low", "high"])
    acc = estimate_from_sums(
        _mean_terms((hw * mw).sum(axis=1), both),
        pat.freq,
        _mean_reduce,
        n=n,
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
    )
    conf = (hw[:, :, None] * mw[:, None, :]).reshape(len(hw), k * k) * both[:, None]
    kap = estimate_from_sums(
        conf,
        pat.freq,
        _cohen_reducer(k, weights),
        n=n,
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
        undefined="chance disagreement is zero: humans and judge used one and the same label",
    )
    rows = [
        {"judge": name, "metric": "accuracy", **acc.as_dict()},
        {"judge": name, "metric": "cohen_kappa", **kap.as_dict()},
    ]
    return nullable_floats(pd.DataFrame(rows), ["value", "low", "high"])


# --------------------------------------------------------------------------------------------
# Stratification by human uncertainty (Beyond Correlation, Section 3.1, Tables 1-3, 7-8)
# --------------------------------------------------------------------------------------------


def _strata_by_pa(pa: np.ndarray, edges: Sequence[float]) -> tuple[np.ndarray, list[str]]:
    e = sorted(float(x) for x in edges)
    if any(not 0 < x < 1 for x in e):
        raise ValueError("edges must lie strictly between 0 and 1")
    names = ["PA = 1"]
    bounds = [*e[::-1]]
    uppers = ["1", *[_fmt(x) for x in e[::-1]]]
    for j, lo in enumerate(bounds):
        names.append(f"{_fmt(lo)} <= PA < {uppers[j]}")
    names.append(f"PA < {_fmt(e[0])}" if e else "PA < 1")
    stratum = np.full(len(pa), len(names) - 1)
    stratum[pa >= 1.0] = 0
    for j, lo in enumerate(bounds):
        upper = 1.0 if j == 0 else bounds[j - 1]
        stratum[(pa >= lo) & (pa < upper)] = j + 1
    return stratum, names


def _fmt(x: float) -> str:
    return f"{x:g}"


def stratified_agreement(
    data: pd.DataFrame | LabelCounts,
    judges: pd.DataFrame | None = None,
    *,
    judge: str | None = None,
    labels: Sequence[Hashable] | None = None,
    level: Literal["nominal", "ordinal"] = "nominal",
    by: Literal["percentage_agreement", "n_unique"] = "percentage_agreement",
    edges: Sequence[float] = (0.6, 0.8),
    n_boot: int = 1000,
    seed: SeedLike = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Human-human vs human-machine agreement per stratum of human uncertainty.

    Items with two or more human labels and a judge label are stratified by percentage agreement
    (``by="percentage_agreement"``: ``PA = 1``, then ``[e_j, e_j+1)`` for ``edges``; Eq. 3 of A.4,
    or the share of the median label for ordinal data) or by the number of distinct human labels
    (``"n_unique"``), plus ``all`` (Beyond Correlation, Section 3.1). One row per (stratum,
    metric): ``hh``, ``hm`` (H^w M^w; for ``jsd_b`` all labels), ``h1m`` (H' M^w) and
    ``delta = hh - hm``, each with intervals from the same resamples; ``reason`` for gaps.
    Metrics: alpha at ``level``, percentage agreement, Fleiss' and Randolph's kappa, JS_b.
    """
    lc = as_label_counts(data, judges, labels)
    name, _ = lc.judge_counts(judge)
    pat = lc.patterns(name)
    k = len(lc.labels)
    c, jc = pat.rows[:, :k], pat.rows[:, k:]
    m = c.sum(axis=1)
    valid = (m >= 2) & (jc.sum(axis=1) > 0)
    if level == "ordinal":
        values = lc.ordinal_values()
        hw, mw = soft_median(c, values), soft_median(jc, values)
        pa = _pa_values(c, "median", values)
        binning = "median"
    elif level == "nominal":
        values = lc.values if lc.values is not None else np.arange(k, dtype=np.float64)
        hw, mw = soft_mode(c), soft_mode(jc)
        pa = _pa_values(c, "mode")
        binning = "mode"
    else:
        raise ValueError("level must be 'nominal' or 'ordinal'")
    with np.errstate(divide="ignore", invalid="ignore"):
        h1 = np.nan_to_num(c / m[:, None])
    if by == "percentage_agreement":
        stratum, names = _strata_by_pa(pa, edges)
    elif by == "n_unique":
        uniq = (c > 0).sum(axis=1)
        levels = np.unique(uniq[valid]) if valid.any() else np.array([], dtype=int)
        names = [f"unique = {u}" for u in levels]
        stratum = np.searchsorted(levels, uniq)
    else:
        raise ValueError("by must be 'percentage_agreement' or 'n_unique'")

    _, bw = bin_weights(c, lc.labels, binning, "split")
    blocks: list[tuple[str, str, np.ndarray, Reducer, str]] = []
    alpha_red = _alpha_reducer(level, values, k)
    ones = np.ones(len(c))
    blocks += [
        ("alpha", "hh", _alpha_terms(c), alpha_red, _ONE_VALUE),
        ("alpha", "hm", _alpha_terms_two(hw, mw), alpha_red, _ONE_VALUE),
        ("alpha", "h1m", _alpha_terms_two(h1, mw), alpha_red, _ONE_VALUE),
        ("percentage_agreement", "hh", _mean_terms(pa, ones), _mean_reduce, ""),
        ("percentage_agreement", "hm", _mean_terms((hw * mw).sum(axis=1), ones), _mean_reduce, ""),
        ("percentage_agreement", "h1m", _mean_terms((h1 * mw).sum(axis=1), ones), _mean_reduce, ""),
    ]
    kappa_two = {"hm": _fleiss_terms_two(hw, mw), "h1m": _fleiss_terms_two(h1, mw)}
    for method in ("fleiss", "randolph"):
        one = "only one label value observed: chance agreement is one"
        blocks.append((method, "hh", np.zeros((len(c), 0)), None, one))  # filled per stratum
        for comp, terms in kappa_two.items():
            blocks.append((method, comp, terms, _kappa_reducer(method, 2.0, k), one))
    blocks.append(("jsd_b", "hm", jsd_terms(c, jc, bw), jsd_reducer(k, k), "no machine labels"))

    rows = []
    total_valid = int(pat.freq @ valid)
    strata = [("all", valid)] + [(nm, valid & (stratum == j)) for j, nm in enumerate(names)]
    # every stratum is evaluated on the same resamples of all items
    rng = as_generator(seed)
    weights = None
    if 0 < n_boot and n_boot * len(pat.freq) <= BOOTSTRAP_CACHE_CELLS:
        weights = bootstrap_counts(pat.freq, n_boot, seed)
    for sname, mask in strata:  # loop over the few strata
        idx = np.flatnonzero(mask)
        n_s = int(pat.freq @ mask)
        stats: dict[tuple[str, str], Estimate] = {}
        reps: dict[tuple[str, str], np.ndarray] = {}
        sizes = np.unique(m[mask & (pat.freq > 0)])
        fixed_m = float(sizes[0]) if len(sizes) == 1 else None
        hh_kappa = _fleiss_terms(c, fixed_m) if fixed_m else np.zeros((len(c), 2 + k))
        cols, slices, reducers, reasons = [], [], [], []
        start, placed = 0, {}  # Fleiss' and Randolph's kappa share their terms: summed once
        for metric, comp, terms, red, why in blocks:
            if metric in ("fleiss", "randolph") and comp == "hh":
                terms = hh_kappa
                red = _kappa_reducer(metric, fixed_m or 2.0, k)
                if fixed_m is None:
                    why = f"{metric} kappa needs the same number of human labels on every item"
            if id(terms) not in placed:
                cols.append(terms[idx])
                placed[id(terms)] = slice(start, start + terms.shape[1])
                start += terms.shape[1]
            slices.append(placed[id(terms)])
            reducers.append(red)
            reasons.append(why)
        vp = np.hstack(cols)
        total = (pat.freq[idx] @ vp)[None, :]
        if n_s == 0 or n_boot <= 0:
            sums = np.zeros((0, start))
        elif weights is not None:  # the stratum's columns of the shared resample counts
            sums = (weights if len(idx) == len(pat.freq) else weights[:, idx]) @ vp
        else:
            full = np.zeros((len(pat.freq), start))
            full[idx] = vp
            sums = bootstrap_sums(full, pat.freq, n_boot, rng)
        for (metric, comp, *_), sl, red, why in zip(blocks, slices, reducers, reasons, strict=True):
            key = (metric, comp)
            if n_s == 0:
                stats[key] = Estimate.undefined("no items in this stratum")
                continue
            if metric in ("fleiss", "randolph") and comp == "hh" and fixed_m is None:
                stats[key] = Estimate.undefined(why, n=n_s)
                continue
            with np.errstate(divide="ignore", invalid="ignore"):
                point = float(red(total[:, sl])[0])
                rep = np.asarray(red(sums[:, sl])) if len(sums) else np.zeros(0)
            if not math.isfinite(point):
                stats[key] = Estimate.undefined(why or "undefined", n=n_s)
                continue
            reps[key] = rep
            lo, hi, n_ok = percentile_interval(rep, confidence) if len(rep) else (None, None, 0)
            stats[key] = Estimate(point, lo, hi, n_s, n_ok)
        for metric in ("alpha", "percentage_agreement", "fleiss", "randolph", "jsd_b"):
            rows.append(_strat_row(name, sname, n_s, total_valid, metric, stats, reps, confidence))
    cols = [f"{c}{s}" for c in ("hh", "hm", "h1m", "delta") for s in ("", "_low", "_high")]
    return nullable_floats(pd.DataFrame(rows), cols)


def _strat_row(
    judge: str,
    stratum: str,
    n_s: int,
    total: int,
    metric: str,
    stats: dict[tuple[str, str], Estimate],
    reps: dict[tuple[str, str], np.ndarray],
    confidence: float,
) -> dict[str, object]:
    row: dict[str, object] = {
        "judge": judge,
        "stratum": stratum,
        "n_items": n_s,
        "share": n_s / total if total else 0.0,
        "metric": metric,
    }
    reasons = []
    for comp in ("hh", "hm", "h1m"):
        est = stats.get((metric, comp))
        if est is None:
            est = Estimate.undefined(
                "JS_b compares humans with a machine: no human-human value"
                if comp == "hh"
                else "JS_b needs all human labels: no single-human value"
            )
        row[comp], row[f"{comp}_low"], row[f"{comp}_high"] = est.value, est.low, est.high
        if est.reason:
            reasons.append(f"{comp}: {est.reason}")
    hh, hm = stats.get((metric, "hh")), stats.get((metric, "hm"))
    if hh is not None and hm is not None and hh.defined and hm.defined:
        row["delta"] = hh.value - hm.value
        lo, hi, _ = percentile_interval(reps[(metric, "hh")] - reps[(metric, "hm")], confidence)
        row["delta_low"], row["delta_high"] = lo, hi
    else:
        row["delta"] = row["delta_low"] = row["delta_high"] = None
        if hh is not None or hm is not None:
            reasons.append("delta: needs both hh and hm")
    row["reason"] = "; ".join(reasons)
    return row
