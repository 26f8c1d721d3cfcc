"""The study report: every figure of the analysis core, for every judged property, as one
JSON-serialisable dict (pure: no Django, no I/O).

``annotations``: one row per human label of one property, with ``item``, ``annotator``,
``label`` and optionally ``property``, ``flagged`` (left out unless ``include_flagged``),
``is_gold`` (always left out), ``raw`` and ``source`` (for the position-bias check) and
``annotation``. ``items`` (optional): ``item``, ``input_id``, ``system_a``, ``system_b``,
``priority``. ``judges`` (optional): ``item``, ``judge``, ``label``, ``property``.

A :class:`Property` fixes the label set and the level of Krippendorff's alpha (Krippendorff
2011): nominal for pairwise and categorical labels, ordinal for Likert scales. A statistic
is ``{"value", "low", "high", "n", "n_boot", "reason"}``; ``value`` is ``None`` exactly when
it is undefined, and ``reason`` says why. Users' view: ``docs/analysis.md``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis import agreement, judges, perception
from analysis.aggregation import (
    CROWD_KIT_MISSING,
    crowd_kit_available,
    dawid_skene,
    likert_summary,
    mace,
    majority_vote,
    soft_vote,
)
from analysis.assisted_report import assisted_section
from analysis.counts import PAIRWISE_LABELS, LabelCounts
from analysis.estimates import Estimate
from analysis.pairwise import holm, pairwise_win_rates, position_bias, prioritisation_check
from analysis.properties import Property
from analysis.style_report import style_section
from ranking.bradley_terry import bradley_terry

__all__ = ["REPORT_SCHEMA", "Property", "build_report", "estimate_dict", "json_safe"]

REPORT_SCHEMA = "humeval.report/1"


def json_safe(obj: Any) -> Any:
    """Plain Python for ``json.dumps(..., allow_nan=False)``: numpy scalars become numbers,
    NaN, infinities and ``pd.NA`` become ``None`` (callers attach the reason), tuples lists."""
    if obj is None or isinstance(obj, bool | str):
        return obj
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, int | np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        v = float(obj)
        return v if math.isfinite(v) else None
    if isinstance(obj, Mapping):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | np.ndarray | pd.Index):
        return [json_safe(v) for v in obj]
    if obj is pd.NA or obj is pd.NaT:
        return None
    return str(obj)


def estimate_dict(est: Estimate, **extra: Any) -> dict[str, Any]:
    """An :class:`~analysis.aggregation.Estimate` as a dict, ``extra`` keys first."""
    return {**extra, **json_safe(est.as_dict())}


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    names = list(frame.columns)
    cols = [frame.iloc[:, j].tolist() for j in range(len(names))]  # json_safe maps NA to None
    return [json_safe(dict(zip(names, row, strict=True))) for row in zip(*cols, strict=True)]


def _with_reason(rows: list[dict[str, Any]], fields: Sequence[str], why: str) -> None:
    """Give rows whose ``fields`` are missing a reason (unless they already have one)."""
    for row in rows:
        if any(row.get(f) is None for f in fields) and not row.get("reason"):
            row["reason"] = why
        row.setdefault("reason", "")


# --------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------


def build_report(
    annotations: pd.DataFrame,
    properties: Sequence[Property],
    *,
    judges: pd.DataFrame | None = None,
    items: pd.DataFrame | None = None,
    threshold: float = 0.1,
    include_flagged: bool = False,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    interval: bool = False,
    worker_models: bool = False,
    title: str = "",
    source: str = "",
    notes: Sequence[str] = (),
    kind_sections: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """Build the study report (the module docstring gives the frames and the output).

    ``threshold``: soft-vote tie threshold on ``|p_A - p_B|`` (ORA Section 3.4; 0.1 between
    model families, 0.2 within one); ``include_flagged``: keep labels of blocked workers;
    ``n_boot``: bootstrap resamples per interval (0: none), also the random orders of the
    prioritisation check; ``seed``: one set of resamples per property; ``interval``: also
    alpha at the interval level; ``worker_models``: also Dawid-Skene and MACE labels with
    each worker's reliability (seconds: MACE's restarts); ``kind_sections``: the
    kind's own sections (:func:`analysis.sections.kind_sections`), passed through. Returns a
    JSON-serialisable dict (:data:`REPORT_SCHEMA`).
    """
    started = time.perf_counter()
    if not 0 <= threshold <= 1:
        raise ValueError("threshold must be within [0, 1]")
    if n_boot < 0:
        raise ValueError("n_boot must be 0 or more")
    if not 0 < confidence < 1:
        raise ValueError("confidence must be within (0, 1)")
    if not properties:
        raise ValueError("no properties to report on")
    names = [p.name for p in properties]
    if len(set(names)) != len(names):
        raise ValueError(f"property names must be distinct: {names}")
    for col in ("item", "annotator", "label"):
        if col not in annotations.columns:
            raise ValueError(f"annotations need an {col!r} column")
    if "property" not in annotations.columns and len(properties) > 1:
        raise ValueError("annotations need a 'property' column when there are several properties")

    ann, excluded = _exclude(annotations, include_flagged, properties[0].name)
    item_meta = _item_meta(items)
    ann_by_prop = _split(ann, properties)
    judge_by_prop = _split(judges, properties) if judges is not None and len(judges) else {}
    opts = _Opts(threshold, n_boot, seed, confidence, interval, worker_models)

    sections = []
    for prop in properties:  # loop over the few properties
        sections.append(
            _property_section(
                prop,
                ann_by_prop.get(prop.name, ann.iloc[:0]),
                judge_by_prop.get(prop.name),
                item_meta,
                excluded["per_property"].get(prop.name, {}),
                opts,
            )
        )
    all_notes = list(notes)
    if excluded["flagged"]:
        verb = "included" if include_flagged else "excluded"
        hint = "" if include_flagged else " (include them with --include-flagged)"
        all_notes.append(
            f"{excluded['flagged']} flagged label(s) of workers blocked after gold checks "
            f"{verb}{hint}."
        )
    if excluded["gold"]:
        all_notes.append(f"{excluded['gold']} label(s) on gold check items excluded.")
    for prop in properties:
        if prop.labels_inferred:
            all_notes.append(
                f"{prop.name}: the label set {list(prop.labels)} was read from the data, not "
                "declared by the study; Randolph's kappa counts these labels."
            )
    judge_names = sorted({j["judge"] for sec in sections for j in sec.get("judges", [])})
    report = {
        "schema": REPORT_SCHEMA,
        "title": title,
        "source": source,
        "settings": {
            "threshold": threshold,
            "include_flagged": include_flagged,
            "n_boot": n_boot,
            "seed": seed,
            "confidence": confidence,
            "interval": interval,
            "worker_models": worker_models,
        },
        "counts": {
            "annotations": _n_annotations(ann),
            "labels": int(len(ann)),
            **_overall_counts(ann, sections),
            "flagged": excluded["flagged"],
            "flagged_excluded": 0 if include_flagged else excluded["flagged"],
            "gold_excluded": excluded["gold"],
            "judges": judge_names,
            "judges_rated": _judges_rated(judges),
        },
        "notes": all_notes,
        "properties": sections,
        "sections": [dict(s) for s in kind_sections],
        "elapsed_seconds": round(time.perf_counter() - started, 3),
    }
    return json_safe(report)


def _judges_rated(judges: pd.DataFrame | None) -> list[str]:
    """Every judge with a rating in the data, compared with humans or not (yet)."""
    if judges is None or not len(judges) or "judge" not in judges.columns:
        return []
    rated = judges.loc[judges["label"].notna(), "judge"] if "label" in judges.columns else []
    return sorted({str(j) for j in pd.unique(pd.Series(rated))})  # distinct first: no 1 M loop


def _overall_counts(ann: pd.DataFrame, sections: list[dict[str, Any]]) -> dict[str, int]:
    """Items and annotators over all properties (taken from the section when there is one)."""
    if len(sections) == 1 and "counts" in sections[0] and "property" not in ann.columns:
        return {k: sections[0]["counts"][k] for k in ("items", "annotators")}
    return {"items": int(ann["item"].nunique()), "annotators": int(ann["annotator"].nunique())}


def _n_annotations(ann: pd.DataFrame) -> int:
    """Annotations (one annotator on one item; a Likert annotation may rate several criteria)."""
    if "annotation" in ann.columns:
        return int(ann["annotation"].nunique())
    if "property" not in ann.columns:
        return int(len(ann))
    return int(len(ann[["item", "annotator"]].drop_duplicates()))


@dataclass(frozen=True)
class _Opts:
    threshold: float
    n_boot: int
    seed: int
    confidence: float
    interval: bool
    worker_models: bool = False

    @property
    def kw(self) -> dict[str, Any]:
        return {"n_boot": self.n_boot, "seed": self.seed, "confidence": self.confidence}


def _count(frame: pd.DataFrame, mask: np.ndarray) -> int:
    if not mask.any():
        return 0
    if "annotation" in frame.columns:
        return int(pd.unique(frame["annotation"].to_numpy()[mask]).size)
    return int(mask.sum())


def _bool_column(frame: pd.DataFrame, col: str) -> np.ndarray:
    if col not in frame.columns:
        return np.zeros(len(frame), dtype=bool)
    return frame[col].fillna(False).astype(bool).to_numpy()


def _exclude(
    annotations: pd.DataFrame, include_flagged: bool, only: str
) -> tuple[pd.DataFrame, dict]:
    """Drop gold labels always and flagged labels unless asked; count both, per property."""
    gold = _bool_column(annotations, "is_gold")
    flagged = _bool_column(annotations, "flagged") & ~gold
    drop = gold | (flagged if not include_flagged else False)
    per_property: dict[str, dict[str, int]] = {}
    if (gold.any() or flagged.any()) and "property" in annotations.columns:
        props = annotations["property"].to_numpy()
        for name in pd.unique(props[gold | flagged]):
            sel = props == name
            per_property[str(name)] = {
                "flagged": int((flagged & sel).sum()),
                "gold": int((gold & sel).sum()),
            }
    elif gold.any() or flagged.any():
        per_property[only] = {"flagged": int(flagged.sum()), "gold": int(gold.sum())}
    info = {
        "flagged": _count(annotations, flagged),
        "gold": _count(annotations, gold),
        "per_property": per_property,
    }
    if not drop.any():
        return annotations, info
    return annotations.loc[~drop], info


def _split(frame: pd.DataFrame | None, properties: Sequence[Property]) -> dict[str, pd.DataFrame]:
    if frame is None:
        return {}
    if "property" not in frame.columns:
        return {properties[0].name: frame}
    groups = frame.groupby("property", sort=False).indices
    return {str(k): frame.take(v) for k, v in groups.items()}


def _item_meta(items: pd.DataFrame | None) -> pd.DataFrame | None:
    if items is None or not len(items):
        return None
    if "item" not in items.columns:
        raise ValueError("items need an 'item' column")
    return items.drop_duplicates("item").set_index("item")


# --------------------------------------------------------------------------------------------
# One property
# --------------------------------------------------------------------------------------------


def _property_section(
    prop: Property,
    ann: pd.DataFrame,
    jud: pd.DataFrame | None,
    items: pd.DataFrame | None,
    excluded: dict[str, int],
    opts: _Opts,
) -> dict[str, Any]:
    section: dict[str, Any] = {**prop.as_dict(), "notes": []}
    if prop.labels_inferred:
        section["notes"].append("label set read from the data, not declared by the study")
    ann = ann.loc[ann["label"].notna()]
    known = ann["label"].isin(prop.labels).to_numpy()
    if not known.all():
        bad = pd.unique(ann["label"].to_numpy()[~known])[:5]
        section["notes"].append(
            f"{int((~known).sum())} label(s) outside the declared set {list(prop.labels)} "
            f"were left out, e.g. {[str(b) for b in bad]}"
        )
        ann = ann.loc[known]
    samples = None  # every sample of every judge: the agreement among a judge's samples
    if jud is not None:
        jud = jud.loc[jud["label"].notna() & jud["label"].isin(prop.labels)]
        if "sample" in jud.columns:
            samples, jud = jud, jud.loc[jud["sample"] == 0].drop(columns="sample")
        if not len(jud):
            jud = None
    section["excluded"] = {"flagged": excluded.get("flagged", 0), "gold": excluded.get("gold", 0)}
    if not len(ann):
        section["empty"] = "no human labels for this property"
        if jud is not None and len(jud):
            names = ", ".join(sorted({str(j) for j in jud["judge"]}))
            section["empty"] += (
                f"; judge ratings ({names}: {len(jud)}) are stored and will be compared with "
                "the human labels once workers have labelled these items"
            )
        section["counts"] = {"labels": 0, "items": 0, "annotators": 0}
        return section
    lc = LabelCounts.from_frames(ann, jud, labels=list(prop.labels))
    if any(c.sum() == 0 for c in lc.judges.values()):  # judges of items no human rated here
        lc = LabelCounts(
            items=lc.items,
            labels=lc.labels,
            human=lc.human,
            judges={k: c for k, c in lc.judges.items() if c.sum() > 0},
        )
    section["counts"] = _counts(ann, lc)
    binned = _binned(lc, prop) if prop.bins else None
    if binned is not None:
        section["notes"].append(FINE_SCALE_NOTE.format(lo=prop.labels[0], hi=prop.labels[-1]))
    section["label_distribution"] = _distribution(binned if binned is not None else lc)
    section["reliability"] = _reliability(lc, prop, opts)
    lc_pw = _pairwise_counts(lc) if prop.scale == "pairwise" else None
    outcomes = None
    if prop.scale == "pairwise":
        outcomes = soft_vote(lc_pw, threshold=opts.threshold)
        section["pairwise"] = _pairwise(outcomes, items, opts)
        section["ranking"], section["ranking_method"] = _ranking(outcomes, items, opts)
        section["position_bias"] = _position_bias(ann)
        section["prioritisation"] = _prioritisation(outcomes, items, opts)
    if prop.scale == "ordinal":
        section["likert"] = _likert(lc, items, binned)
    section["judges"] = [_judge(lc, name, prop, opts) for name in sorted(lc.judges)]
    assisted = assisted_section(
        ann, jud, items, prop, confidence=opts.confidence, human_items=lc.items
    )
    if assisted is not None:  # a judge rated items no human labelled: PPI++ figures
        section["assisted"] = assisted
    styled = (
        style_section(ann, jud, items, confidence=opts.confidence)
        if prop.scale == "pairwise"
        else None
    )
    if styled is not None:  # the items carry the answers' style counts
        section["style"] = styled
    if binned is None:  # exact-match baselines: not for a fine score (FINE_SCALE_NOTE)
        section["judges_extra"] = _judges_extra(lc, jud if samples is None else samples, prop, opts)
    section["workers"] = _workers(ann, lc, opts) if binned is None else {"reason": FINE_WORKERS}
    section["perception"] = _perception(lc, lc_pw, prop)
    return section


FINE_SCALE_NOTE = (
    "a score from {lo} to {hi} is an interval scale: its agreement is Krippendorff's alpha at "
    "the interval level, and the distributions and charts group the scores in ten bins of "
    "equal width; statistics that count exact matches (Fleiss' and Randolph's kappa, "
    "percentage and leave-one-out agreement) are left out, since two close scores such as 70 "
    "and 71 would count as a disagreement"
)
FINE_WORKERS = (
    "not computed for a fine score: Dawid-Skene and MACE model a few categories, not a 0-100 scale"
)


def _binned(lc: LabelCounts, prop: Property) -> LabelCounts:
    """The counts of a fine score summed into its bins (labels: the bins' names)."""
    m = prop.bin_matrix()
    return LabelCounts(
        items=lc.items,
        labels=pd.Index(prop.bin_names),
        human=(lc.human @ m).astype(lc.human.dtype),
        judges={k: (v @ m).astype(v.dtype) for k, v in lc.judges.items()},
    )


def _counts(ann: pd.DataFrame, lc: LabelCounts) -> dict[str, Any]:
    per_item = lc.human.sum(axis=1)
    return {
        "labels": int(per_item.sum()),
        "items": int(lc.n_items),
        "annotators": int(ann["annotator"].nunique()),
        "labels_per_item": {
            "min": int(per_item.min()),
            "median": float(np.median(per_item)),
            "max": int(per_item.max()),
        },
        "items_with_two_or_more": int((per_item >= 2).sum()),
    }


def _distribution(lc: LabelCounts) -> list[dict[str, Any]]:
    totals = lc.human.sum(axis=0)
    n = totals.sum()
    return [
        {"label": label, "count": int(c), "share": float(c / n) if n else 0.0}
        for label, c in zip(lc.labels, totals, strict=True)
    ]


def _pairwise_counts(lc: LabelCounts) -> LabelCounts:
    """The same counts on the full pairwise label set, as soft voting and the pairwise
    perception chart expect (zero columns for labels the study did not allow)."""
    if list(lc.labels) == list(PAIRWISE_LABELS):
        return lc
    pos = [PAIRWISE_LABELS.index(x) for x in lc.labels]

    def pad(c: np.ndarray) -> np.ndarray:
        out = np.zeros((c.shape[0], len(PAIRWISE_LABELS)), dtype=c.dtype)
        out[:, pos] = c
        return out

    return LabelCounts(
        items=lc.items,
        labels=pd.Index(PAIRWISE_LABELS),
        human=pad(lc.human),
        judges={k: pad(v) for k, v in lc.judges.items()},
    )


_RELIABILITY_TITLES = {
    "krippendorff_alpha": "Krippendorff's alpha",
    "fleiss_kappa": "Fleiss' kappa",
    "randolph_kappa": "Randolph's kappa",
    "percentage_agreement": "Percentage agreement",
    "loo_inner": "Leave-one-out agreement (inner)",
}


def _reliability(lc: LabelCounts, prop: Property, opts: _Opts) -> list[dict[str, Any]]:
    """Human-human reliability, each with its percentile bootstrap interval over items."""
    kw = opts.kw
    rows = [
        estimate_dict(
            agreement.krippendorff_alpha(lc, level=prop.level, **kw),
            metric="krippendorff_alpha",
            level=prop.level,
            source="Krippendorff 2011",
        )
    ]
    if prop.bins:  # a fine score: exact-match statistics mean nothing (FINE_SCALE_NOTE)
        for row in rows:
            row["title"] = _RELIABILITY_TITLES[row["metric"]]
        return rows
    if opts.interval:
        if lc.values is not None:
            est = agreement.krippendorff_alpha(lc, level="interval", **kw)
        else:
            est = Estimate.undefined("the interval level needs numeric labels")
        rows.append(
            estimate_dict(
                est, metric="krippendorff_alpha", level="interval", source="Krippendorff 2011"
            )
        )
    rows += [
        estimate_dict(
            agreement.fleiss_kappa(lc, **kw),
            metric="fleiss_kappa",
            source="Fleiss 1971; Gwet 2014 Eq. 2.8-2.9 for unequal label counts",
        ),
        estimate_dict(
            agreement.randolph_kappa(lc, **kw),
            metric="randolph_kappa",
            source=f"Randolph 2005 (chance 1/{len(lc.labels)})",
        ),
        estimate_dict(
            agreement.percentage_agreement(lc, reference="mode", **kw),
            metric="percentage_agreement",
            reference="mode",
            source="Beyond Correlation A.4, Eq. 3",
        ),
    ]
    if prop.scale == "ordinal":
        rows.append(
            estimate_dict(
                agreement.percentage_agreement(lc, reference="median", **kw),
                metric="percentage_agreement",
                reference="median",
                source="Beyond Correlation Section 3.1 (share of the median label)",
            )
        )
    rows.append(
        estimate_dict(
            agreement.loo_agreement_inner(lc, **kw),
            metric="loo_inner",
            source="HREF Appendix D.4, Algorithm 1",
        )
    )
    for row in rows:
        row["title"] = _RELIABILITY_TITLES[row["metric"]]
    return rows


# --------------------------------------------------------------------------------------------
# Pairwise: soft vote, win rates, position bias, prioritisation
# --------------------------------------------------------------------------------------------


def _pairwise(outcomes: pd.DataFrame, items: pd.DataFrame | None, opts: _Opts) -> dict[str, Any]:
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
    rows = _records(rates)
    why = (
        "no bootstrap interval: n_boot=0"
        if opts.n_boot == 0
        else "no bootstrap interval could be formed"
    )
    _with_reason(rows, ["expected_win_rate_low", "expected_win_rate_high"], why)
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


def _ranking(
    outcomes: pd.DataFrame, items: pd.DataFrame | None, opts: _Opts
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
    rows = _records(table)
    why = attrs["reason"] or (
        "no bootstrap interval: n_boot=0" if opts.n_boot == 0 else "no interval could be formed"
    )
    _with_reason(rows, ["score", "low", "high"], why)
    return rows, method


def _position_bias(ann: pd.DataFrame) -> dict[str, Any]:
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
    rows = _records(frame)
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


def _prioritisation(
    outcomes: pd.DataFrame, items: pd.DataFrame | None, opts: _Opts
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
    rows = _records(table)
    _with_reason(
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


def _likert(
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


# --------------------------------------------------------------------------------------------
# Human vs judge
# --------------------------------------------------------------------------------------------


def _judge(lc: LabelCounts, name: str, prop: Property, opts: _Opts) -> dict[str, Any]:
    """Human vs one judge: outer leave-one-out agreement (HREF Algorithm 1), Cohen's kappa vs
    the human majority (nominal) or rank/linear correlations with the human median (ordinal)
    (Judge-Bench Section 4), binned JSD (Beyond Correlation Eq. 1-2) and the stratified
    HH/HM table (Beyond Correlation Section 3.1)."""
    kw = opts.kw
    jc = lc.judges[name]
    both = (lc.human.sum(axis=1) > 0) & (jc.sum(axis=1) > 0)
    out: dict[str, Any] = {
        "judge": name,
        "n_items": int(both.sum()),
        "n_labels": int(jc.sum()),
        "loo_outer": estimate_dict(
            agreement.loo_agreement_outer(lc, judge=name, **kw),
            metric="loo_outer",
            source="HREF Appendix D.4, Algorithm 1 (outer)",
        ),
    }
    if prop.scale == "ordinal":
        corr = pd.concat(
            [
                judges.judge_correlations(lc, judge=name, aggregate=how, **kw)
                for how in ("median", "mean")
            ],
            ignore_index=True,
        )
        out["correlations"] = _records(corr)
        out["correlations_source"] = (
            "human median and mean vs judge label per item, two-sided p-values "
            "(Judge-Bench Section 4; scipy.stats)"
        )
    else:
        vs = judges.judge_vs_majority(lc, judge=name, **kw)
        out["vs_majority"] = _records(vs)
        out["vs_majority_source"] = "judge vs human majority; Cohen 1960 (Judge-Bench Section 4)"
    binning = "median" if prop.scale == "ordinal" else "mode"
    jsd = perception.binned_jsd(lc, judge=name, binning=binning, **kw)
    bins = _records(jsd.bins)
    out["binned_jsd"] = {
        **estimate_dict(jsd.estimate, metric="binned_jsd", binning=binning),
        "source": "Beyond Correlation Section 3.2, Eq. 1-2 (JS distance, Appendix A.7)",
        "bins": bins,
    }
    level = "ordinal" if prop.scale == "ordinal" else "nominal"
    strat = judges.stratified_agreement(lc, judge=name, level=level, **kw)
    out["stratified"] = {
        "level": level,
        "by": "percentage_agreement",
        "source": "Beyond Correlation Section 3.1 (HH vs HM per stratum of human agreement)",
        "rows": _records(strat),
    }
    return out


def _judges_extra(
    lc: LabelCounts, jud: pd.DataFrame | None, prop: Property, opts: _Opts
) -> dict[str, Any]:
    """Baselines for the judges: a random labeller's expected agreement (Beyond Correlation
    Fig. 1-2) and the agreement among each judge's samples (machine vs machine)."""
    kw = opts.kw
    random_rows = pd.concat(
        [judges.random_labeller(lc, distribution=d, **kw) for d in ("human", "uniform")],
        ignore_index=True,
    )
    out: dict[str, Any] = {
        "random_labeller": _records(random_rows),
        "random_source": "Beyond Correlation Section 3.1, Fig. 1-2 (closed-form expectation)",
    }
    if jud is None or not len(jud):
        out["samples_reason"] = "no judge labels for this property"
        return out
    level = "ordinal" if prop.scale == "ordinal" else "nominal"
    samples = judges.judge_sample_agreement(jud, labels=list(prop.labels), level=level, **kw)
    out["samples"] = _records(samples)
    out["samples_source"] = (
        f"several samples of one judge per item as raters: percentage agreement (A.4 Eq. 3), "
        f"Krippendorff's alpha ({level}) (Beyond Correlation Section 2)"
    )
    return out


WORKER_MODELS_OFF = (
    "not computed: ask for worker-weighted labels (the report page's option, the API's "
    "worker_models=true, the CLI's --worker-models); a few seconds on a few hundred labels"
)


def _workers(ann: pd.DataFrame, lc: LabelCounts, opts: _Opts) -> dict[str, Any]:
    """Dawid-Skene and MACE labels beside the majority, with each worker's reliability."""
    if not opts.worker_models:
        return {"reason": WORKER_MODELS_OFF}
    if not (lc.human.sum(axis=1) >= 2).any():
        return {"reason": "no item has two or more labels: a worker's reliability cannot be told"}
    if not crowd_kit_available():
        return {"reason": CROWD_KIT_MISSING}
    maj = majority_vote(lc)
    unique = maj.loc[~maj["tied"]].set_index("item")["label"].astype(object)
    models = {
        "dawid_skene": ("Dawid-Skene", "Dawid & Skene 1979 (crowd-kit)", dawid_skene(ann)),
        "mace": ("MACE", "Hovy et al. 2013 (crowd-kit)", mace(ann, seed=opts.seed)),
    }
    methods, reliab = [], {}
    for key, (title, source, model) in models.items():
        got = model.labels.set_index("item")["label"]
        both = unique.index.intersection(got.index)
        same = (
            float((got.loc[both].astype(object) == unique.loc[both]).mean()) if len(both) else None
        )
        counts = got.value_counts()
        methods.append(
            {
                "method": key,
                "title": title,
                "source": source,
                "n_items": int(len(got)),
                "agreement_with_majority": same,
                "items_with_majority": int(len(both)),
                "distribution": [
                    {"label": lab, "count": int(counts.get(lab, 0))} for lab in lc.labels
                ],
            }
        )
        reliab[key] = model.workers.set_index("worker")
    n = reliab["dawid_skene"]["n_labels"]
    workers = [
        {
            "worker": w,
            "n_labels": int(n[w]),
            "dawid_skene": float(reliab["dawid_skene"].at[w, "reliability"]),
            "mace": float(reliab["mace"].at[w, "reliability"]),
        }
        for w in n.index
    ]
    workers.sort(key=lambda r: (r["dawid_skene"], r["worker"]))
    return {
        "methods": methods,
        "workers": workers,
        "reliability": "Dawid-Skene: prior-weighted diagonal of the worker's confusion matrix; "
        "MACE: posterior probability that the worker is not spamming",
    }


# --------------------------------------------------------------------------------------------
# Perception charts
# --------------------------------------------------------------------------------------------


def _chart_dict(frame: pd.DataFrame, labels: list) -> dict[str, Any]:
    """Tidy chart frame (bin, bin_items, bin_share, source, label, count, proportion) -> bins
    with per-source count and proportion vectors over ``labels``."""
    bins = []
    k = len(labels)
    sources = list(pd.unique(frame["source"]))
    n_bins = len(frame) // (k * len(sources)) if len(frame) else 0
    for b in range(n_bins):  # frames are ordered by source, then bin, then label
        entry: dict[str, Any] = {"sources": []}
        for s_idx, source in enumerate(sources):
            start = (s_idx * n_bins + b) * k
            block = frame.iloc[start : start + k]
            if s_idx == 0:
                entry["bin"] = json_safe(block["bin"].iloc[0])
                entry["items"] = float(block["bin_items"].iloc[0])
                entry["share"] = float(block["bin_share"].iloc[0])
                entry["reason"] = "" if entry["items"] > 0 else "no items in this bin"
            entry["sources"].append(
                {
                    "source": str(source),
                    "counts": [float(x) for x in block["count"]],
                    "proportions": [float(x) for x in block["proportion"]],
                }
            )
        bins.append(entry)
    return {"labels": json_safe(labels), "bins": bins}


def _perception(lc: LabelCounts, lc_pw: LabelCounts | None, prop: Property) -> dict[str, Any]:
    if prop.bins:
        names = prop.bin_names
        frame = perception.binned_perception_chart(lc, prop.bin_matrix(), names)
        out = _chart_dict(frame, names)
        out["binning"] = "the bin of the human median score (split ties 1/2-1/2)"
        out["source"] = "Beyond Correlation Section 3.3.1, Fig. 3"
    elif prop.scale == "ordinal":
        frame = perception.ordinal_perception_chart(lc)
        out = _chart_dict(frame, list(lc.labels))
        out["binning"] = "human median (split ties 1/2-1/2)"
        out["source"] = "Beyond Correlation Section 3.3.1, Fig. 3"
    elif prop.scale == "pairwise":
        frame = perception.pairwise_perception_chart(lc_pw)
        out = _chart_dict(frame, ["A", "B", "tie"])
        out["binning"] = "human majority A / B / tie (equal votes: tie)"
        out["source"] = "Beyond Correlation Section 3.3.2, Fig. 4"
    else:
        if not lc.judges:
            return {"reason": "no judge labels: the perception chart compares humans and judges"}
        keys, w = perception.bin_weights(lc.human, lc.labels, "mode", "split")
        size = w.sum(axis=0)
        bins = []
        for b, key in enumerate(keys):  # pooled distributions per human-majority bin
            sources = []
            for source, counts in {"human": lc.human, **lc.judges}.items():
                pooled = w[:, b] @ counts
                tot = pooled.sum()
                sources.append(
                    {
                        "source": str(source),
                        "counts": [float(x) for x in pooled],
                        "proportions": [float(x / tot) if tot else 0.0 for x in pooled],
                    }
                )
            bins.append(
                {
                    "bin": json_safe(key),
                    "items": float(size[b]),
                    "share": float(size[b] / size.sum()) if size.sum() else 0.0,
                    "reason": "" if size[b] > 0 else "no items in this bin",
                    "sources": sources,
                }
            )
        out = {"labels": json_safe(list(lc.labels)), "bins": bins}
        out["binning"] = "human majority (tied modes split)"
        out["source"] = "Beyond Correlation Section 3.3 (nominal)"
    if not lc.judges:
        out["note"] = "no judge labels: humans only"
    return out
