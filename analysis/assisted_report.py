"""The report's judge-assisted block (``assisted`` in a property's section): PPI++ win rates,
Bradley–Terry scores or score means, rank-sets and the effective sample gain, beside the
human-only figures on the same items (:mod:`analysis.assisted` has the statistics).

Pure (pandas/NumPy). Computed only when a judge rated items that no human labelled: the
judge with the most such items is used. Users' view: ``docs/analysis.md``
("Judge-assisted estimates").
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from analysis import assisted
from analysis.properties import Property
from formats import vocab
from ranking.bradley_terry import ELO_BASE, ELO_SCALE

__all__ = ["ASSISTED_METHOD", "assisted_section", "preference_value"]

#: A pairwise label as the share of preference for the item's first system.
PREFERENCE = vocab.PREFERENCE

ASSISTED_METHOD = {
    "estimator": "PPI++ (Angelopoulos, Duchi & Zrnic 2023): the human-only estimate plus λ "
    "times the judge's figure on the judge-only items minus its figure on the human-labelled "
    "items; λ power-tuned to minimise the variance, clipped to [0, 1] (0: human-only)",
    "win_rates": "share of human labels preferring system_a (a tie counts ½), per item, "
    "averaged; interval ± t·se",
    "ranking_pairwise": "Bradley–Terry as a logistic regression fitted with the PPI++ loss "
    "(Boyeau et al., AutoEval Done Right, 2025); Elo-like scale 1000 + 400/ln 10 · θ, "
    "sandwich covariance",
    "ranking_scores": "each system's mean score (mean of the item's human ratings)",
    "rank_sets": "Chatzi et al. 2024: ranks consistent with the joint confidence ellipsoid; "
    "together they cover the true ranks with probability at least the confidence",
    "effective_sample_gain": "Σ Var(human-only) / Σ Var(assisted) − 1 over the ranking's "
    "scores: 0.5 means the judge is worth 50 % more human labels",
    "assumption": "the human-labelled items are a random sample of the items the judge rated",
}


def preference_value(label: Any) -> float:
    return PREFERENCE.get(label, np.nan)


def _per_item(frame: pd.DataFrame, values: np.ndarray) -> pd.Series:
    """Mean value per item (several humans, or several samples of a judge)."""
    ok = np.isfinite(values)
    return pd.Series(values[ok], index=frame["item"].to_numpy()[ok]).groupby(level=0).mean()


def _values(frame: pd.DataFrame, prop: Property) -> np.ndarray:
    labels = frame["label"]
    if prop.scale == "pairwise":
        return labels.map(PREFERENCE).to_numpy(dtype=np.float64)
    return pd.to_numeric(labels, errors="coerce").to_numpy(dtype=np.float64)


def assisted_section(
    ann: pd.DataFrame,
    jud: pd.DataFrame | None,
    items: pd.DataFrame | None,
    prop: Property,
    *,
    confidence: float = 0.95,
    human_items: pd.Index | None = None,
) -> dict[str, Any] | None:
    """The ``assisted`` block of one property, or ``None`` when there is nothing to assist
    (no judge, or no judge label on an item humans did not label: then the human-only
    figures are all there is). ``ann``/``jud``: the section's human and judge labels (the
    property's label set), ``items``: item metadata indexed by item (``system_a``,
    ``system_b``); ``human_items``: the items with human labels when the caller has them
    (the report's label counts), so that a large study without judge-only items costs one
    look-up per judge label."""
    if jud is None or not len(jud) or prop.scale not in ("pairwise", "ordinal"):
        return None
    if human_items is None:
        human_items = pd.Index(pd.unique(ann["item"].to_numpy()))
    labelled = human_items.get_indexer(jud["item"].to_numpy()) >= 0  # cheap test first
    if labelled.all():
        return None
    names = jud["judge"].astype(str).to_numpy() if "judge" in jud.columns else None
    best, best_extra = None, 0
    for name in sorted(set(names)) if names is not None else [None]:
        mine = np.ones(len(jud), dtype=bool) if name is None else names == name
        extra = int(pd.unique(jud["item"].to_numpy()[mine & ~labelled]).size)
        if extra > best_extra:
            best, best_extra = (name, mine), extra
    if best is None:
        return None
    name, mine = best
    human = _per_item(ann, _values(ann, prop))
    sel = jud.loc[mine]
    judge = _per_item(sel, _values(sel, prop))
    out: dict[str, Any] = {
        "judge": name or "judge",
        "confidence": confidence,
        "method": ASSISTED_METHOD,
        "win_rates": [],
        "ranking": [],
        "effective_sample_gain": None,
        "reason": "",
    }
    need = {"system_a", "system_b"} if prop.scale == "pairwise" else {"system_a"}
    if items is None or not need <= set(items.columns):
        out["reason"] = "no system names for the items: the assisted figures need them"
        return out
    both = human.index.intersection(judge.index)
    only = judge.index.difference(human.index)
    out["n_human_items"] = int(len(both))
    out["n_judge_only_items"] = int(len(only))
    if len(human) > len(both):
        out["note"] = (
            f"{len(human) - len(both)} human-labelled item(s) without a rating of this judge "
            "are left out of the assisted figures"
        )
    meta = items.reindex(both.append(only))
    sys_a = meta["system_a"].to_numpy(dtype=object)
    if prop.scale == "pairwise":
        sys_b = meta["system_b"].to_numpy(dtype=object)
        known = ~pd.isna(sys_a) & ~pd.isna(sys_b)
        known &= np.array([str(x) != str(z) for x, z in zip(sys_a, sys_b, strict=True)], bool)
    else:
        if "system_b" in meta.columns and meta["system_b"].notna().any():
            out["reason"] = "scores of pair items: no per-system mean to assist"
            return out
        known = ~pd.isna(sys_a)
    y_all = np.concatenate([human.reindex(both).to_numpy(), np.full(len(only), np.nan)])
    f_all = judge.reindex(both.append(only)).to_numpy()
    lab = np.arange(len(meta)) < len(both)
    if prop.scale == "pairwise":
        _pairwise(out, sys_a, sys_b, known, lab, y_all, f_all, confidence)
    else:
        _scores(out, sys_a, known, lab, y_all, f_all, confidence)
    return out


def _rank_rows(
    systems: list[str],
    est: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    cov: np.ndarray,
    human: tuple[np.ndarray, np.ndarray, np.ndarray],
    confidence: float,
    dof: int,
) -> list[dict[str, Any]]:
    ok = np.isfinite(est)
    r_lo = np.full(len(est), np.nan)
    r_hi = np.full(len(est), np.nan)
    if ok.sum() >= 1:
        sub = np.ix_(ok, ok)
        lo_, hi_ = assisted.rank_sets(est[ok], cov[sub], confidence=confidence, dof=dof)
        r_lo[ok], r_hi[ok] = lo_, hi_
    rows = []
    for i in np.argsort(-np.where(ok, est, -np.inf), kind="stable"):
        rows.append(
            {
                "system": systems[i],
                "score": est[i],
                "low": low[i],
                "high": high[i],
                "rank_low": int(r_lo[i]) if ok[i] else None,
                "rank_high": int(r_hi[i]) if ok[i] else None,
                "human_score": human[0][i],
                "human_low": human[1][i],
                "human_high": human[2][i],
                "reason": "" if ok[i] else "fewer than two human labels",
            }
        )
    return rows


def _pairwise(out, sys_a, sys_b, known, lab, y, f, confidence) -> None:
    a_s, b_s = sys_a[known].astype(str), sys_b[known].astype(str)
    y, f, lab = y[known], f[known], lab[known]
    systems = sorted(set(a_s) | set(b_s))
    code = {s: i for i, s in enumerate(systems)}
    a = np.array([code[s] for s in a_s], dtype=np.int64)
    b = np.array([code[s] for s in b_s], dtype=np.int64)
    k = len(systems)
    if k < 2 or lab.sum() < 2:
        out["reason"] = "too few human-labelled comparisons for the assisted figures"
        return
    # win rates per unordered pair, in name order
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    flip = a != lo
    yy, ff = np.where(flip, 1 - y, y), np.where(flip, 1 - f, f)
    pair_code = lo * k + hi
    keys, g = np.unique(pair_code, return_inverse=True)
    m = assisted.ppi_means(
        yy[lab], ff[lab], g[lab], ff[~lab], g[~lab], len(keys), confidence=confidence
    )
    n_eff = m.n_effective
    for j, key in enumerate(keys):
        out["win_rates"].append(
            {
                "system_a": systems[key // k],
                "system_b": systems[key % k],
                "estimate": m.estimate[j],
                "low": m.low[j],
                "high": m.high[j],
                "human_estimate": m.human_estimate[j],
                "human_low": m.human_low[j],
                "human_high": m.human_high[j],
                "n_human": int(m.n_human[j]),
                "n_judge": int(m.n_judge[j]),
                "n_effective": n_eff[j],
                "lambda": m.lam[j],
                "reason": "" if np.isfinite(m.estimate[j]) else "fewer than two human labels",
            }
        )
    bt = assisted.ppi_bradley_terry(a[lab], b[lab], y[lab], f[lab], a[~lab], b[~lab], f[~lab], k)
    if not bt.converged:
        out["ranking_reason"] = (
            "a system never lost or never won among the human labels: no Bradley-Terry estimate"
        )
        return
    low, high, h_low, h_high = bt.intervals(confidence)

    def elo(v: np.ndarray) -> np.ndarray:
        return ELO_BASE + ELO_SCALE * v

    cov = bt.cov * ELO_SCALE**2
    out["ranking"] = _rank_rows(
        systems,
        elo(bt.theta),
        elo(low),
        elo(high),
        cov,
        (elo(bt.human_theta), elo(h_low), elo(h_high)),
        confidence,
        k - 1,
    )
    out["ranking_lambda"] = bt.lam
    out["effective_sample_gain"] = assisted.effective_gain(np.diag(bt.human_cov), np.diag(bt.cov))


def _scores(out, sys_a, known, lab, y, f, confidence) -> None:
    s = sys_a[known].astype(str)
    y, f, lab = y[known], f[known], lab[known]
    systems = sorted(set(s))
    g = np.searchsorted(np.array(systems), s)
    m = assisted.ppi_means(
        y[lab], f[lab], g[lab], f[~lab], g[~lab], len(systems), confidence=confidence
    )
    cov = np.diag(m.se**2)
    out["ranking"] = _rank_rows(
        systems,
        m.estimate,
        m.low,
        m.high,
        cov,
        (m.human_estimate, m.human_low, m.human_high),
        confidence,
        len(systems),
    )
    for row, j in zip(
        out["ranking"], [systems.index(r["system"]) for r in out["ranking"]], strict=True
    ):
        row.update(
            n_human=int(m.n_human[j]),
            n_judge=int(m.n_judge[j]),
            n_effective=m.n_effective[j],
            **{"lambda": m.lam[j]},
        )
    out["effective_sample_gain"] = assisted.effective_gain(m.human_se**2, m.se**2)
