"""The report's style-controlled ranking (``style`` in a pairwise property's section): for the
human labels and for each judge, Bradley–Terry scores with and without the style covariates
of :mod:`analysis.style`, each covariate's coefficient with its interval, and the humans'
length-bias line. Pure (pandas/NumPy).

Needs the answers' style counts on the items: columns ``len_a``, ``headers_a``, ``lists_a``,
``bold_a`` and the same with ``_b`` (:func:`style_columns`; the platform adds them from the
outputs' texts). Users' view: ``docs/analysis.md`` ("Style-controlled ranking").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from analysis import style
from analysis.assisted_report import PREFERENCE

__all__ = ["STYLE_COLUMNS", "style_columns", "style_section"]

STYLE_COLUMNS = tuple(f"{c}_{s}" for s in "ab" for c in ("len", "headers", "lists", "bold"))


def style_columns(texts: Iterable[tuple[Any, str | None, str | None]]) -> pd.DataFrame:
    """``(item, text of system_a, text of system_b)`` → the item's style columns."""
    rows = []
    for item, ta, tb in texts:
        if ta is None or tb is None:
            continue
        rows.append((item, *style.markdown_counts(ta), *style.markdown_counts(tb)))
    return pd.DataFrame(rows, columns=["item", *STYLE_COLUMNS])


def _position(ann: pd.DataFrame) -> np.ndarray:
    """+1 when the item's system_a was shown on the left, −1 on the right, 0 unknown: read
    from the display-order answer (``raw`` "left"/"right") and the label (A/B)."""
    if "raw" not in ann.columns:
        return np.zeros(len(ann))
    raw = ann["raw"].astype("string").str.lower().str.rstrip(">").fillna("").to_numpy()
    lab = ann["label"].astype(str).to_numpy()
    side = np.where(raw == "left", 1.0, np.where(raw == "right", -1.0, 0.0))
    chose = np.where(lab == "A", 1.0, np.where(lab == "B", -1.0, 0.0))
    return side * chose


def _fit_block(frame: pd.DataFrame, meta: pd.DataFrame, pos: np.ndarray, conf: float) -> dict:
    m = meta.reindex(frame["item"].to_numpy())
    y = frame["label"].map(PREFERENCE).to_numpy(dtype=np.float64)
    ok = (
        np.isfinite(y)
        & m["system_a"].notna().to_numpy()
        & m["system_b"].notna().to_numpy()
        & m["len_a"].notna().to_numpy()
    )
    if ok.sum() < 10:
        return {"reason": "fewer than 10 comparisons with both answers' texts"}
    m, y, pos = m.loc[ok], y[ok], pos[ok]
    a, b = m["system_a"].astype(str).to_numpy(), m["system_b"].astype(str).to_numpy()
    if len(set(a) | set(b)) < 2:
        return {"reason": "one system only"}
    ca = m[[f"{c}_a" for c in ("len", "headers", "lists", "bold")]].to_numpy(dtype=np.float64)
    cb = m[[f"{c}_b" for c in ("len", "headers", "lists", "bold")]].to_numpy(dtype=np.float64)
    tot = ca + cb
    diffs = np.where(tot > 0, (ca - cb) / np.where(tot > 0, tot, 1), 0.0)
    feats = np.column_stack([diffs, pos])
    try:
        plain = style.style_bradley_terry(a, b, y, None, confidence=conf)
        ctrl = style.style_bradley_terry(a, b, y, feats, confidence=conf)
    except (ValueError, np.linalg.LinAlgError) as exc:  # perfect separation and the like
        return {"reason": f"the model could not be fitted: {exc}"}
    plain_rank = {r["system"]: i + 1 for i, r in enumerate(plain.table())}
    rows = [
        {
            **r,
            "rank": i + 1,
            "plain_score": float(plain.score[plain.systems.index(r["system"])]),
            "plain_rank": plain_rank[r["system"]],
        }
        for i, r in enumerate(ctrl.table())
    ]
    return {"n": int(ok.sum()), "ranking": rows, "coefficients": ctrl.coefficients, "reason": ""}


def style_section(
    ann: pd.DataFrame,
    jud: pd.DataFrame | None,
    items: pd.DataFrame | None,
    *,
    confidence: float = 0.95,
) -> dict[str, Any] | None:
    """The ``style`` block of a pairwise property, or None when the items carry no style
    columns."""
    if items is None or not set(STYLE_COLUMNS) <= set(items.columns):
        return None
    meta = items
    out: dict[str, Any] = {
        "covariates": list(style.COVARIATES),
        "method": "Bradley-Terry with style covariates (Chatbot Arena style control): "
        "normalised differences (a − b)/(a + b) of length and markdown headers, list items, "
        "bold spans, standardised; display position ±1; GLM binomial logit, HC0 intervals",
    }
    out["humans"] = _fit_block(ann, meta, _position(ann), confidence)
    coefs = {c["covariate"]: c for c in out["humans"].get("coefficients", [])}
    if coefs.get("length", {}).get("coef") is not None:
        out["length_bias"] = coefs["length"]
    judges = []
    if jud is not None and len(jud) and "judge" in jud.columns:
        for name, frame in jud.groupby("judge", sort=True):
            judges.append(
                {"judge": str(name), **_fit_block(frame, meta, np.zeros(len(frame)), confidence)}
            )
    out["judges"] = judges
    return out
