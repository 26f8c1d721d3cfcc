"""Agreement and reliability of labels.

Human-human: leave-one-out agreement (HREF), percentage agreement (Beyond Correlation A.4),
Krippendorff's alpha, Fleiss' and Randolph's kappa (and Gwet's), Cohen's kappa between two
raters. Leave-one-out agreement of a judge is here too; the other human-machine figures are in
:mod:`analysis.judges`. Every estimate carries a percentile bootstrap interval over items
(:mod:`analysis.estimates`).

Where one label per item is needed (majorities H^w and M^w, the human median, one random human
H'), ties are not broken at random: the item casts a fractional vote over the tied labels, so
agreement equals its expectation over a uniform tie-break and every figure is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Literal, cast

import numpy as np
import pandas as pd

from analysis.aggregation import median_bins, soft_mode
from analysis.counts import LabelCounts, as_label_counts, find_patterns
from analysis.estimates import Estimate, SeedLike, as_generator, estimate_from_sums

__all__ = [
    "Estimate",
    "cohens_kappa",
    "fleiss_kappa",
    "krippendorff_alpha",
    "loo_agreement_inner",
    "loo_agreement_outer",
    "loo_agreement_per_item",
    "percentage_agreement",
    "percentage_agreement_per_item",
    "randolph_kappa",
]

Level = Literal["nominal", "ordinal", "interval", "ratio"]
TieBreak = Literal["expected", "random"]
Reducer = Callable[[np.ndarray], np.ndarray]

NO_PAIRS = "no item has two or more labels: agreement cannot be observed"
ONE_VALUE = "only one label value observed: expected disagreement is zero"


def mean_terms(values: np.ndarray, defined: np.ndarray) -> np.ndarray:
    d = np.asarray(defined, dtype=np.float64)
    return np.column_stack([np.where(d > 0, values, 0.0) * d, d])


def mean_reduce(s: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        means: np.ndarray = s[:, 0] / s[:, 1]
        return means


# --------------------------------------------------------------------------------------------
# Leave-one-out agreement (HREF, Section 2.3 and Appendix D.4, Algorithm 1)
# --------------------------------------------------------------------------------------------


def _loo_match(counts: np.ndarray, held_out: int) -> np.ndarray:
    """Soft mode of the other labels when one ``held_out`` label is removed from each row."""
    others = counts.copy()
    others[:, held_out] -= 1
    return soft_mode(np.maximum(others, 0))


def loo_expected(counts: np.ndarray, target: np.ndarray | None) -> np.ndarray:
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
        rate: np.ndarray = hits / m
        return rate


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
    inner = loo_expected(lc.human, None)
    out["inner"] = np.where(m >= 2, inner, np.nan)
    for name, jc in lc.judges.items():
        mj = jc.sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            target = jc / mj[:, None]
        outer = loo_expected(lc.human, np.nan_to_num(target))
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
    vp = mean_terms(loo_expected(c, None), defined)
    n = int(pat.freq @ defined)
    if n == 0:
        return Estimate.undefined(NO_PAIRS)
    return estimate_from_sums(
        vp, pat.freq, mean_reduce, n=n, n_boot=n_boot, seed=seed, confidence=confidence
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
    vp = mean_terms(loo_expected(c, target), defined)
    n = int(pat.freq @ defined)
    if n == 0:
        return Estimate.undefined(f"no item has two or more human labels and a label from {name!r}")
    return estimate_from_sums(
        vp, pat.freq, mean_reduce, n=n, n_boot=n_boot, seed=seed, confidence=confidence
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
        return Estimate.undefined(NO_PAIRS)
    return estimate_from_sums(
        mean_terms(rate, d),
        pat.freq,
        mean_reduce,
        n=n,
        n_boot=n_boot,
        seed=rng,
        confidence=confidence,
    )


def _pick(counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    cum = np.cumsum(counts, axis=1)
    u = rng.random(counts.shape[0]) * cum[:, -1]
    picked: np.ndarray = np.minimum((cum <= u[:, None]).sum(axis=1), counts.shape[1] - 1)
    return picked


# --------------------------------------------------------------------------------------------
# Percentage agreement (Beyond Correlation, Appendix A.4, Eq. 3; Section 3.1)
# --------------------------------------------------------------------------------------------


def pa_values(counts: np.ndarray, reference: str, values: np.ndarray | None = None) -> np.ndarray:
    counts = np.asarray(counts)
    m = counts.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        if reference == "mode":
            top = counts.max(axis=1)
            return np.where(top > 1, top / m, 0.0)
        if reference == "median":
            below, above = median_bins(counts, cast(np.ndarray, values))
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
    pa = pa_values(lc.human, reference, values)
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
        return Estimate.undefined(NO_PAIRS)
    vp = mean_terms(pa_values(pat.rows, reference, values), defined)
    return estimate_from_sums(
        vp, pat.freq, mean_reduce, n=n, n_boot=n_boot, seed=seed, confidence=confidence
    )


# --------------------------------------------------------------------------------------------
# Krippendorff's alpha
# --------------------------------------------------------------------------------------------


def alpha_terms(counts: np.ndarray) -> np.ndarray:
    """Coincidence terms of items with >= 2 values: o_cd for c < d, then the value marginals."""
    c = np.asarray(counts, dtype=np.float64)
    m = c.sum(axis=1)
    pairable = m >= 2
    scale = np.divide(1.0, m - 1.0, out=np.zeros(len(m)), where=pairable)
    iu, ju = np.triu_indices(c.shape[1], k=1)
    pair = c[:, iu] * c[:, ju] * scale[:, None]
    return np.hstack([pair, c * pairable[:, None]])


def alpha_terms_two(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Expected coincidence terms of two raters with label distributions ``x`` and ``y``."""
    iu, ju = np.triu_indices(x.shape[1], k=1)
    pair = x[:, iu] * y[:, ju] + x[:, ju] * y[:, iu]
    return np.hstack([pair, x + y])


def alpha_reducer(level: Level, values: np.ndarray | None, k: int) -> Reducer:
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
            alpha: np.ndarray = 1.0 - (n - 1.0) * observed / expected
            return alpha

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
    """Krippendorff's alpha among the human labels.

    Levels ``nominal``, ``ordinal``, ``interval`` and ``ratio`` (Krippendorff 2011, "Computing
    Krippendorff's alpha-reliability"; used for human-human agreement by Judge-Bench, Section 4,
    and Beyond Correlation, Section 2). Items with a single label are not pairable and do not
    count. Ordinal and interval levels need numeric, increasing labels (ordinal uses only their
    order). Undefined when no item has two labels or when a single label value is pairable.
    """
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
        return Estimate.undefined(NO_PAIRS)
    used = (pat.rows[pairable] > 0).any(axis=0)
    if used.sum() < 2:
        return Estimate.undefined(ONE_VALUE, n=n)
    domain = values if values is not None else np.arange(k, dtype=np.float64)
    vp = alpha_terms(pat.rows)
    reduce = alpha_reducer(level, domain, k)
    point = float(reduce((pat.freq @ vp)[None, :])[0])  # the study's own coincidence sums
    est = estimate_from_sums(
        vp, pat.freq, reduce, n=n, n_boot=n_boot, seed=seed, confidence=confidence
    )
    return Estimate(point, est.low, est.high, n, est.n_boot, est.reason)


# --------------------------------------------------------------------------------------------
# Fleiss' and Randolph's kappa
# --------------------------------------------------------------------------------------------


def fleiss_terms(counts: np.ndarray, m: float) -> np.ndarray:
    c = np.asarray(counts, dtype=np.float64)
    p_i = ((c**2).sum(axis=1) - m) / (m * (m - 1.0))
    return np.column_stack([p_i, np.ones(len(c)), c])


def fleiss_terms_two(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.column_stack([(x * y).sum(axis=1), np.ones(len(x)), x + y])


def kappa_reducer(method: str, m: float, k: int) -> Reducer:
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
        return Estimate.undefined(NO_PAIRS)
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
    diff: np.ndarray = np.abs(idx[:, None] - idx[None, :]).astype(np.float64)
    if weights is None:
        unweighted: np.ndarray = (diff > 0).astype(np.float64)
        return unweighted
    if weights == "linear":
        return diff
    if weights == "quadratic":
        squared: np.ndarray = diff**2
        return squared
    raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")


def cohen_reducer(k: int, weights: Weights) -> Reducer:
    """kappa_w = 1 - sum w_ij o_ij / sum w_ij e_ij (Cohen 1960, 1968)."""
    w = _weight_matrix(k, weights)

    def reduce(s: np.ndarray) -> np.ndarray:
        o = s[:, : k * k].reshape(-1, k, k)
        n = o.sum(axis=(1, 2))
        e = o.sum(axis=2)[:, :, None] * o.sum(axis=1)[:, None, :] / n[:, None, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            kappa: np.ndarray = 1.0 - (o * w).sum(axis=(1, 2)) / (e * w).sum(axis=(1, 2))
            return kappa

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
        cohen_reducer(k, weights),
        n=n,
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
        undefined="chance disagreement is zero: both raters gave one and the same label",
    )


def _sort_key(x: object) -> tuple[int, object]:
    return (0, x) if isinstance(x, int | float | np.number) else (1, str(x))
