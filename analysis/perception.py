"""Binned Jensen-Shannon divergence and perception-chart data (Elangovan et al. 2025).

Items are binned by their human labels (the median for ordinal data, the mode for nominal
data); within a bin all human and all machine labels are pooled into two distributions
(Beyond Correlation, Section 3.2, Eq. 1). JS_b weighs each bin's Jensen-Shannon divergence
by its share of items (Eq. 2); the perception charts (Section 3.3) show the same distributions.

An item between bins (median 2.5 of [2, 3], or several modes) goes by ``ties``: ``"split"``
(default) counts it ½ (1/t) in each neighbouring bin, order-independent; ``"own_bin"``
(ordinal) gives it bin ``2.5``; ``"drop"`` keeps it only in ``n``, as the reference code
(Appendix A.7) does. Input frames: :mod:`analysis.counts`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from analysis.aggregation import median_bins, median_positions, soft_median, soft_mode
from analysis.counts import PAIRWISE_LABELS, LabelCounts, as_label_counts
from analysis.estimates import Estimate, SeedLike, estimate_from_sums

__all__ = [
    "BinnedJSD",
    "bin_weights",
    "binned_jsd",
    "jensen_shannon",
    "ordinal_perception_chart",
    "pairwise_perception_chart",
]

Binning = Literal["median", "mode"]
Ties = Literal["split", "own_bin", "drop"]
Measure = Literal["distance", "divergence"]


@dataclass(frozen=True)
class BinnedJSD:
    """Result of :func:`binned_jsd`: the overall estimate and one row per bin."""

    estimate: Estimate
    bins: pd.DataFrame


def jensen_shannon(p: np.ndarray, q: np.ndarray, measure: Measure = "distance") -> np.ndarray:
    """Jensen-Shannon value of distributions along the last axis (vectorised).

    ``"distance"`` is what :func:`scipy.spatial.distance.jensenshannon` returns with its default
    natural log (the square root of the divergence), as the reference code of Beyond Correlation
    (Appendix A.7) uses. ``"divergence"`` is the printed Eq. 2: ½ KL(P‖Q) + ½ KL(M‖Q) with
    log base 2 and Q the average of the two distributions.
    Inputs are normalised to sum to one; an all-zero row gives NaN.
    """
    from scipy.special import rel_entr

    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = p / p.sum(axis=-1, keepdims=True)
        q = q / q.sum(axis=-1, keepdims=True)
        mid = (p + q) / 2.0
        div = (rel_entr(p, mid).sum(axis=-1) + rel_entr(q, mid).sum(axis=-1)) / 2.0
    div = np.maximum(div, 0.0)
    if measure == "distance":
        return np.sqrt(div)
    if measure == "divergence":
        return div / np.log(2.0)
    raise ValueError(f"measure must be 'distance' or 'divergence', got {measure!r}")


def bin_weights(
    counts: np.ndarray,
    labels: pd.Index,
    binning: Binning,
    ties: Ties = "split",
) -> tuple[list[Hashable], np.ndarray]:
    """Bin membership of items from their human label counts (Beyond Correlation, Eq. 1 bins).

    Returns the bin keys and an ``(n_items, n_bins)`` weight matrix whose rows sum to one
    (or to zero for an item dropped under ``ties="drop"``).
    """
    counts = np.asarray(counts)
    if binning == "mode":
        if ties == "own_bin":
            raise ValueError("ties='own_bin' applies to median bins only")
        w = soft_mode(counts)
        if ties == "drop":
            w = np.where((w == 1.0).any(axis=1, keepdims=True), w, 0.0)
        elif ties != "split":
            raise ValueError(f"unknown ties policy {ties!r}")
        return list(labels), w
    if binning != "median":
        raise ValueError(f"binning must be 'median' or 'mode', got {binning!r}")
    values = labels.to_numpy(dtype=np.float64) if labels.dtype.kind in "iuf" else None
    if values is None or np.any(np.diff(values) <= 0):
        raise ValueError("median bins need numeric, increasing labels")
    if ties == "split":
        return list(labels), soft_median(counts, values)
    below, above = median_bins(counts, values)
    has = below >= 0
    if ties == "drop":
        w = np.zeros(counts.shape)
        keep = np.flatnonzero(has & (below == above))
        w[keep, below[keep]] = 1.0
        return list(labels), w
    if ties != "own_bin":
        raise ValueError(f"unknown ties policy {ties!r}")
    lo, hi = median_positions(counts)
    med = (values[lo] + values[hi]) / 2.0
    keys = np.union1d(values, med[has])
    w = np.zeros((counts.shape[0], len(keys)))
    w[np.flatnonzero(has), np.searchsorted(keys, med[has])] = 1.0
    label_of = dict(zip(values.tolist(), list(labels), strict=True))
    return [label_of.get(float(x), float(x)) for x in keys], w


def jsd_terms(human: np.ndarray, machine: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per-item sufficient statistics of JS_b: bin weights, weighted human and machine counts.

    Columns: ``weights`` (R), ``weights x human`` (R*k), ``weights x machine`` (R*k) and a
    last column counting the item in ``n`` (it has machine labels).
    """
    present = (np.asarray(machine).sum(axis=1) > 0).astype(np.float64)
    w = np.asarray(weights, dtype=np.float64) * present[:, None]
    p, r = w.shape
    k = np.shape(human)[1]
    return np.hstack(
        [
            w,
            (w[:, :, None] * np.asarray(human)[:, None, :]).reshape(p, r * k),
            (w[:, :, None] * np.asarray(machine)[:, None, :]).reshape(p, r * k),
            present[:, None],
        ]
    )


def jsd_reducer(
    r: int, k: int, measure: Measure = "distance"
) -> Callable[[np.ndarray], np.ndarray]:
    """Map summed :func:`jsd_terms` columns ``(b, m)`` to ``b`` values of JS_b (Eq. 2)."""

    def reduce(s: np.ndarray) -> np.ndarray:
        size = s[:, :r]
        ph = s[:, r : r + r * k].reshape(-1, r, k)
        pm = s[:, r + r * k : r + 2 * r * k].reshape(-1, r, k)
        js = np.where(size > 0, jensen_shannon(ph, pm, measure), 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            return (size * js).sum(axis=1) / s[:, -1]

    return reduce


def binned_jsd(
    data: pd.DataFrame | LabelCounts,
    judges: pd.DataFrame | None = None,
    *,
    judge: str | None = None,
    labels: Sequence[Hashable] | None = None,
    binning: Binning = "median",
    ties: Ties = "split",
    measure: Measure = "distance",
    n_boot: int = 1000,
    seed: SeedLike = 0,
    confidence: float = 0.95,
) -> BinnedJSD:
    """Binned Jensen-Shannon divergence JS_b (Beyond Correlation, Section 3.2, Eq. 1-2).

    ``JS_b = sum_r |B_r| / n * JS(P_r^h, P_r^m)`` where ``B_r`` are the items whose human
    median (``binning="median"``, ordinal) or most frequent human label (``"mode"``, nominal) is
    ``r`` and ``P_r^h``, ``P_r^m`` pool all human and all machine labels of those items over the
    label set. ``n`` counts the items that have both human and machine labels. The default
    ``measure="distance"`` follows the reference code (Appendix A.7); ``"divergence"`` the
    printed formula (log base 2). Lower is closer to the humans.

    Returns a :class:`BinnedJSD` with the estimate (bootstrap interval over items) and a frame
    with one row per bin: ``bin``, ``n_items`` (fractional under ``ties="split"``), ``weight``
    (``n_items / n``), ``p_human``, ``p_machine`` (tuples over the labels), ``js`` and
    ``reason`` (why ``js`` is missing, for an empty bin).
    """
    from scipy.spatial.distance import jensenshannon

    lc = as_label_counts(data, judges, labels)
    name, _ = lc.judge_counts(judge)
    pat = lc.patterns(name)
    k = len(lc.labels)
    hc = pat.rows[:, :k]
    mc = pat.rows[:, k:]
    keys, w = bin_weights(hc, lc.labels, binning, ties)
    r = len(keys)
    vp = jsd_terms(hc, mc, w)
    n = int(pat.freq @ vp[:, -1])
    if n == 0:
        est = Estimate.undefined(f"no item has both human labels and labels from {name!r}")
        return BinnedJSD(est, _bin_frame(keys, np.zeros(r), 0, None, None, None))
    total = pat.freq @ vp
    size = total[:r]
    ph = total[r : r + r * k].reshape(r, k)
    pm = total[r + r * k : r + 2 * r * k].reshape(r, k)
    js = np.full(r, np.nan)
    for j in np.flatnonzero(size > 0):  # loop over bins; scipy's own function gives the value
        if measure == "distance":
            js[j] = jensenshannon(ph[j], pm[j])
        else:
            js[j] = jensenshannon(ph[j], pm[j], base=2.0) ** 2
    point = float(np.sum(size[size > 0] / n * js[size > 0]))
    est = estimate_from_sums(
        vp,
        pat.freq,
        jsd_reducer(r, k, measure),
        n=n,
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
    )
    est = Estimate(point, est.low, est.high, est.n, est.n_boot, est.reason)
    return BinnedJSD(est, _bin_frame(keys, size, n, ph, pm, js))


def _bin_frame(keys, size, n, ph, pm, js) -> pd.DataFrame:
    r = len(keys)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_h = (
            [tuple(row / row.sum()) if row.sum() > 0 else () for row in ph]
            if ph is not None
            else [()] * r
        )
        p_m = (
            [tuple(row / row.sum()) if row.sum() > 0 else () for row in pm]
            if pm is not None
            else [()] * r
        )
    return pd.DataFrame(
        {
            "bin": keys,
            "n_items": size,
            "weight": size / n if n else np.zeros(r),
            "p_human": p_h,
            "p_machine": p_m,
            "js": js if js is not None else np.full(r, np.nan),
            "reason": ["" if s > 0 else "no items in this bin" for s in size],
        }
    )


def _chart(
    keys: list[Hashable],
    w: np.ndarray,
    human: np.ndarray,
    machines: dict[str, np.ndarray],
    labels: Sequence[Hashable],
) -> pd.DataFrame:
    size = w.sum(axis=0)
    share = size / size.sum() if size.sum() > 0 else size
    frames = []
    sources = {"human": human, **machines}
    for source, counts in sources.items():  # humans and each judge
        pooled = w.T @ counts  # (bins, labels)
        tot = pooled.sum(axis=1, keepdims=True)
        prop = np.divide(pooled, tot, out=np.zeros_like(pooled, dtype=float), where=tot > 0)
        r, k = pooled.shape
        frames.append(
            pd.DataFrame(
                {
                    "bin": np.repeat(np.asarray(keys, dtype=object), k),
                    "bin_items": np.repeat(size, k),
                    "bin_share": np.repeat(share, k),
                    "source": source,
                    "label": np.tile(np.asarray(list(labels), dtype=object), r),
                    "count": pooled.ravel(),
                    "proportion": prop.ravel(),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def ordinal_perception_chart(
    data: pd.DataFrame | LabelCounts,
    judges: pd.DataFrame | None = None,
    *,
    labels: Sequence[Hashable] | None = None,
    ties: Ties = "split",
) -> pd.DataFrame:
    """Data for the ordinal HM perception chart (Beyond Correlation, Section 3.3.1, Fig. 3).

    One panel per human-median bin: the share of items in the bin (``bin_share``, the dial) and
    the pooled label distributions of the humans and of each judge over those items.
    Tidy frame: ``bin``, ``bin_items``, ``bin_share``, ``source`` ("human" or the judge name),
    ``label``, ``count`` and ``proportion`` (within bin and source).
    """
    lc = as_label_counts(data, judges, labels)
    keys, w = bin_weights(lc.human, lc.labels, "median", ties)
    return _chart(keys, w, lc.human, dict(lc.judges), list(lc.labels))


def binned_perception_chart(
    lc: LabelCounts,
    bin_matrix: np.ndarray,
    bin_names: Sequence[Hashable],
    ties: Ties = "split",
) -> pd.DataFrame:
    """The ordinal perception chart of a fine score shown in coarser bins (a 0-100 score in
    tens): items go to the bin of their human median, and every source's labels are pooled
    into the same bins (``bin_matrix``: labels × bins, 1 where a label falls in a bin)."""
    _, w = bin_weights(lc.human, lc.labels, "median", ties)
    names = list(bin_names)
    judges = {k: v @ bin_matrix for k, v in lc.judges.items()}
    return _chart(names, w @ bin_matrix, lc.human @ bin_matrix, judges, names)


def pairwise_perception_chart(
    data: pd.DataFrame | LabelCounts,
    judges: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Data for the pairwise-preference HM perception chart (Section 3.3.2, Fig. 4).

    Labels are collapsed to A, B and tie (``both_good`` and ``both_bad`` are ties, as in ORA).
    Items are binned by their most frequent human label; an item whose top count is shared by
    two labels is an equal vote and goes to the ``tie`` bin. Same columns as
    :func:`ordinal_perception_chart`.
    """
    lc = as_label_counts(data, judges, PAIRWISE_LABELS)

    def collapse(c: np.ndarray) -> np.ndarray:
        return np.column_stack([c[:, 0], c[:, 1], c[:, 2:].sum(axis=1)])

    human = collapse(lc.human)
    top = human.max(axis=1, keepdims=True)
    is_top = (human == top) & (top > 0)
    unique = is_top.sum(axis=1) == 1
    w = np.where(unique[:, None], is_top, 0.0).astype(np.float64)
    w[~unique & (top[:, 0] > 0), 2] = 1.0
    machines = {name: collapse(c) for name, c in lc.judges.items()}
    return _chart(["A", "B", "tie"], w, human, machines, ["A", "B", "tie"])
