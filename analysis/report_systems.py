"""The report's figures about systems (:mod:`analysis.report`): pairwise win rates, the
ranking, position bias, the prioritisation check and Likert summaries."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from analysis.aggregation import likert_summary
from analysis.counts import LabelCounts
from analysis.pairwise import holm, pairwise_win_rates, position_bias, prioritisation_check
from analysis.report_base import ReportOptions, frame_records, with_reason
from ranking.bradley_terry import bradley_terry

# --------------------------------------------------------------------------------------------
# Pairwise: soft vote, win rates, position bias, prioritisation
# --------------------------------------------------------------------------------------------


def pairwise_figures(
    outcomes: pd.DataFrame, items: pd.DataFrame | None, opts: ReportOptions
) -> dict[str, Any]:
    """Soft-voted outcomes (ORA Section 3.4: tie when ``|p_A - p_B| <= threshold``) and per
    system pair the win, tie and expected win rate ``(wins + ties / 2) / n`` (HREF Section 3)."""
    counts = outcomes["outcome"].value_counts()
    out: dict[str, Any] = {
        "threshold": opts.threshold,
        "source": "ORA Section 3.4 (soft voting); HREF Section 3 (expected win rate)",
        "outcomes": {k: int(counts.get(k, 0)) for k in ("A", "B", "tie")},
    }
    if items is None or not {"system_a", "system_b"} <= set(items.columns):
        out["pairs"] = []
        out["pairs_reason"] = "no system names for the items: win rates need them"
        return out
    pairs = items.reindex(outcomes["item"])[["system_a", "system_b"]].reset_index()
    pairs = pairs.rename(columns={pairs.columns[0]: "item"})
    known = pairs["system_a"].notna() & pairs["system_b"].notna()
    if not known.any():
        out["pairs"] = []
        out["pairs_reason"] = "no system names for the items: win rates need them"
        return out
    rates = pairwise_win_rates(
        outcomes.loc[known.to_numpy()],
        pairs.loc[known],
        n_boot=opts.n_boot,
        seed=opts.seed,
        confidence=opts.confidence,
    )
    rows = frame_records(rates)
    why = (
        "no bootstrap interval: n_boot=0"
        if opts.n_boot == 0
        else "no bootstrap interval could be formed"
    )
    with_reason(rows, ["expected_win_rate_low", "expected_win_rate_high"], why)
    out["pairs"] = rows
    if not known.all():
        out["pairs_note"] = f"{int((~known).sum())} item(s) without system names left out"
    return out


RANKING_METHOD = {
    "model": "Bradley-Terry (Bradley & Terry 1952): P(i beats j) = 1 / (1 + exp(-(θ_i - θ_j)))",
    "comparisons": "one per item: its soft-voted outcome",
    "ties": "a tie counts as half a win to each side",
    "scale": "Elo-like: 1000 + 400/ln 10 · θ, θ centred at 0 (400 points: 10:1 odds)",
    "interval": "percentile bootstrap over inputs (inputs resampled with replacement, refitted)",
    "rank": "1 + the number of systems whose interval lies entirely above (without "
    "intervals: above the score)",
    "source": "maximum likelihood by choix (iterative Luce spectral ranking), checked "
    "against evalica",
    "prior": "none while the maximum-likelihood estimate exists; when a system never lost "
    "(or never won) it does not, and ½ virtual win each way per pair of systems (one virtual "
    "tie per pair) is added to the fit and to every resample",
}


def ranking_figures(
    outcomes: pd.DataFrame, items: pd.DataFrame | None, opts: ReportOptions
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Bradley-Terry scores of the systems from the items' soft-voted outcomes, with
    percentile bootstrap intervals over inputs (:func:`ranking.bradley_terry.bradley_terry`)."""
    method: dict[str, Any] = {**RANKING_METHOD, "n_boot": opts.n_boot, "reason": ""}
    if items is None or not {"system_a", "system_b"} <= set(items.columns):
        method["reason"] = "no system names for the items: the ranking needs them"
        return [], method
    meta = items.reindex(outcomes["item"])
    inputs = meta["input_id"] if "input_id" in meta.columns else meta.index.to_series()
    frame = pd.DataFrame(
        {
            "input": inputs.to_numpy(),
            "system_a": meta["system_a"].to_numpy(),
            "system_b": meta["system_b"].to_numpy(),
            "outcome": outcomes["outcome"].to_numpy(),
        }
    )
    frame["input"] = frame["input"].where(frame["input"].notna(), outcomes["item"].to_numpy())
    frame = frame.loc[frame["system_a"].notna() & frame["system_b"].notna()]
    frame = frame.loc[frame["system_a"].astype(str) != frame["system_b"].astype(str)]
    if not len(frame):
        method["reason"] = "no system names for the items: the ranking needs them"
        return [], method
    table = bradley_terry(frame, n_boot=opts.n_boot, seed=opts.seed, confidence=opts.confidence)
    attrs = table.attrs
    method.update(
        n_inputs=attrs["n_inputs"],
        n_comparisons=attrs["n_comparisons"],
        n_boot_failed=attrs["n_boot_failed"],
        prior_used=attrs["prior"],
        reason=attrs["reason"],
    )
    rows = frame_records(table)
    why = attrs["reason"] or (
        "no bootstrap interval: n_boot=0" if opts.n_boot == 0 else "no interval could be formed"
    )
    with_reason(rows, ["score", "low", "high"], why)
    return rows, method


def position_bias_figures(ann: pd.DataFrame) -> dict[str, Any]:
    """Share of left-hand choices among platform labels that chose a side (binomial test)."""
    out: dict[str, Any] = {"source": "two-sided exact binomial test vs 1/2 (scipy.stats)"}
    if "raw" not in ann.columns:
        out["reason"] = "no display-order answers in the data: position bias cannot be checked"
        return out
    mask = ann["raw"].notna().to_numpy().copy()
    if "source" in ann.columns:
        mask &= (ann["source"] == "platform").to_numpy()
    if not mask.any():
        out["reason"] = (
            "no labels collected on the platform (imported labels have no display order)"
        )
        return out
    frame = position_bias(ann.loc[mask, ["annotator", "raw"]], rater="annotator")
    rows = frame_records(frame)
    overall, raters = rows[0], rows[1:]
    tested = [r for r in raters if r["p_value"] is not None]
    if tested:
        adjusted = holm([r["p_value"] for r in tested])
        for r, p in zip(tested, adjusted, strict=True):
            r["p_holm"] = float(p)
    for r in raters:
        r.setdefault("p_holm", None)
    out["overall"] = overall
    out["annotators"] = raters
    out["holm"] = "p_holm: Holm-adjusted over annotators (Holm 1979)"
    return out


def prioritisation_figures(
    outcomes: pd.DataFrame, items: pd.DataFrame | None, opts: ReportOptions
) -> dict[str, Any]:
    """Tie rate among the top k% of items by their input's priority vs ``n_boot`` random
    orders (ORA Section 3.4, "Random Baseline")."""
    out: dict[str, Any] = {"source": "ORA Section 3.4, random baseline"}
    if items is None or "priority" not in items.columns:
        out["reason"] = "no input has a priority score"
        return out
    prio = pd.to_numeric(items["priority"].reindex(outcomes["item"]), errors="coerce").to_numpy(
        dtype=np.float64
    )
    has = np.isfinite(prio)
    if not has.any():
        out["reason"] = "no input has a priority score"
        return out
    frame = pd.DataFrame(
        {"priority": prio[has], "is_tie": (outcomes["outcome"].to_numpy() == "tie")[has]}
    )
    table = prioritisation_check(frame, n_orders=opts.n_boot, seed=opts.seed)
    rows = frame_records(table)
    with_reason(
        rows,
        ["random_mean", "random_std"],
        "too few random orders (n_boot) for a mean and standard deviation",
    )
    out["rows"] = rows
    out["n_items"] = int(has.sum())
    out["n_ties"] = int(frame["is_tie"].sum())
    if not has.all():
        out["note"] = f"{int((~has).sum())} item(s) without a priority score left out"
    return out


# --------------------------------------------------------------------------------------------
# Likert summaries
# --------------------------------------------------------------------------------------------


def likert_figures(
    lc: LabelCounts, items: pd.DataFrame | None, binned: LabelCounts | None = None
) -> dict[str, Any]:
    """Per-system summaries of item medians and means (and the pooled rating distribution).
    An ordinal label of a *pair* item (a pairwise criterion's strength, in system order) is
    summarised per system pair, ``"<A> vs <B>"``. ``binned``: a fine score's counts in its
    bins, for the distributions (the means and medians use the scores)."""
    summ = likert_summary(lc)
    vals = lc.ordinal_values()
    if items is not None and "system_a" in items.columns:
        system = items["system_a"].reindex(lc.items).astype(object).to_numpy().copy()
        if "system_b" in items.columns:
            other = items["system_b"].reindex(lc.items).astype(object).to_numpy()
            pair = ~pd.isna(system) & ~pd.isna(other)
            system[pair] = [f"{a} vs {b}" for a, b in zip(system[pair], other[pair], strict=True)]
        system = np.where(pd.isna(system), "(unknown system)", system).astype(str)
    else:
        system = np.full(lc.n_items, "all items", dtype=object)
    code, names = pd.factorize(system, sort=True)
    rows = []
    groups = [("all", np.ones(lc.n_items, dtype=bool))] if len(names) > 1 else []
    groups += [(str(name), code == j) for j, name in enumerate(names)]
    for name, sel in groups:  # loop over systems
        c = lc.human[sel]
        dist = c.sum(axis=0)
        n_ratings = int(dist.sum())
        shown = dist if binned is None else binned.human[sel].sum(axis=0)
        rows.append(
            {
                "system": name,
                "n_items": int(sel.sum()),
                "n_ratings": n_ratings,
                "mean_rating": float(dist @ vals / n_ratings),
                "mean_of_item_means": float(summ["mean"].to_numpy()[sel].mean()),
                "median_of_item_medians": float(np.median(summ["median"].to_numpy()[sel])),
                "distribution": [int(x) for x in shown],
                "reason": "",
            }
        )
    return {"labels": list((binned if binned is not None else lc).labels), "systems": rows}
