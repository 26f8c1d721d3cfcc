"""Agreement of judges with humans: correlations with the human median or mean, a random
labeller's baseline, agreement between a judge's samples, agreement and Cohen's kappa with
the human majority, and all of it stratified by human uncertainty (Beyond Correlation 3.1).

Every estimate carries a percentile bootstrap interval over items (:mod:`analysis.estimates`);
ties are voted fractionally as in :mod:`analysis.agreement`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any, Literal, cast

import numpy as np
import pandas as pd

from analysis.aggregation import median_positions, nullable_floats, soft_median, soft_mode
from analysis.agreement import (
    NO_PAIRS,
    ONE_VALUE,
    Level,
    Reducer,
    Weights,
    alpha_reducer,
    alpha_terms,
    alpha_terms_two,
    cohen_reducer,
    fleiss_terms,
    fleiss_terms_two,
    kappa_reducer,
    krippendorff_alpha,
    loo_expected,
    mean_reduce,
    mean_terms,
    pa_values,
    percentage_agreement,
)
from analysis.correlation import Method, correlation_estimates, pair_table
from analysis.counts import LabelCounts, as_label_counts, factorize_text, label_codes
from analysis.estimates import (
    BLOCK_ROWS,
    BOOTSTRAP_CACHE_CELLS,
    Estimate,
    SeedLike,
    as_generator,
    bootstrap_counts,
    bootstrap_sums,
    estimate_from_sums,
    percentile_interval,
)
from analysis.perception import bin_weights, jsd_reducer, jsd_terms

__all__ = [
    "judge_correlations",
    "judge_sample_agreement",
    "judge_vs_majority",
    "random_labeller",
    "stratified_agreement",
]

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
    x = _aggregate(pat.rows[:, :k], values, aggregate)
    y = _aggregate(pat.rows[:, k:], values, aggregate)
    keep = np.isfinite(x) & np.isfinite(y)
    table = pair_table(x[keep], y[keep], pat.freq[keep])  # as the items would give it
    item_pat = pat.inverse[keep[pat.inverse]]
    rows = []
    ests = correlation_estimates(x[item_pat], y[item_pat], methods, n_boot, seed, confidence, table)
    for method, (est, p) in zip(methods, ests, strict=True):
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
            mean_terms(soft_mode(pat.rows) @ pi, seen),
            pat.freq,
            mean_reduce,
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
            mean_terms(loo_expected(pat.rows, target), rated),
            pat.freq,
            mean_reduce,
            n=n2,
            n_boot=n_boot,
            seed=seed,
            confidence=confidence,
        )
        if n2
        else Estimate.undefined(NO_PAIRS)
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
        if len(factorize_text(part["item"])[1]) == len(part):  # one sample per item: no counts
            if labels is not None:  # labels outside the set still raise
                label_codes(part["label"], pd.Index(list(labels)), "annotations")
            n_samples = 1
        else:
            lc = LabelCounts.from_frames(part, labels=labels)
            n_samples = int(lc.human.sum(axis=1).max()) if lc.n_items else 0
        if n_samples < 2:
            why = "needs two or more samples per item; this judge has one"
            ests = {m: Estimate.undefined(why) for m in ("percentage_agreement", "alpha")}
        else:
            kw: dict[str, Any] = {"n_boot": n_boot, "seed": seed, "confidence": confidence}
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
        mean_terms((hw * mw).sum(axis=1), both),
        pat.freq,
        mean_reduce,
        n=n,
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
    )
    conf = (hw[:, :, None] * mw[:, None, :]).reshape(len(hw), k * k) * both[:, None]
    kap = estimate_from_sums(
        conf,
        pat.freq,
        cohen_reducer(k, weights),
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
        pa = pa_values(c, "median", values)
        binning: Literal["median", "mode"] = "median"
    elif level == "nominal":
        values = lc.values if lc.values is not None else np.arange(k, dtype=np.float64)
        hw, mw = soft_mode(c), soft_mode(jc)
        pa = pa_values(c, "mode")
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
    blocks: list[tuple[str, str, np.ndarray, Reducer | None, str]] = []
    alpha_red = alpha_reducer(level, values, k)
    ones = np.ones(len(c))
    blocks += [
        ("alpha", "hh", alpha_terms(c), alpha_red, ONE_VALUE),
        ("alpha", "hm", alpha_terms_two(hw, mw), alpha_red, ONE_VALUE),
        ("alpha", "h1m", alpha_terms_two(h1, mw), alpha_red, ONE_VALUE),
        ("percentage_agreement", "hh", mean_terms(pa, ones), mean_reduce, ""),
        ("percentage_agreement", "hm", mean_terms((hw * mw).sum(axis=1), ones), mean_reduce, ""),
        ("percentage_agreement", "h1m", mean_terms((h1 * mw).sum(axis=1), ones), mean_reduce, ""),
    ]
    kappa_two = {"hm": fleiss_terms_two(hw, mw), "h1m": fleiss_terms_two(h1, mw)}
    for method in ("fleiss", "randolph"):
        one = "only one label value observed: chance agreement is one"
        blocks.append((method, "hh", np.zeros((len(c), 0)), None, one))  # filled per stratum
        for comp, terms in kappa_two.items():
            blocks.append((method, comp, terms, kappa_reducer(method, 2.0, k), one))
    blocks.append(("jsd_b", "hm", jsd_terms(c, jc, bw), jsd_reducer(k, k), "no machine labels"))

    rows = []
    total_valid = int(pat.freq @ valid)
    strata = [("all", valid)] + [(nm, valid & (stratum == j)) for j, nm in enumerate(names)]
    # every stratum is evaluated on the same resamples of all items: one integer seed for all
    if not isinstance(seed, int | np.integer):
        seed = int(as_generator(seed).integers(2**63))
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
        hh_kappa = fleiss_terms(c, fixed_m) if fixed_m else np.zeros((len(c), 2 + k))
        cols, slices, reducers, reasons = [], [], [], []
        start, placed = 0, {}  # Fleiss' and Randolph's kappa share their terms: summed once
        for metric, comp, terms, red, why in blocks:
            if metric in ("fleiss", "randolph") and comp == "hh":
                terms = hh_kappa
                red = kappa_reducer(metric, fixed_m or 2.0, k)
                if fixed_m is None:
                    why = f"{metric} kappa needs the same number of human labels on every item"
            if id(terms) not in placed:
                cols.append(terms[idx])
                placed[id(terms)] = slice(start, start + terms.shape[1])
                start += terms.shape[1]
            slices.append(placed[id(terms)])
            reducers.append(cast(Reducer, red))  # a None in blocks was replaced above
            reasons.append(why)
        vp = np.hstack(cols)
        total = (pat.freq[idx] @ vp)[None, :]
        if n_s == 0 or n_boot <= 0:
            sums = np.zeros((0, start))
        elif weights is not None:  # the stratum's columns of the shared resample counts
            sums = _stratum_sums(weights, idx, vp)
        else:
            full = np.zeros((len(pat.freq), start))
            full[idx] = vp
            sums = bootstrap_sums(full, pat.freq, n_boot, seed)
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
    columns = [f"{c}{s}" for c in ("hh", "hm", "h1m", "delta") for s in ("", "_low", "_high")]
    return nullable_floats(pd.DataFrame(rows), columns)


def _stratum_sums(weights: np.ndarray, idx: np.ndarray, terms: np.ndarray) -> np.ndarray:
    """``weights[:, idx] @ terms``, the stratum's columns of the resample counts taken a
    block of resamples at a time (a copy of all of them would be most of the counts)."""
    if len(idx) == weights.shape[1]:
        return np.asarray(weights @ terms)
    step = BLOCK_ROWS
    return np.vstack([weights[r : r + step, idx] @ terms for r in range(0, len(weights), step)])


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
        row["delta"] = cast(float, hh.value) - cast(float, hm.value)
        lo, hi, _ = percentile_interval(reps[(metric, "hh")] - reps[(metric, "hm")], confidence)
        row["delta_low"], row["delta_high"] = lo, hi
    else:
        row["delta"] = row["delta_low"] = row["delta_high"] = None
        if hh is not None or hm is not None:
            reasons.append("delta: needs both hh and hm")
    row["reason"] = "; ".join(reasons)
    return row
