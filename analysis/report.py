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

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from analysis import agreement
from analysis.aggregation import soft_vote
from analysis.assisted_report import assisted_section
from analysis.counts import PAIRWISE_LABELS, LabelCounts
from analysis.estimates import Estimate
from analysis.properties import Property
from analysis.report_base import (
    REPORT_SCHEMA,
    ReportOptions,
    estimate_dict,
    json_safe,
)
from analysis.report_judges import (
    judge_figures,
    judges_extra_figures,
    perception_figures,
    workers_figures,
)
from analysis.report_systems import (
    likert_figures,
    pairwise_figures,
    position_bias_figures,
    prioritisation_figures,
    ranking_figures,
)
from analysis.style_report import style_section

__all__ = ["REPORT_SCHEMA", "Property", "build_report", "estimate_dict", "json_safe"]


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
    opts = ReportOptions(threshold, n_boot, seed, confidence, interval, worker_models)

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


def agreement_blocks(
    annotations: pd.DataFrame,
    properties: Sequence[Property],
    *,
    include_flagged: bool = False,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Per property, the ``reliability`` and ``position_bias`` blocks of :func:`build_report`
    without a bootstrap (``None`` without labels, or position bias for a non-pairwise
    property), computed alone: what the report by guideline revision shows."""
    ann, _ = _exclude(annotations, include_flagged, properties[0].name)
    by_property = _split(ann, properties)
    opts = ReportOptions(0.1, 0, seed, 0.95, False, False)
    blocks = []
    for prop in properties:
        labels, _ = _declared(by_property.get(prop.name, ann.iloc[:0]), prop)
        block: dict[str, Any] = {"name": prop.name, "reliability": None, "position_bias": None}
        if len(labels):
            lc = LabelCounts.from_frames(labels, None, labels=list(prop.labels))
            block["reliability"] = _reliability(lc, prop, opts)
            if prop.scale == "pairwise":
                block["position_bias"] = position_bias_figures(labels)
        blocks.append(block)
    return blocks


def _declared(ann: pd.DataFrame, prop: Property) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The labels in the property's declared set, and those outside it (missing: neither).
    The frame itself when every label is declared (no copy of a large study's labels)."""
    present = ann["label"].notna().to_numpy()
    known = present & ann["label"].isin(prop.labels).to_numpy()
    unknown = present & ~known
    return _rows(ann, known), _rows(ann, unknown)


def _rows(frame: pd.DataFrame, mask: np.ndarray) -> pd.DataFrame:
    """``frame.loc[mask]``, without a copy where the mask keeps every row or none (a copy
    of text kept by pyarrow combines its chunks in Arrow's pool, which keeps the memory)."""
    if mask.all():
        return frame
    return frame.iloc[:0] if not mask.any() else frame.loc[mask]


def _property_section(
    prop: Property,
    ann: pd.DataFrame,
    jud: pd.DataFrame | None,
    items: pd.DataFrame | None,
    excluded: dict[str, int],
    opts: ReportOptions,
) -> dict[str, Any]:
    section: dict[str, Any] = {**prop.as_dict(), "notes": []}
    if prop.labels_inferred:
        section["notes"].append("label set read from the data, not declared by the study")
    ann, unknown = _declared(ann, prop)
    if len(unknown):
        bad = pd.unique(unknown["label"].to_numpy())[:5]
        section["notes"].append(
            f"{len(unknown)} label(s) outside the declared set {list(prop.labels)} "
            f"were left out, e.g. {[str(b) for b in bad]}"
        )
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
        section["pairwise"] = pairwise_figures(outcomes, items, opts)
        section["ranking"], section["ranking_method"] = ranking_figures(outcomes, items, opts)
        section["position_bias"] = position_bias_figures(ann)
        section["prioritisation"] = prioritisation_figures(outcomes, items, opts)
    if prop.scale == "ordinal":
        section["likert"] = likert_figures(lc, items, binned)
    section["judges"] = [judge_figures(lc, name, prop, opts) for name in sorted(lc.judges)]
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
        section["judges_extra"] = judges_extra_figures(
            lc, jud if samples is None else samples, prop, opts
        )
    section["workers"] = (
        workers_figures(ann, lc, opts) if binned is None else {"reason": FINE_WORKERS}
    )
    section["perception"] = perception_figures(lc, lc_pw, prop)
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


def _reliability(lc: LabelCounts, prop: Property, opts: ReportOptions) -> list[dict[str, Any]]:
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
