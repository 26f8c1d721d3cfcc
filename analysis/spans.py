"""Error-span annotations (ESA; Kocmi et al. 2024, "Error Span Annotation: A Balanced Approach for
Human Evaluation of Machine Translation"): span agreement between annotators, MQM-weighted
error counts per system, systems ordered by their mean 0-100 score. Pure (NumPy, pandas).

A span is a mapping with ``start``, ``end`` (character offsets, ``end`` exclusive) and
``severity`` (``"minor"`` or ``"major"``), as :mod:`kinds.error_spans` stores it. The score's
reliability (Krippendorff's alpha at the interval level) is not here: it is the report's
alpha of an ordinal property with labels 0-100 (:func:`analysis.agreement.krippendorff_alpha`).
Users' view: docs/analysis.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from analysis.estimates import (
    Estimate,
    SeedLike,
    bootstrap_sums,
    estimate_from_sums,
    percentile_interval,
)

__all__ = [
    "MQM_WEIGHTS",
    "char_f1",
    "item_char_f1",
    "mean_char_f1",
    "mqm_by_system",
    "mqm_errors",
    "systems_by_score",
]

#: Severity weights of MQM (Freitag et al. 2021, "Experts, Errors, and Context":
#: minor 1, major 5), as ESA weighs its spans.
MQM_WEIGHTS: Mapping[str, float] = {"minor": 1.0, "major": 5.0}
_CODE = {"minor": 1, "major": 2}

Span = Mapping[str, Any]


def _marks(spans: Iterable[Span], length: int) -> np.ndarray:
    """Per character: 0 unmarked, 1 minor, 2 major (later spans win where they overlap)."""
    out = np.zeros(length, dtype=np.int8)
    for s in spans:
        out[int(s["start"]) : int(s["end"])] = _CODE[s["severity"]]
    return out


def _with_spans(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows whose spans were recorded (an imported score has ``None``)."""
    return frame[frame["spans"].notna()]


def char_f1(
    a: Sequence[Span], b: Sequence[Span], *, severity: bool = False, empty: float = 1.0
) -> float:
    """Character-level F1 of two annotators' spans on one output.

    With ``A`` and ``B`` the sets of characters inside some span of each annotator,
    ``F1 = 2 |A ∩ B| / (|A| + |B|)`` (the Dice coefficient: the harmonic mean of precision and
    recall of either against the other, so symmetric). ``severity``: a character counts in the
    intersection only when both marked it with the same severity. When neither marked anything
    the F1 is ``empty`` (default 1.0: they agree there is no error; ``nan`` leaves such pairs
    out of averages).
    """
    length = max([int(s["end"]) for s in (*a, *b)], default=0)
    ma, mb = _marks(a, length), _marks(b, length)
    total = int((ma > 0).sum() + (mb > 0).sum())
    if total == 0:
        return float(empty)
    both = (ma > 0) & (mb > 0)
    if severity:
        both &= ma == mb
    return 2.0 * int(both.sum()) / total


def item_char_f1(
    frame: pd.DataFrame, *, severity: bool = False, empty: float = 1.0
) -> pd.DataFrame:
    """Per item (one output), the mean :func:`char_f1` over every pair of its annotators.

    ``frame``: one row per annotation with ``item``, ``annotator`` and ``spans`` (a list of
    spans; ``None`` for a score imported without spans, left out). Returns ``item``,
    ``n_annotators``, ``n_pairs``, ``f1`` (NaN for an item with one annotator, or when every
    pair is ``empty`` and ``empty`` is NaN), in item order.
    """
    rows = []
    for item, group in _with_spans(frame).groupby("item", sort=True):
        marked = list(group["spans"])
        pairs = [char_f1(x, y, severity=severity, empty=empty) for x, y in combinations(marked, 2)]
        finite = [p for p in pairs if np.isfinite(p)]
        f1 = float(np.mean(finite)) if finite else float("nan")
        rows.append({"item": item, "n_annotators": len(marked), "n_pairs": len(pairs), "f1": f1})
    return pd.DataFrame(rows, columns=["item", "n_annotators", "n_pairs", "f1"])


def mean_char_f1(
    frame: pd.DataFrame,
    *,
    severity: bool = False,
    empty: float = 1.0,
    n_boot: int = 1000,
    seed: SeedLike = 0,
    confidence: float = 0.95,
) -> Estimate:
    """Mean over items of :func:`item_char_f1` (items whose F1 is defined), with a percentile
    bootstrap interval over those items."""
    per_item = item_char_f1(frame, severity=severity, empty=empty)["f1"].to_numpy(float)
    f1 = per_item[np.isfinite(per_item)]
    if f1.size == 0:
        return Estimate.undefined("no item has two annotators whose F1 is defined")
    values = np.column_stack([f1, np.ones_like(f1)])
    return estimate_from_sums(
        values,
        np.ones(f1.size, dtype=np.int64),
        lambda s: s[:, 0] / s[:, 1],
        n=int(f1.size),
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
    )


def mqm_errors(spans: Iterable[Span], weights: Mapping[str, float] = MQM_WEIGHTS) -> float:
    """MQM-style weighted error count of one annotation: ``Σ w(severity)`` over its spans,
    minor 1 and major 5 by default (Freitag et al. 2021)."""
    return float(sum(weights[s["severity"]] for s in spans))


def mqm_by_system(frame: pd.DataFrame, weights: Mapping[str, float] = MQM_WEIGHTS) -> pd.DataFrame:
    """Weighted error counts per system.

    ``frame``: one row per annotation with ``system`` and ``spans`` (rows whose ``spans`` is
    ``None`` are left out). Returns ``system``,
    ``annotations``, ``minor``, ``major`` (span counts), ``mqm`` (the sum of
    :func:`mqm_errors`) and ``mqm_per_annotation``, fewest weighted errors per annotation
    first (ties by system name).
    """
    rows = []
    for system, group in _with_spans(frame).groupby("system", sort=True):
        spans = [s for marked in group["spans"] for s in marked]
        total = mqm_errors(spans, weights)
        rows.append(
            {
                "system": system,
                "annotations": len(group),
                "minor": sum(s["severity"] == "minor" for s in spans),
                "major": sum(s["severity"] == "major" for s in spans),
                "mqm": total,
                "mqm_per_annotation": total / len(group),
            }
        )
    cols = ["system", "annotations", "minor", "major", "mqm", "mqm_per_annotation"]
    out = pd.DataFrame(rows, columns=cols)
    return out.sort_values(["mqm_per_annotation", "system"], kind="stable").reset_index(drop=True)


def systems_by_score(
    frame: pd.DataFrame,
    *,
    n_boot: int = 1000,
    seed: SeedLike = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Systems ordered by their mean score, with percentile bootstrap intervals over inputs.

    ``frame``: one row per annotation with ``system``, ``input`` and ``score``. A system's
    mean is over its annotations (as ESA's system scores average segment scores). The
    bootstrap draws inputs with replacement, the same draws for every system (so the intervals
    are paired), and recomputes every mean. ``rank``: 1 + the number of systems whose interval
    lies entirely above this one's (without intervals: whose mean is higher), as the report
    ranks Bradley-Terry scores. Returns ``system``, ``n``, ``mean``, ``low``, ``high``,
    ``rank``, best mean first.
    """
    systems = pd.Index(sorted(frame["system"].unique()))
    inputs = pd.Index(sorted(frame["input"].unique(), key=str))
    s_code = systems.get_indexer(frame["system"])
    i_code = inputs.get_indexer(frame["input"])
    scores = frame["score"].to_numpy(dtype=np.float64)
    k = len(systems)
    # Per input: each system's score sum and annotation count, side by side.
    values = np.zeros((len(inputs), 2 * k))
    np.add.at(values, (i_code, s_code), scores)
    np.add.at(values, (i_code, k + s_code), 1.0)
    totals = values.sum(axis=0)
    means = totals[:k] / totals[k:]
    low = np.full(k, np.nan)
    high = np.full(k, np.nan)
    if n_boot > 0 and len(inputs):
        sums = bootstrap_sums(values, np.ones(len(inputs), dtype=np.int64), n_boot, seed)
        with np.errstate(divide="ignore", invalid="ignore"):
            reps = sums[:, :k] / sums[:, k:]
        for j in range(k):
            lo, hi, _ = percentile_interval(reps[:, j], confidence)
            low[j] = np.nan if lo is None else lo
            high[j] = np.nan if hi is None else hi
    has_interval = np.isfinite(low) & np.isfinite(high)
    rank = np.empty(k, dtype=np.int64)
    for j in range(k):
        if has_interval.all():
            above = low > high[j]
        else:
            above = means > means[j]
        rank[j] = 1 + int(above.sum())
    out = pd.DataFrame(
        {
            "system": systems,
            "n": totals[k:].astype(np.int64),
            "mean": means,
            "low": low,
            "high": high,
            "rank": rank,
        }
    )
    return out.sort_values(["mean", "system"], ascending=[False, True], kind="stable").reset_index(
        drop=True
    )
