"""What judge-prefilled error spans did to the labels (ESA^AI: Zouhar, Kocmi & Sachan 2025,
arXiv 2406.12419, who warn of automation bias). Pure (NumPy, pandas, SciPy).

``spans``: one row per final or deleted span with ``annotation``, ``item``, ``origin``
(``"judge"``: a suggestion, ``"human"``: added by the worker) and ``action`` (``"accepted"``,
``"edited"``, ``"deleted"``, ``"added"``) and optionally ``resized`` (bool: an edited
suggestion whose boundaries the worker moved; missing or NaN counts as false).
``annotations``: one row per annotation with ``annotation``, ``item``, ``prefilled`` (bool:
suggestions shown), ``n_spans`` (final spans) and ``score``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from analysis.spans import char_f1

__all__ = ["prefill_effect", "skipped_control", "suggestion_rates", "suggestion_f1"]


def _wilson(k: int, n: int, confidence: float) -> tuple[float | None, float | None]:
    if n == 0:
        return None, None
    from scipy import stats  # imported when used: the web's URLconf imports this module

    z = float(stats.norm.ppf(0.5 + confidence / 2))
    p = k / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(mid - half), float(mid + half)


def suggestion_rates(spans: pd.DataFrame, confidence: float = 0.95) -> dict[str, Any]:
    """Shares of the judge's suggestions accepted as they were, edited and deleted, each with
    its Wilson interval (suggestions are not independent within an annotation: read the
    interval as a lower bound on the uncertainty). A boundary edit is an edit: ``edited``
    counts every edited suggestion, and ``resized`` (those whose start or end moved) and
    ``regraded`` (severity only) split it, each a share of all suggestions with its own
    interval; accepted + edited + deleted = 1."""
    sug = spans.loc[spans["origin"] == "judge"]
    n = int(len(sug))
    edited = (sug["action"] == "edited").to_numpy()
    moved = np.zeros(n, dtype=bool)
    if "resized" in sug.columns:
        moved = sug["resized"].eq(True).to_numpy()
    counts = {
        "accepted": int((sug["action"] == "accepted").sum()),
        "edited": int(edited.sum()),
        "resized": int((edited & moved).sum()),
        "regraded": int((edited & ~moved).sum()),
        "deleted": int((sug["action"] == "deleted").sum()),
    }
    out: dict[str, Any] = {"n_suggestions": n}
    for action, k in counts.items():
        low, high = _wilson(k, n, confidence)
        out[action] = {"value": k / n if n else None, "low": low, "high": high, "n": k}
    out["added_by_humans"] = int((spans["origin"] == "human").sum())
    return out


def suggestion_f1(
    suggested: dict[Any, Sequence[dict]], final: dict[Any, Sequence[dict]]
) -> float | None:
    """Mean character-level F1 (:func:`analysis.spans.char_f1`) between the judge's spans
    and the final human spans, over annotations that had suggestions (both empty: 1)."""
    vals = [char_f1(suggested[k], final.get(k, [])) for k in suggested]
    return float(np.mean(vals)) if vals else None


def prefill_effect(annotations: pd.DataFrame, confidence: float = 0.95) -> list[dict[str, Any]]:
    """Mean span count and mean score with vs without suggestions (the control share shown
    without them), and the difference with Welch's t interval."""
    from scipy import stats

    rows = []
    pre = annotations["prefilled"].astype(bool).to_numpy()
    for col in ("n_spans", "score"):
        x = pd.to_numeric(annotations[col], errors="coerce").to_numpy(dtype=np.float64)
        a, b = x[pre & np.isfinite(x)], x[~pre & np.isfinite(x)]
        row: dict[str, Any] = {
            "figure": col,
            "with": float(a.mean()) if len(a) else None,
            "without": float(b.mean()) if len(b) else None,
            "n_with": int(len(a)),
            "n_without": int(len(b)),
            "difference": None,
            "low": None,
            "high": None,
            "reason": "",
        }
        if len(a) < 2 or len(b) < 2:
            row["reason"] = "needs two or more annotations with and without suggestions"
        else:
            va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
            se = np.sqrt(va + vb)
            dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)) if se > 0 else 1
            t = float(stats.t.ppf(0.5 + confidence / 2, dof))
            d = float(a.mean() - b.mean())
            row.update(difference=d, low=d - t * se, high=d + t * se)
        rows.append(row)
    return rows


def skipped_control(n_control: int, n_with_errors: int, confidence: float = 0.95) -> dict:
    """Of the items the judge called error-free that humans still saw (the control share),
    how many the humans found errors in: the share and its Wilson interval (an estimate of
    what skipping the others missed)."""
    low, high = _wilson(n_with_errors, n_control, confidence)
    return {
        "n_control": n_control,
        "with_errors": n_with_errors,
        "share": n_with_errors / n_control if n_control else None,
        "low": low,
        "high": high,
        "reason": "" if n_control else "no control item seen by humans yet",
    }
